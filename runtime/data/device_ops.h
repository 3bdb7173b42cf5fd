// DeviceOps: runs the agreed responses whose tensors live on a GPU.
//
// The executor (runtime/data/executor.h) hands every response with device >= 0 to the
// communicator's DeviceOps instead of its host Backend. Two implementations live
// in runtime/cuda/, compiled only when CUDA is built (HVD_HAVE_CUDA):
//   - "nccl": NCCL collectives on a dedicated stream, ordered after the caller's
//     stream by an event; Works complete from a finalizer thread once the GPU work
//     is done, so the background thread never blocks on the GPU.
//   - "gloo": host staging. Inputs are copied into pinned host memory, the host
//     Backend runs the collective, results are copied back; synchronous. Several
//     ranks can share one GPU this way (NCCL refuses duplicate devices).
// This header names no CUDA type, so the rest of the runtime builds without CUDA.
//
// Execute completes every present entry's Work itself, possibly later, from
// another thread. It returns non-OK only for a failure that breaks the
// communicator (an NCCL error, a timed-out collective, a CUDA error); the runtime
// then ends the job. Per-tensor results follow the host executor's conventions:
// allreduce and broadcast write the caller's output buffer; allgather, alltoall and
// reducescatter results are device memory owned by the Work (Work::device_result).
// The entries' TensorEntry objects are not used after Execute returns.
// Not thread-safe: only the background thread calls Execute.
#ifndef HVD_RUNTIME_DATA_DEVICE_OPS_H_
#define HVD_RUNTIME_DATA_DEVICE_OPS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/backend.h"
#include "runtime/common/status.h"
#include "runtime/data/device_phases.h"
#include "runtime/data/response.h"
#include "runtime/data/tensor_queue.h"
#include "runtime/store/store.h"

namespace hvd {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  // `entries[i]` is this rank's entry for r.names[i], or null if it has none
  // (a joined rank). r.type is never RESPONSE_ERROR, BARRIER or JOIN.
  virtual Status Execute(const Response& r, const std::vector<TensorEntry*>& entries) = 0;
};

struct DeviceOpsOptions {
  // The rendezvous store, scoped to this communicator ("nccl": rank 0 publishes the
  // ncclUniqueId here). Required.
  std::shared_ptr<Store> store;
  int rank = 0;  // within the communicator
  int size = 1;
  // The CUDA device this rank's tensors are on in this communicator. One device
  // per rank per communicator; a tensor on another device breaks the communicator.
  int device = 0;
  // Bound on communicator creation and on each collective (HVD_TIMEOUT).
  std::chrono::milliseconds timeout{30000};
  // "nccl" or "gloo" (HVD_GPU_OPERATIONS).
  std::string mode = "nccl";
  // "gloo" only: the communicator's host backend; not owned, must outlive the DeviceOps.
  Backend* host_backend = nullptr;
  // Bytes; the device fusion buffer is allocated at this size on first use.
  int64_t fusion_threshold = 128 << 20;
  // The timeline's receiver of each response's device phases ("nccl": from CUDA
  // event times), asked per response whether it wants them now (timing events are
  // recorded only then). Null: none.
  DevicePhasesHook on_phases;
  std::function<bool()> phases_wanted;
};

// Creates the DeviceOps for `options.mode`; collective over the communicator (all
// ranks call it for the same response). Without CUDA support it returns
// kInvalidUsage. Bounded by options.timeout.
Status CreateDeviceOps(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out);

// Whether this libhvd was built with CUDA (HVD_WITH_CUDA).
bool CudaBuilt();

// The NCCL version code this libhvd was built against (NCCL_VERSION_CODE, e.g.
// 22807 for 2.28.7), or 0 without CUDA.
int NcclVersionCode();

// Checks, at enqueue, that a device tensor can be run: CUDA is built, a device is
// present, `e.device` exists and the entry's buffers are device (or managed)
// memory on it. Returns kInvalidUsage or kInvalidArgument naming the tensor.
Status CheckDeviceTensor(const TensorEntry& e);

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_DEVICE_OPS_H_
