#include "runtime/cuda/cuda_util.h"

#include <cstdint>
#include <cstring>

namespace hvd {
namespace cuda {

Status CudaStatus(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return Status::OK();
  const std::string text = what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
      return Status::InvalidUsage(text);
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidValue:
      return Status::InvalidArgument(text);
    default:
      return Status::Internal(text);
  }
}

Status NcclStatus(ncclResult_t r, ncclComm_t comm, const std::string& what) {
  if (r == ncclSuccess) return Status::OK();
  std::string text = what + ": NCCL error: " + ncclGetErrorString(r);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') text += std::string(" (") + last + ")";
  switch (r) {
    case ncclRemoteError:
    case ncclSystemError:
      return Status::RemoteError(text);
    case ncclInvalidArgument:
      return Status::InvalidArgument(text);
    case ncclInvalidUsage:
      return Status::InvalidUsage(text);
    default:
      return Status::Internal(text);
  }
}

std::string SecondsText(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  std::string s = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    std::string frac = std::to_string(1000 + ms % 1000).substr(1);  // three digits
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}

bool NcclHasType(DataType dtype) { return dtype != DataType::kInt16; }

ncclDataType_t NcclType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kInt8: return ncclInt8;
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kInt16: break;
  }
  HVD_CHECK_MSG(false, "unknown dtype " + std::to_string(static_cast<int>(dtype)));
  return ncclInt8;
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAverage: return ncclAvg;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kAdasum: break;  // Refused for device tensors at enqueue.
  }
  HVD_CHECK_MSG(false, "unknown reduce op " + std::to_string(static_cast<int>(op)));
  return ncclSum;
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device) changed_ = cudaSetDevice(device) == cudaSuccess;
}

DeviceGuard::~DeviceGuard() {
  if (changed_ && previous_ >= 0) cudaSetDevice(previous_);
}

PersistentBuffer::~PersistentBuffer() {
  // The owner has drained its stream; cudaFree waits for the device anyway.
  if (data_ != nullptr) cudaFree(data_);
}

Status PersistentBuffer::Get(size_t bytes, size_t initial, cudaStream_t stream, void** out) {
  if (bytes == 0) bytes = 1;
  if (bytes > capacity_) {
    size_t want = bytes > initial ? bytes : initial;
    want = (want + (2u << 20) - 1) / (2u << 20) * (2u << 20);  // 2 MiB steps
    if (data_ != nullptr) {
      HVD_CUDA_RETURN(cudaStreamSynchronize(stream), "waiting to grow the device fusion buffer");
      HVD_CUDA_RETURN(cudaFree(data_), "freeing the device fusion buffer");
      data_ = nullptr;
      capacity_ = 0;
    }
    HVD_CUDA_RETURN(cudaMalloc(&data_, want),
                    "allocating a device fusion buffer of " + std::to_string(want) + " bytes");
    capacity_ = want;
  }
  *out = data_;
  return Status::OK();
}

Status ResultAllocator::Create(int device, std::unique_ptr<ResultAllocator>* out) {
  std::unique_ptr<ResultAllocator> a(new ResultAllocator(device));
  int pools = 0;
  HVD_CUDA_RETURN(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device),
                  "querying memory pool support of cuda:" + std::to_string(device));
  if (pools != 0) {
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    HVD_CUDA_RETURN(cudaMemPoolCreate(&a->pool_, &props),
                    "creating a memory pool on cuda:" + std::to_string(device));
    // Keep up to 1 GiB of freed results cached rather than returning it to the
    // driver at every synchronization.
    uint64_t keep = uint64_t{1} << 30;
    HVD_CUDA_RETURN(cudaMemPoolSetAttribute(a->pool_, cudaMemPoolAttrReleaseThreshold, &keep),
                    "configuring the result memory pool");
  }
  *out = std::move(a);
  return Status::OK();
}

ResultAllocator::~ResultAllocator() {
  // Outstanding allocations keep the pool's memory alive until they are freed.
  if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
}

Status ResultAllocator::Allocate(size_t bytes, cudaStream_t alloc_stream, cudaStream_t free_stream,
                                 std::shared_ptr<void>* out) {
  out->reset();
  if (bytes == 0) return Status::OK();
  void* p = nullptr;
  const int device = device_;
  const std::string what = "allocating " + std::to_string(bytes) + " bytes for a result on cuda:" +
                           std::to_string(device);
  if (pool_ != nullptr) {
    HVD_CUDA_RETURN(cudaMallocFromPoolAsync(&p, bytes, pool_, alloc_stream), what);
    *out = std::shared_ptr<void>(p, [device, free_stream](void* ptr) {
      DeviceGuard guard(device);
      cudaFreeAsync(ptr, free_stream);
    });
  } else {
    HVD_CUDA_RETURN(cudaMalloc(&p, bytes), what);
    *out = std::shared_ptr<void>(p, [device](void* ptr) {
      DeviceGuard guard(device);
      cudaFree(ptr);
    });
  }
  return Status::OK();
}

}  // namespace cuda
}  // namespace hvd
