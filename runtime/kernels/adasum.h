// Adasum (Horovod's adaptive summation) as a pure computation on host buffers:
// no communication, no state. The executor gathers every rank's buffer and runs
// this on each rank (runtime/data/executor.cc).
//
// Terms. A *vector* is one rank's copy of one tensor: `count` elements of a float
// dtype. The *pairwise combination* of vectors a and b is
//
//   combine(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// where a coefficient is exactly 1 when its squared norm is below sqrt(DBL_MIN)
// (2^-511), so combine(a, 0) = a and combine(0, 0) = 0. Orthogonal vectors add,
// equal vectors give themselves back (their average), and in between the shared
// component is averaged while the rest adds. The dot product and both squared
// norms are accumulated in double from the elements' exact values; the two scaled
// vectors are added in double and the sum is rounded to the dtype (float16 and
// bfloat16 through float32, to nearest-even). combine is symmetric.
//
// The *tree* combines the vectors of ranks 0..n-1 level by level. At each level
// the surviving vectors, in rank order, are paired as neighbours (first with
// second, third with fourth, ...); each pair is replaced by its combination and,
// when their number is odd, the last one is carried up unchanged to the next
// level. Levels repeat until one vector is left: ceil(log2 n) of them.
//   n = 4: combine(combine(v0, v1), combine(v2, v3))   (Horovod's tree for 2^k ranks)
//   n = 3: combine(combine(v0, v1), v2)
//   n = 5: combine(combine(combine(v0, v1), combine(v2, v3)), v4)
//   n = 6: combine(combine(combine(v0, v1), combine(v2, v3)), combine(v4, v5))
// Every intermediate combination is rounded to the dtype before the next level
// reads it, as in Horovod, which keeps it in the tensor's own buffer.
//
// Fused buffers are combined *per tensor*: each tensor has its own dot products
// and norms, as if it had been reduced alone. The result is a deterministic
// function of the input bytes, so ranks that run it on the same gathered bytes get
// bitwise-identical results.
#ifndef HVD_RUNTIME_KERNELS_ADASUM_H_
#define HVD_RUNTIME_KERNELS_ADASUM_H_

#include <cstdint>
#include <vector>

#include "runtime/common/types.h"

namespace hvd {

// Whether Adasum takes `dtype`: float16, bfloat16, float32 and float64.
bool AdasumSupports(DataType dtype);

// a = combine(a, b) over `count` elements of `dtype`. Precondition:
// AdasumSupports(dtype); a and b do not overlap.
void AdasumPair(DataType dtype, void* a, const void* b, int64_t count);

// Combines vectors[0..n) (n >= 1, each `count` elements) by the tree and leaves the
// result in vectors[0]; the other vectors are overwritten with intermediate
// results. Precondition: AdasumSupports(dtype); the vectors do not overlap.
void AdasumTree(DataType dtype, const std::vector<void*>& vectors, int64_t count);

// The fused form: buffers[r] is rank r's buffer holding the tensors back to back,
// counts[i] elements for tensor i. Each tensor is combined by the tree on its own;
// the results land in buffers[0], and the other buffers are overwritten.
void AdasumFused(DataType dtype, const std::vector<void*>& buffers,
                 const std::vector<int64_t>& counts);

}  // namespace hvd

#endif  // HVD_RUNTIME_KERNELS_ADASUM_H_
