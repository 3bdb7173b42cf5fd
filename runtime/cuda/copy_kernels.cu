#include "runtime/cuda/copy_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

namespace hvd {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocksPerCopy = 1024;

// Passed by value: 64 * 24 + 8 bytes, well inside the 4 KiB kernel parameter limit.
struct CopyBatch {
  CopyDesc copies[kCopiesPerLaunch];
  int n;
};

// Element arithmetic per storage type, matching runtime/kernels/reduce_kernels.cc.
template <typename T>
struct Elem {  // integers
  __device__ static T Apply(T x, int64_t divisor, double scale) {
    if (divisor != 1) x = static_cast<T>(static_cast<int64_t>(x) / divisor);
    if (scale != 1.0) x = static_cast<T>(static_cast<double>(x) * scale);
    return x;
  }
};

template <>
struct Elem<float> {
  __device__ static float Apply(float x, int64_t divisor, double scale) {
    if (divisor != 1) x = x / static_cast<float>(divisor);
    if (scale != 1.0) x = x * static_cast<float>(scale);  // ScaledCopy's rule
    return x;
  }
};

template <>
struct Elem<double> {
  __device__ static double Apply(double x, int64_t divisor, double scale) {
    if (divisor != 1) x = x / static_cast<double>(divisor);
    if (scale != 1.0) x = x * scale;
    return x;
  }
};

template <>
struct Elem<__half> {
  __device__ static __half Apply(__half x, int64_t divisor, double scale) {
    return __float2half_rn(Elem<float>::Apply(__half2float(x), divisor, scale));
  }
};

template <>
struct Elem<__nv_bfloat16> {
  __device__ static __nv_bfloat16 Apply(__nv_bfloat16 x, int64_t divisor, double scale) {
    return __float2bfloat16_rn(Elem<float>::Apply(__bfloat162float(x), divisor, scale));
  }
};

template <typename T>
__global__ void ScaledCopyKernel(CopyBatch batch, int64_t divisor, double scale) {
  const CopyDesc c = batch.copies[blockIdx.y];
  const T* src = static_cast<const T*>(c.src);
  T* dst = static_cast<T*>(c.dst);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < c.count;
       i += stride) {
    dst[i] = Elem<T>::Apply(src[i], divisor, scale);
  }
}

template <typename T>
__global__ void FillKernel(T* buf, int64_t count, T value) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    buf[i] = value;
  }
}

unsigned BlocksFor(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, kMaxBlocksPerCopy)));
}

template <typename T>
cudaError_t Launch(const std::vector<CopyDesc>& copies, int64_t divisor, double scale,
                   cudaStream_t stream) {
  for (size_t first = 0; first < copies.size(); first += kCopiesPerLaunch) {
    CopyBatch batch;
    batch.n = static_cast<int>(std::min<size_t>(kCopiesPerLaunch, copies.size() - first));
    int64_t longest = 0;
    for (int i = 0; i < batch.n; ++i) {
      batch.copies[i] = copies[first + i];
      longest = std::max(longest, batch.copies[i].count);
    }
    if (longest == 0) continue;
    const dim3 grid(BlocksFor(longest), static_cast<unsigned>(batch.n));
    ScaledCopyKernel<T><<<grid, kThreads, 0, stream>>>(batch, divisor, scale);
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchScaledCopies(DataType dtype, const std::vector<CopyDesc>& copies,
                               int64_t divisor, double scale, cudaStream_t stream) {
  if (copies.empty()) return cudaSuccess;
  switch (dtype) {
    case DataType::kFloat32: return Launch<float>(copies, divisor, scale, stream);
    case DataType::kFloat64: return Launch<double>(copies, divisor, scale, stream);
    case DataType::kFloat16: return Launch<__half>(copies, divisor, scale, stream);
    case DataType::kBFloat16: return Launch<__nv_bfloat16>(copies, divisor, scale, stream);
    case DataType::kInt8: return Launch<int8_t>(copies, divisor, scale, stream);
    case DataType::kUInt8: return Launch<uint8_t>(copies, divisor, scale, stream);
    case DataType::kInt32: return Launch<int32_t>(copies, divisor, scale, stream);
    case DataType::kInt64: return Launch<int64_t>(copies, divisor, scale, stream);
    case DataType::kInt16: return Launch<int16_t>(copies, divisor, scale, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchFill(void* buf, int64_t count, size_t elem_size, uint64_t pattern,
                       cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const unsigned blocks = BlocksFor(count);
  switch (elem_size) {
    case 1:
      FillKernel<uint8_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint8_t*>(buf), count,
                                                           static_cast<uint8_t>(pattern));
      break;
    case 2:
      FillKernel<uint16_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint16_t*>(buf), count,
                                                            static_cast<uint16_t>(pattern));
      break;
    case 4:
      FillKernel<uint32_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint32_t*>(buf), count,
                                                            static_cast<uint32_t>(pattern));
      break;
    case 8:
      FillKernel<uint64_t><<<blocks, kThreads, 0, stream>>>(static_cast<uint64_t*>(buf), count,
                                                            pattern);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace hvd
