// Adasum's arithmetic (see runtime/kernels/adasum.h for the combination and the tree).
//
// A pairwise combination makes two passes over the vectors: the first measures
// (a.b, |a|^2, |b|^2), the second writes a = ca * a + cb * b. The measuring pass
// keeps kLanes partial sums of each quantity, element i going to lane i % kLanes
// (the tail past the last whole group of kLanes to lane 0), and adds the lanes as
// (l0 + l1) + (l2 + l3): independent sums the CPU can overlap, in an order fixed
// by the code alone. Nothing here depends on timing, threads or the CPU's features
// at run time, so every rank computes the same bits.
#include "runtime/kernels/adasum.h"

#include <string>

#include "runtime/common/status.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace {

// A coefficient is 1 when its squared norm is below sqrt(DBL_MIN) = 2^-511.
constexpr double kMinNormSquared = 0x1p-511;
constexpr int kLanes = 4;

// How each dtype's elements are read as double and written back.
struct F32 {
  using T = float;
  static double Load(T v) { return v; }
  static T Store(double v) { return static_cast<float>(v); }
};
struct F64 {
  using T = double;
  static double Load(T v) { return v; }
  static T Store(double v) { return v; }
};
struct F16 {
  using T = uint16_t;
  static double Load(T v) { return HalfToFloat(v); }
  static T Store(double v) { return FloatToHalf(static_cast<float>(v)); }
};
struct BF16 {
  using T = uint16_t;
  static double Load(T v) { return BFloat16ToFloat(v); }
  static T Store(double v) { return FloatToBFloat16(static_cast<float>(v)); }
};

struct Measures {
  double dot = 0, a_norm2 = 0, b_norm2 = 0;
};

template <typename C>
Measures Measure(const typename C::T* a, const typename C::T* b, int64_t n) {
  double dot[kLanes] = {}, aa[kLanes] = {}, bb[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      const double x = C::Load(a[i + k]), y = C::Load(b[i + k]);
      dot[k] += x * y;
      aa[k] += x * x;
      bb[k] += y * y;
    }
  }
  for (; i < n; ++i) {
    const double x = C::Load(a[i]), y = C::Load(b[i]);
    dot[0] += x * y;
    aa[0] += x * x;
    bb[0] += y * y;
  }
  auto total = [](const double* l) { return (l[0] + l[1]) + (l[2] + l[3]); };
  static_assert(kLanes == 4, "total() adds four lanes");
  return {total(dot), total(aa), total(bb)};
}

double Coefficient(double dot, double norm2) {
  return norm2 < kMinNormSquared ? 1.0 : 1.0 - dot / (2.0 * norm2);
}

template <typename C>
void Pair(void* a_raw, const void* b_raw, int64_t n) {
  using T = typename C::T;
  T* a = static_cast<T*>(a_raw);
  const T* b = static_cast<const T*>(b_raw);
  const Measures m = Measure<C>(a, b, n);
  const double ca = Coefficient(m.dot, m.a_norm2);
  const double cb = Coefficient(m.dot, m.b_norm2);
  for (int64_t i = 0; i < n; ++i) a[i] = C::Store(ca * C::Load(a[i]) + cb * C::Load(b[i]));
}

}  // namespace

bool AdasumSupports(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

void AdasumPair(DataType dtype, void* a, const void* b, int64_t count) {
  if (count <= 0) return;
  switch (dtype) {
    case DataType::kFloat32: return Pair<F32>(a, b, count);
    case DataType::kFloat64: return Pair<F64>(a, b, count);
    case DataType::kFloat16: return Pair<F16>(a, b, count);
    case DataType::kBFloat16: return Pair<BF16>(a, b, count);
    default: break;
  }
  HVD_CHECK_MSG(false, std::string("Adasum does not take dtype ") + DataTypeName(dtype));
}

void AdasumTree(DataType dtype, const std::vector<void*>& vectors, int64_t count) {
  HVD_CHECK(!vectors.empty());
  // At the level with stride `step` the survivors are the vectors at multiples of
  // `step`; the one at i pairs with its neighbour at i + step, if there is one.
  const size_t n = vectors.size();
  for (size_t step = 1; step < n; step *= 2)
    for (size_t i = 0; i + step < n; i += 2 * step) AdasumPair(dtype, vectors[i], vectors[i + step], count);
}

void AdasumFused(DataType dtype, const std::vector<void*>& buffers,
                 const std::vector<int64_t>& counts) {
  HVD_CHECK(AdasumSupports(dtype));
  const size_t elem = DataTypeSize(dtype);
  std::vector<void*> vectors(buffers.size());
  int64_t offset = 0;
  for (int64_t count : counts) {
    for (size_t r = 0; r < buffers.size(); ++r)
      vectors[r] = static_cast<uint8_t*>(buffers[r]) + offset * elem;
    AdasumTree(dtype, vectors, count);
    offset += count;
  }
}

}  // namespace hvd
