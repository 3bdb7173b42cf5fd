// Element-wise kernels: the arithmetic every CPU backend shares.
//
// float16 and bfloat16 are computed in float32 and rounded back to nearest-even.
// Integer sums and products wrap modulo 2^bits (never undefined behaviour).
// AVERAGE reduces as SUM; the division by the contributor count is a separate step
// (DivideBuffer) so that every backend divides exactly once.
#ifndef HVD_RUNTIME_KERNELS_REDUCE_KERNELS_H_
#define HVD_RUNTIME_KERNELS_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "runtime/common/types.h"

namespace hvd {

// dst[i] = op(a[i], b[i]) for i < n. dst may equal a or b.
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t n);

// The kernel for (dtype, op); AVERAGE gives the SUM kernel. Null for ADASUM, which is
// not element-wise (runtime/kernels/adasum.h); never null for any other valid input.
ReduceFn GetReduceFn(DataType dtype, ReduceOp op);

// dst[i] = src[i] * factor (dst may equal src). factor == 1 copies (memmove when needed).
// Horovod's rule, exactly: integers are scaled in double and truncated toward zero;
// float32 is scaled by float(factor) in float32, float64 in float64, and float16 and
// bfloat16 in float32 (by float(factor)), rounded back to nearest-even.
void ScaledCopy(DataType dtype, void* dst, const void* src, size_t n, double factor);

// buf[i] /= divisor. Integers use integer division (truncation toward zero), matching
// C and PyTorch's `torch.div(rounding_mode='trunc')`.
void DivideBuffer(DataType dtype, void* buf, size_t n, int64_t divisor);

// MIN and MAX on floats are IEEE 754's minNum and maxNum (C's fmin and fmax, and
// NCCL's): a NaN loses to a number, and a result is NaN only where every rank's
// element is NaN, the same whatever the order of the ranks, on every backend.
//
// Fills n elements with the identity of `op` (0 for sum/average/adasum, 1 for
// product; for min and max NaN on floats, which they pass over, and the type's max
// or lowest on integers): what a joined rank contributes.
void FillIdentity(DataType dtype, ReduceOp op, void* buf, size_t n);

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace hvd

#endif  // HVD_RUNTIME_KERNELS_REDUCE_KERNELS_H_
