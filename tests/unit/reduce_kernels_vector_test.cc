// The vectorised 16-bit float kernels (runtime/kernels/reduce_kernels.cc converts a block
// at a time with branch-free code) must give exactly the bytes of the scalar
// conversions: every float16/bfloat16 pattern against many partners, for every op,
// plus ScaledCopy and DivideBuffer across the range (subnormals, overflow, NaN).
// The float and integer kernels are compared with plain scalar loops on random bits.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace {

using ToFloat = float (*)(uint16_t);
using FromFloat = uint16_t (*)(float);

float ScalarOp(ReduceOp op, float a, float b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kProduct: return a * b;
    // fmin/fmax: a NaN loses to a number.
    case ReduceOp::kMin: return std::isnan(a) ? b : std::isnan(b) ? a : (b < a ? b : a);
    case ReduceOp::kMax: return std::isnan(a) ? b : std::isnan(b) ? a : (a < b ? b : a);
    case ReduceOp::kAdasum: break;  // Not element-wise: adasum_test.cc.
  }
  return 0;
}

void ExpectSixteenBitKernelsMatchScalar(DataType t, ToFloat to, FromFloat from) {
  // Every pattern as `a`, against 48 partners: fixed interesting ones and random ones.
  std::vector<uint16_t> partners = {0x0000, 0x8000, 0x0001, 0x3c00, 0xbc00, 0x7c00, 0x3800,
                                    0x4000, 0x7bff, 0x0400, 0x03ff, 0x3f80, 0x7f80, 0x7e00};
  std::mt19937 gen(7);
  while (partners.size() < 48) partners.push_back(static_cast<uint16_t>(gen()));
  const size_t n = 65536 * partners.size();
  std::vector<uint16_t> a(n), b(n), got(n);
  for (size_t p = 0; p < partners.size(); ++p)
    for (uint32_t i = 0; i < 65536; ++i) {
      a[p * 65536 + i] = static_cast<uint16_t>(i);
      b[p * 65536 + i] = partners[p];
    }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
    GetReduceFn(t, op)(got.data(), a.data(), b.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const uint16_t want = from(ScalarOp(op, to(a[i]), to(b[i])));
      ASSERT_EQ(got[i], want) << DataTypeName(t) << " " << ReduceOpName(op) << std::hex
                              << " a=0x" << a[i] << " b=0x" << b[i];
    }
  }
  // Scaling and dividing land results on subnormals, midpoints and infinity.
  std::vector<uint16_t> all(65536), out(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  for (double factor : {0.5, 3.0, 1e-5, 7e3, 0.1}) {
    ScaledCopy(t, out.data(), all.data(), all.size(), factor);
    for (uint32_t i = 0; i < 65536; ++i)
      ASSERT_EQ(out[i], from(static_cast<float>(to(all[i]) * factor)))
          << DataTypeName(t) << " x" << factor << std::hex << " h=0x" << i;
  }
  for (int64_t divisor : {3, 1000, 65536}) {
    out = all;
    DivideBuffer(t, out.data(), out.size(), divisor);
    for (uint32_t i = 0; i < 65536; ++i)
      ASSERT_EQ(out[i], from(to(all[i]) / static_cast<float>(divisor)))
          << DataTypeName(t) << " /" << divisor << std::hex << " h=0x" << i;
  }
}

TEST(VectorKernels, Float16MatchesTheScalarConversions) {
  ExpectSixteenBitKernelsMatchScalar(DataType::kFloat16, &HalfToFloat, &FloatToHalf);
}

TEST(VectorKernels, BFloat16MatchesTheScalarConversions) {
  ExpectSixteenBitKernelsMatchScalar(DataType::kBFloat16, &BFloat16ToFloat, &FloatToBFloat16);
}

template <typename T>
void ExpectMatchesScalar(DataType t) {
  std::mt19937_64 gen(11);
  // Odd length and offset starts: the vector loops' heads and tails.
  const size_t n = 4099;
  std::vector<T> a(n), b(n), got(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = gen(), y = gen();
    std::memcpy(&a[i], &x, sizeof(T));
    std::memcpy(&b[i], &y, sizeof(T));
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax}) {
    for (size_t start : {size_t{0}, size_t{1}, size_t{3}}) {
      GetReduceFn(t, op)(got.data() + start, a.data() + start, b.data() + start, n - start);
      for (size_t i = start; i < n; ++i) {
        T want;
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          switch (op) {
            case ReduceOp::kProduct: want = static_cast<T>(static_cast<U>(a[i]) * static_cast<U>(b[i])); break;
            case ReduceOp::kMin: want = b[i] < a[i] ? b[i] : a[i]; break;
            case ReduceOp::kMax: want = a[i] < b[i] ? b[i] : a[i]; break;
            default: want = static_cast<T>(static_cast<U>(a[i]) + static_cast<U>(b[i])); break;
          }
        } else {
          switch (op) {
            case ReduceOp::kProduct: want = a[i] * b[i]; break;
            case ReduceOp::kMin:
              want = std::isnan(a[i]) ? b[i] : std::isnan(b[i]) ? a[i] : (b[i] < a[i] ? b[i] : a[i]);
              break;
            case ReduceOp::kMax:
              want = std::isnan(a[i]) ? b[i] : std::isnan(b[i]) ? a[i] : (a[i] < b[i] ? b[i] : a[i]);
              break;
            default: want = a[i] + b[i]; break;
          }
        }
        ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(T)), 0)
            << DataTypeName(t) << " " << ReduceOpName(op) << " at " << i;
      }
    }
  }
}

TEST(VectorKernels, WideTypesMatchScalarLoops) {
  ExpectMatchesScalar<float>(DataType::kFloat32);
  ExpectMatchesScalar<double>(DataType::kFloat64);
  ExpectMatchesScalar<int32_t>(DataType::kInt32);
  ExpectMatchesScalar<int64_t>(DataType::kInt64);
}

}  // namespace
}  // namespace hvd
