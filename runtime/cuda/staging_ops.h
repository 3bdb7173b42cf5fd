// StagingOps: device tensors through host staging over the host backend
// (HVD_GPU_OPERATIONS=gloo).
//
// Each response is run synchronously in three steps: the inputs are copied into
// one pinned host buffer (after the work queued on the callers' streams), a host
// Executor runs the response over the communicator's host Backend exactly as it
// runs host tensors (fusion, scale factors, joined ranks and all), and the results
// are copied back: into the callers' output buffers (allreduce, broadcast) or into
// device memory owned by the Work (allgather, alltoall, reducescatter). Slower than
// NCCL, but it works where NCCL refuses: several ranks sharing one GPU.
#ifndef HVD_RUNTIME_CUDA_STAGING_OPS_H_
#define HVD_RUNTIME_CUDA_STAGING_OPS_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <vector>

#include "runtime/cuda/cuda_util.h"
#include "runtime/data/device_ops.h"
#include "runtime/data/executor.h"

namespace hvd {
namespace cuda {

// Pinned host memory, allocated once and grown when needed. Not thread-safe.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least max(bytes, 1) bytes; the contents are not kept when it grows.
  Status Get(size_t bytes, uint8_t** out);

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

class StagingOps : public DeviceOps {
 public:
  // options.host_backend is required.
  static Status Create(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out);
  ~StagingOps() override;

  Status Execute(const Response& r, const std::vector<TensorEntry*>& entries) override;

 private:
  explicit StagingOps(const DeviceOpsOptions& options) : options_(options), host_(options.host_backend) {}

  // Copies the results of the host entries back to the device and completes the
  // callers' Works.
  Status CopyBack(const Response& r, const std::vector<TensorEntry*>& entries,
                  const std::vector<TensorEntry>& host);

  DeviceOpsOptions options_;
  Executor host_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  std::unique_ptr<ResultAllocator> results_;
  PinnedBuffer in_;
  PinnedBuffer out_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_STAGING_OPS_H_
