// Device copy kernels for the fusion buffer: many tensors copied in one launch,
// with the scale factors and the AVERAGE division fused into the copy.
//
// One launch moves up to kCopiesPerLaunch tensors: grid row y copies tensor y,
// its blocks striding over the elements. Each element becomes
//   dst = (src / divisor) * scale
// with the same arithmetic as the host kernels (runtime/kernels/reduce_kernels.h): float16
// and bfloat16 computed in float32 and rounded to nearest-even, the scale applied
// in double, integers divided with truncation toward zero and scaled in double.
// divisor 1 and scale 1 skip their step, so a plain copy is exact for every dtype.
#ifndef HVD_RUNTIME_CUDA_COPY_KERNELS_H_
#define HVD_RUNTIME_CUDA_COPY_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "runtime/common/types.h"

namespace hvd {
namespace cuda {

struct CopyDesc {
  const void* src;
  void* dst;
  int64_t count;  // elements
};

constexpr int kCopiesPerLaunch = 64;

// Queues the copies on `stream` (ceil(n / kCopiesPerLaunch) launches). src and dst
// of one copy may be equal (in place) but must not otherwise overlap.
cudaError_t LaunchScaledCopies(DataType dtype, const std::vector<CopyDesc>& copies,
                               int64_t divisor, double scale, cudaStream_t stream);

// Fills `count` elements of `elem_size` bytes (1, 2, 4 or 8) with the bit pattern
// in the low bytes of `pattern`.
cudaError_t LaunchFill(void* buf, int64_t count, size_t elem_size, uint64_t pattern,
                       cudaStream_t stream);

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_COPY_KERNELS_H_
