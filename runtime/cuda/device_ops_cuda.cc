// DeviceOps in a CUDA build: the factory, and the enqueue-time checks of device
// tensors. (runtime/data/device_ops_none.cc is the build without CUDA.)
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "runtime/cuda/cuda_util.h"
#include "runtime/cuda/nccl_ops.h"
#include "runtime/cuda/staging_ops.h"
#include "runtime/data/device_ops.h"

namespace hvd {
namespace {

// The number of usable devices, or why there is none.
Status DeviceCount(int* count) {
  *count = 0;
  const cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // cudaGetDeviceCount's failure is not sticky; clear it
    return Status::InvalidUsage(std::string("no usable CUDA device: cudaGetDeviceCount: ") +
                                cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
  if (*count == 0) return Status::InvalidUsage("no CUDA device is present");
  return Status::OK();
}

Status CheckBuffer(const TensorEntry& e, const void* p, const char* which) {
  if (p == nullptr) return Status::OK();  // the runtime checks null buffers itself
  cudaPointerAttributes a;
  const cudaError_t err = cudaPointerGetAttributes(&a, p);
  const std::string t = "tensor '" + e.name + "': the " + which + " buffer ";
  const std::string dev = "cuda:" + std::to_string(e.device);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return Status::InvalidArgument(t + "is not memory CUDA knows (" + cudaGetErrorName(err) +
                                   "), but the tensor was enqueued for " + dev);
  }
  if (a.type == cudaMemoryTypeManaged) return Status::OK();
  if (a.type == cudaMemoryTypeDevice) {
    if (a.device == e.device) return Status::OK();
    return Status::InvalidArgument(t + "is on cuda:" + std::to_string(a.device) +
                                   ", but the tensor was enqueued for " + dev);
  }
  return Status::InvalidArgument(t + "is host memory, but the tensor was enqueued for " + dev +
                                 " (pass device -1 for host tensors)");
}

}  // namespace

Status CreateDeviceOps(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out) {
  if (!options.store) return Status::InvalidArgument("the device backend needs a store");
  int count = 0;
  HVD_RETURN_IF_ERROR(DeviceCount(&count));
  if (options.device < 0 || options.device >= count)
    return Status::InvalidArgument("device cuda:" + std::to_string(options.device) +
                                   " does not exist (this process sees " + std::to_string(count) +
                                   " device(s))");
  const std::string what = "starting the " + options.mode + " device backend on cuda:" +
                           std::to_string(options.device) + " (rank " +
                           std::to_string(options.rank) + " of " + std::to_string(options.size) + ")";
  if (options.mode == "nccl") return cuda::NcclOps::Create(options, out).Prepend(what);
  if (options.mode == "gloo") return cuda::StagingOps::Create(options, out).Prepend(what);
  return Status::InvalidArgument("unknown device backend '" + options.mode +
                                 "' (HVD_GPU_OPERATIONS is nccl or gloo)");
}

bool CudaBuilt() { return true; }

int NcclVersionCode() { return NCCL_VERSION_CODE; }

Status CheckDeviceTensor(const TensorEntry& e) {
  const std::string t = "tensor '" + e.name + "': ";
  int count = 0;
  Status s = DeviceCount(&count);
  if (!s.ok())
    return Status(s.code(), t + "it is on cuda:" + std::to_string(e.device) + ", but " + s.message());
  if (e.device < 0 || e.device >= count)
    return Status::InvalidArgument(t + "device cuda:" + std::to_string(e.device) +
                                   " does not exist (this process sees " + std::to_string(count) +
                                   " device(s))");
  // Querying a pointer may initialise CUDA on the current device: make it the
  // tensor's, where the caller already has a context.
  cuda::DeviceGuard guard(e.device);
  HVD_RETURN_IF_ERROR(CheckBuffer(e, e.input, "input"));
  if (e.type == OpType::kAllreduce || e.type == OpType::kBroadcast)
    HVD_RETURN_IF_ERROR(CheckBuffer(e, e.output, "output"));
  return Status::OK();
}

}  // namespace hvd
