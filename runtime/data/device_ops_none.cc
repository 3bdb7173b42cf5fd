// DeviceOps in a build without CUDA: every device tensor is refused with the reason.
// (The CUDA build compiles runtime/cuda/device_ops_cuda.cc instead.)
#ifndef HVD_HAVE_CUDA

#include "runtime/data/device_ops.h"

namespace hvd {
namespace {

const char kNoCuda[] = "this libhvd was built without CUDA (HVD_WITH_CUDA)";

}  // namespace

Status CreateDeviceOps(const DeviceOpsOptions& options, std::unique_ptr<DeviceOps>* out) {
  return Status::InvalidUsage(kNoCuda);
}

bool CudaBuilt() { return false; }

int NcclVersionCode() { return 0; }

Status CheckDeviceTensor(const TensorEntry& e) {
  return Status::InvalidUsage("tensor '" + e.name + "' is on cuda:" + std::to_string(e.device) +
                              ", but " + kNoCuda);
}

}  // namespace hvd

#endif  // HVD_HAVE_CUDA
