// CUDA and NCCL helpers shared by the device backends: error codes as Statuses,
// type mapping, a current-device guard and the device memory the backends keep.
// CUDA builds only (runtime/cuda/ is compiled when HVD_HAVE_CUDA).
#ifndef HVD_RUNTIME_CUDA_CUDA_UTIL_H_
#define HVD_RUNTIME_CUDA_CUDA_UTIL_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {
namespace cuda {

// OK for cudaSuccess, else kInternal "<what>: cudaErrorX (text)". Errors that say
// there is no usable device become kInvalidUsage.
Status CudaStatus(cudaError_t e, const std::string& what);

// OK for ncclSuccess, else "<what>: NCCL error: <ncclGetErrorString> (<ncclGetLastError>)".
// ncclRemoteError and ncclSystemError become kRemoteError, ncclInvalidArgument
// kInvalidArgument, ncclInvalidUsage kInvalidUsage, the rest kInternal. `comm` may
// be null.
Status NcclStatus(ncclResult_t r, ncclComm_t comm, const std::string& what);

#define HVD_CUDA_RETURN(expr, what)                                    \
  do {                                                                 \
    cudaError_t _hvd_cuda_err = (expr);                                \
    if (_hvd_cuda_err != cudaSuccess) return ::hvd::cuda::CudaStatus(_hvd_cuda_err, (what)); \
  } while (0)

// "30 s", "0.5 s": a timeout as the errors that cite HVD_TIMEOUT write it.
std::string SecondsText(std::chrono::milliseconds d);

// NCCL's type for `dtype`; false for a type NCCL cannot reduce (int16), which
// then moves only as bytes.
bool NcclHasType(DataType dtype);
ncclDataType_t NcclType(DataType dtype);
ncclRedOp_t NcclOp(ReduceOp op);

// Makes `device` current for its lifetime and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

// A device buffer that is allocated once and kept (the fusion buffer), grown when
// a response needs more. Growing waits for `stream` first, since work queued on it
// may still use the old memory. Not thread-safe.
class PersistentBuffer {
 public:
  PersistentBuffer() = default;
  ~PersistentBuffer();
  PersistentBuffer(const PersistentBuffer&) = delete;
  PersistentBuffer& operator=(const PersistentBuffer&) = delete;

  // At least max(bytes, 1) bytes, 256-byte aligned, on the current device. The
  // first allocation is at least `initial` bytes.
  Status Get(size_t bytes, size_t initial, cudaStream_t stream, void** out);

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

// Device results owned by Works: stream-ordered allocations from a memory pool
// of this rank's own (so freed memory is reused without going back to the
// driver), or cudaMalloc where the device has no pools. Thread-safe.
class ResultAllocator {
 public:
  static Status Create(int device, std::unique_ptr<ResultAllocator>* out);
  ~ResultAllocator();

  // `bytes` of device memory usable in `alloc_stream` order. The returned pointer
  // frees itself, once its last owner drops it, in `free_stream` order (null: the
  // legacy default stream), so reads the caller queued there finish first. A
  // zero-byte request gives null.
  Status Allocate(size_t bytes, cudaStream_t alloc_stream, cudaStream_t free_stream,
                  std::shared_ptr<void>* out);

 private:
  explicit ResultAllocator(int device) : device_(device) {}
  int device_;
  cudaMemPool_t pool_ = nullptr;  // null: no pool support
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_CUDA_UTIL_H_
