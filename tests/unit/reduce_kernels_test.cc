// Unit tests for runtime/kernels/reduce_kernels.h: the 16-bit float conversions, the
// element-wise reduce kernels, ScaledCopy, DivideBuffer and FillIdentity.
//
// The conversions are checked against an independent reference (std::ldexp on the
// decoded sign, exponent and mantissa) over every 16-bit pattern, and rounding is
// checked at, just above and just below every midpoint between neighbouring values.
#include "runtime/kernels/reduce_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

namespace hvd {
namespace {

float BitsToFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

bool HalfIsNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool BFloat16IsNaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The value of a float16 bit pattern, computed from its fields (not by bit shifting
// into a float, which is what the code under test does).
double HalfReference(uint16_t h) {
  const int sign = (h >> 15) & 1;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 0x1f) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
  } else {
    v = std::ldexp(static_cast<double>(1024 + mant), exp - 25);
  }
  return sign ? -v : v;
}

double BFloat16Reference(uint16_t b) {
  const int sign = (b >> 15) & 1;
  const int exp = (b >> 7) & 0xff;
  const int mant = b & 0x7f;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -133);
  } else if (exp == 0xff) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::nan("");
  } else {
    v = std::ldexp(static_cast<double>(128 + mant), exp - 134);
  }
  return sign ? -v : v;
}

// ---------------------------------------------------------------- float16

TEST(HalfConversionTest, EveryBitPatternDecodesToItsValueAndRoundTrips) {
  for (uint32_t i = 0; i <= 0xffffu; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    const float f = HalfToFloat(h);
    if (HalfIsNaN(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << "h=0x" << i;
      ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << "h=0x" << i;
      const uint16_t back = FloatToHalf(f);
      ASSERT_TRUE(HalfIsNaN(back)) << std::hex << "h=0x" << i << " came back as 0x" << back;
      // The payload survives; a signalling NaN may come back quiet.
      ASSERT_EQ(back | 0x200u, h | 0x200u) << std::hex << "h=0x" << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), HalfReference(h)) << std::hex << "h=0x" << i;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << std::hex << "h=0x" << i;
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << "h=0x" << i;
  }
}

TEST(HalfConversionTest, MidpointsRoundToNearestEven) {
  // Every pair of neighbouring finite magnitudes, both signs, subnormals included.
  for (uint16_t h = 0; h < 0x7bff; ++h) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t lo = sign | h, hi = sign | static_cast<uint16_t>(h + 1);
      // The midpoint needs 12 significant bits, so it is exact in float.
      const float mid = static_cast<float>((HalfReference(lo) + HalfReference(hi)) / 2);
      const uint16_t even = (h & 1u) ? hi : lo;
      ASSERT_EQ(FloatToHalf(mid), even) << std::hex << "between 0x" << lo << " and 0x" << hi;
      const float toward_hi = std::nextafter(mid, sign ? -INFINITY : INFINITY);
      const float toward_lo = std::nextafter(mid, 0.0f);
      ASSERT_EQ(FloatToHalf(toward_hi), hi) << std::hex << "just past the midpoint of 0x" << lo;
      ASSERT_EQ(FloatToHalf(toward_lo), lo) << std::hex << "just short of the midpoint of 0x" << lo;
    }
  }
}

TEST(HalfConversionTest, SpecificRoundingCases) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even 1.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 (odd) and 1 + 2^-9: goes up.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);  // the largest finite half
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
}

TEST(HalfConversionTest, OverflowGoesToInfinity) {
  EXPECT_EQ(FloatToHalf(65519.996f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);    // the midpoint; 65504 is odd, so up
  EXPECT_EQ(FloatToHalf(65536.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_TRUE(std::isinf(HalfToFloat(0x7c00)));
  EXPECT_GT(HalfToFloat(0x7c00), 0);
  EXPECT_LT(HalfToFloat(0xfc00), 0);
}

TEST(HalfConversionTest, Subnormals) {
  const float tiny = std::ldexp(1.0f, -24);  // the smallest half subnormal
  EXPECT_EQ(FloatToHalf(tiny), 0x0001);
  EXPECT_EQ(FloatToHalf(-tiny), 0x8001);
  EXPECT_EQ(FloatToHalf(1023 * tiny), 0x03ff);  // the largest subnormal
  EXPECT_EQ(FloatToHalf(1024 * tiny), 0x0400);  // the smallest normal
  EXPECT_EQ(FloatToHalf(1023.5f * tiny), 0x0400);  // rounds up into the normals
  EXPECT_EQ(FloatToHalf(tiny / 2), 0x0000);          // tie between 0 and 1: even 0
  EXPECT_EQ(FloatToHalf(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(0.75f * tiny), 0x0001);
  EXPECT_EQ(FloatToHalf(1.5f * tiny), 0x0002);  // tie between 1 and 2: even 2
  EXPECT_EQ(FloatToHalf(2.5f * tiny), 0x0002);  // tie between 2 and 3: even 2
  EXPECT_EQ(FloatToHalf(tiny / 4), 0x0000);
  EXPECT_EQ(FloatToHalf(-tiny / 4), 0x8000);  // underflow keeps the sign
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(HalfToFloat(0x0001), tiny);
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * tiny);
}

TEST(HalfConversionTest, SignedZero) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_FALSE(std::signbit(HalfToFloat(0x0000)));
  EXPECT_EQ(HalfToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
}

TEST(HalfConversionTest, NaNStaysNaN) {
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu,
                        0x7f801fffu}) {
    const uint16_t h = FloatToHalf(BitsToFloat(bits));
    EXPECT_TRUE(HalfIsNaN(h)) << std::hex << "float 0x" << bits << " became 0x" << h;
    EXPECT_EQ((h & 0x8000u) != 0, (bits & 0x80000000u) != 0) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xfc01)));
}

// ---------------------------------------------------------------- bfloat16

TEST(BFloat16ConversionTest, EveryBitPatternDecodesToItsValueAndRoundTrips) {
  for (uint32_t i = 0; i <= 0xffffu; ++i) {
    const uint16_t b = static_cast<uint16_t>(i);
    const float f = BFloat16ToFloat(b);
    if (BFloat16IsNaN(b)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << "b=0x" << i;
      const uint16_t back = FloatToBFloat16(f);
      ASSERT_TRUE(BFloat16IsNaN(back)) << std::hex << "b=0x" << i << " came back as 0x" << back;
      ASSERT_EQ(back | 0x40u, b | 0x40u) << std::hex << "b=0x" << i;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), BFloat16Reference(b)) << std::hex << "b=0x" << i;
    ASSERT_EQ(std::signbit(f), (b & 0x8000u) != 0) << std::hex << "b=0x" << i;
    ASSERT_EQ(FloatToBFloat16(f), b) << std::hex << "b=0x" << i;
  }
}

TEST(BFloat16ConversionTest, MidpointsRoundToNearestEven) {
  // Every pair of neighbouring finite magnitudes (subnormals included), both signs.
  for (uint16_t b = 0; b < 0x7f7f; ++b) {
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t lo = sign | b, hi = sign | static_cast<uint16_t>(b + 1);
      const float mid = static_cast<float>((BFloat16Reference(lo) + BFloat16Reference(hi)) / 2);
      const uint16_t even = (b & 1u) ? hi : lo;
      ASSERT_EQ(FloatToBFloat16(mid), even) << std::hex << "between 0x" << lo << " and 0x" << hi;
      ASSERT_EQ(FloatToBFloat16(std::nextafter(mid, sign ? -INFINITY : INFINITY)), hi)
          << std::hex << "just past the midpoint of 0x" << lo;
      ASSERT_EQ(FloatToBFloat16(std::nextafter(mid, 0.0f)), lo)
          << std::hex << "just short of the midpoint of 0x" << lo;
    }
  }
}

TEST(BFloat16ConversionTest, SpecificCases) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToBFloat16(0.0f), 0x0000);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_TRUE(std::signbit(BFloat16ToFloat(0x8000)));
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  // The largest float lies past the midpoint above the largest bfloat16.
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x7f7f7fffu)), 0x7f7f);
  // Float subnormals round like any other value.
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToBFloat16(BitsToFloat(0x00018000u)), 0x0002);
}

TEST(BFloat16ConversionTest, NaNStaysNaN) {
  // 0x7f800001 would truncate (and round) to infinity if NaN were not special-cased.
  for (uint32_t bits : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu,
                        0x7f80ffffu, 0x7fbfffffu}) {
    const uint16_t b = FloatToBFloat16(BitsToFloat(bits));
    EXPECT_TRUE(BFloat16IsNaN(b)) << std::hex << "float 0x" << bits << " became 0x" << b;
    EXPECT_EQ((b & 0x8000u) != 0, (bits & 0x80000000u) != 0) << std::hex << bits;
  }
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7fc0)));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7f81)));
}

// ---------------------------------------------------------------- reduce kernels

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                              DataType::kBFloat16, DataType::kInt8,    DataType::kUInt8,
                              DataType::kInt32,   DataType::kInt64,  DataType::kInt16};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct};

// Encodes small exact values as `dtype` elements and decodes them back.
std::vector<uint8_t> Encode(DataType dtype, const std::vector<double>& v) {
  std::vector<uint8_t> out(v.size() * DataTypeSize(dtype));
  for (size_t i = 0; i < v.size(); ++i) {
    uint8_t* p = out.data() + i * DataTypeSize(dtype);
    switch (dtype) {
      case DataType::kFloat32: { float x = static_cast<float>(v[i]); std::memcpy(p, &x, 4); break; }
      case DataType::kFloat64: { double x = v[i]; std::memcpy(p, &x, 8); break; }
      case DataType::kFloat16: { uint16_t x = FloatToHalf(static_cast<float>(v[i])); std::memcpy(p, &x, 2); break; }
      case DataType::kBFloat16: { uint16_t x = FloatToBFloat16(static_cast<float>(v[i])); std::memcpy(p, &x, 2); break; }
      case DataType::kInt8: { int8_t x = static_cast<int8_t>(v[i]); std::memcpy(p, &x, 1); break; }
      case DataType::kUInt8: { uint8_t x = static_cast<uint8_t>(v[i]); std::memcpy(p, &x, 1); break; }
      case DataType::kInt32: { int32_t x = static_cast<int32_t>(v[i]); std::memcpy(p, &x, 4); break; }
      case DataType::kInt64: { int64_t x = static_cast<int64_t>(v[i]); std::memcpy(p, &x, 8); break; }
      case DataType::kInt16: { int16_t x = static_cast<int16_t>(v[i]); std::memcpy(p, &x, 2); break; }
    }
  }
  return out;
}

std::vector<double> Decode(DataType dtype, const std::vector<uint8_t>& bytes) {
  const size_t elem = DataTypeSize(dtype);
  std::vector<double> out(bytes.size() / elem);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = bytes.data() + i * elem;
    switch (dtype) {
      case DataType::kFloat32: { float x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case DataType::kFloat64: { double x; std::memcpy(&x, p, 8); out[i] = x; break; }
      case DataType::kFloat16: { uint16_t x; std::memcpy(&x, p, 2); out[i] = HalfToFloat(x); break; }
      case DataType::kBFloat16: { uint16_t x; std::memcpy(&x, p, 2); out[i] = BFloat16ToFloat(x); break; }
      case DataType::kInt8: { int8_t x; std::memcpy(&x, p, 1); out[i] = x; break; }
      case DataType::kUInt8: { uint8_t x; std::memcpy(&x, p, 1); out[i] = x; break; }
      case DataType::kInt32: { int32_t x; std::memcpy(&x, p, 4); out[i] = x; break; }
      case DataType::kInt64: { int64_t x; std::memcpy(&x, p, 8); out[i] = static_cast<double>(x); break; }
      case DataType::kInt16: { int16_t x; std::memcpy(&x, p, 2); out[i] = x; break; }
    }
  }
  return out;
}

bool IsSigned(DataType t) { return t != DataType::kUInt8; }

double Reference(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kMin: return std::min(a, b);
    case ReduceOp::kMax: return std::max(a, b);
    case ReduceOp::kAdasum: break;  // Not element-wise: adasum_test.cc.
  }
  return 0;
}

class ReduceFnTest : public ::testing::TestWithParam<std::tuple<DataType, ReduceOp>> {};

// Small values whose sums and products are exact in every type (no overflow even
// in int8 and uint8), with negatives for the signed types so min and max are
// told apart from, e.g., "min of absolute values".
TEST_P(ReduceFnTest, MatchesReferenceOnExactValues) {
  const auto [dtype, op] = GetParam();
  std::vector<double> a = {0, 1, 2, 3, 7, 11, 5, 0, 9, 1};
  std::vector<double> b = {0, 3, 2, 1, 4, 0, 11, 6, 9, 10};
  if (IsSigned(dtype)) {
    a.insert(a.end(), {-1, -3, 2, -8, -5, 6});
    b.insert(b.end(), {2, -2, -7, -1, -5, -6});
  }
  if (dtype == DataType::kFloat32 || dtype == DataType::kFloat64 || dtype == DataType::kFloat16 ||
      dtype == DataType::kBFloat16) {
    a.insert(a.end(), {0.5, -1.25, 1.5});
    b.insert(b.end(), {0.25, 3, -0.5});
  }
  ReduceFn fn = GetReduceFn(dtype, op);
  ASSERT_NE(fn, nullptr);
  const auto ea = Encode(dtype, a), eb = Encode(dtype, b);
  std::vector<uint8_t> dst(ea.size(), 0xcd);
  fn(dst.data(), ea.data(), eb.data(), a.size());
  const auto got = Decode(dtype, dst);
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(got[i], Reference(op, a[i], b[i]))
        << DataTypeName(dtype) << " " << ReduceOpName(op) << "(" << a[i] << ", " << b[i] << ")";

  // dst may alias a or b.
  auto in_a = ea;
  fn(in_a.data(), in_a.data(), eb.data(), a.size());
  EXPECT_EQ(in_a, dst) << "dst aliasing a";
  auto in_b = eb;
  fn(in_b.data(), ea.data(), in_b.data(), a.size());
  EXPECT_EQ(in_b, dst) << "dst aliasing b";

  // Only n elements are written.
  std::vector<uint8_t> partial(ea.size(), 0xcd);
  fn(partial.data(), ea.data(), eb.data(), 3);
  const size_t elem = DataTypeSize(dtype);
  EXPECT_TRUE(std::equal(partial.begin(), partial.begin() + 3 * elem, dst.begin()));
  for (size_t i = 3 * elem; i < partial.size(); ++i) ASSERT_EQ(partial[i], 0xcd) << "byte " << i;
  std::vector<uint8_t> untouched(ea.size(), 0xcd);
  fn(untouched.data(), ea.data(), eb.data(), 0);
  EXPECT_EQ(untouched, std::vector<uint8_t>(ea.size(), 0xcd));
}

INSTANTIATE_TEST_SUITE_P(AllTypesAndOps, ReduceFnTest,
                         ::testing::Combine(::testing::ValuesIn(kAllTypes), ::testing::ValuesIn(kAllOps)),
                         [](const auto& info) {
                           return std::string(DataTypeName(std::get<0>(info.param))) + "_" +
                                  ReduceOpName(std::get<1>(info.param));
                         });

TEST(ReduceKernelTest, AverageUsesTheSumKernel) {
  for (DataType t : kAllTypes)
    EXPECT_EQ(GetReduceFn(t, ReduceOp::kAverage), GetReduceFn(t, ReduceOp::kSum)) << DataTypeName(t);
}

// Integer sums and products wrap modulo 2^bits. The expected values are computed in
// unsigned arithmetic; a sanitizer build (HVD_ASAN) also checks there is no UB.
template <typename T>
void ExpectWraps(DataType dtype, std::vector<T> a, std::vector<T> b) {
  using U = std::make_unsigned_t<T>;
  std::vector<T> sum(a.size()), prod(a.size());
  GetReduceFn(dtype, ReduceOp::kSum)(sum.data(), a.data(), b.data(), a.size());
  GetReduceFn(dtype, ReduceOp::kProduct)(prod.data(), a.data(), b.data(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const T want_sum = static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a[i])) +
                                                     static_cast<uint64_t>(static_cast<U>(b[i]))));
    const T want_prod = static_cast<T>(static_cast<U>(static_cast<uint64_t>(static_cast<U>(a[i])) *
                                                      static_cast<uint64_t>(static_cast<U>(b[i]))));
    EXPECT_EQ(sum[i], want_sum) << DataTypeName(dtype) << " " << +a[i] << " + " << +b[i];
    EXPECT_EQ(prod[i], want_prod) << DataTypeName(dtype) << " " << +a[i] << " * " << +b[i];
  }
}

TEST(ReduceKernelTest, IntegerSumAndProductWrap) {
  ExpectWraps<int8_t>(DataType::kInt8, {127, -128, 100, -128, 16, -100, 127},
                      {1, -1, 3, -1, 16, 100, 127});
  ExpectWraps<uint8_t>(DataType::kUInt8, {255, 200, 16, 255, 128}, {1, 2, 16, 255, 2});
  ExpectWraps<int32_t>(DataType::kInt32, {INT32_MAX, INT32_MIN, 65536, INT32_MIN, -7, 46341},
                       {1, -1, 65536, -1, 3, 46341});
  ExpectWraps<int64_t>(DataType::kInt64,
                       {INT64_MAX, INT64_MIN, int64_t{1} << 32, INT64_MIN, 3037000500LL},
                       {1, -1, int64_t{1} << 32, -1, 3037000500LL});
  // A few spelled out.
  int8_t a8[] = {127, 16}, b8[] = {1, 16}, d8[2];
  GetReduceFn(DataType::kInt8, ReduceOp::kSum)(d8, a8, b8, 2);
  EXPECT_EQ(d8[0], -128);
  GetReduceFn(DataType::kInt8, ReduceOp::kProduct)(d8, a8, b8, 2);
  EXPECT_EQ(d8[0], 127);
  EXPECT_EQ(d8[1], 0);
  int32_t a32[] = {INT32_MAX, INT32_MIN}, b32[] = {1, -1}, d32[2];
  GetReduceFn(DataType::kInt32, ReduceOp::kSum)(d32, a32, b32, 2);
  EXPECT_EQ(d32[0], INT32_MIN);
  EXPECT_EQ(d32[1], INT32_MAX);
  GetReduceFn(DataType::kInt32, ReduceOp::kProduct)(d32, a32, b32, 2);
  EXPECT_EQ(d32[1], INT32_MIN);
  int64_t a64[] = {INT64_MIN}, b64[] = {-1}, d64[1];
  GetReduceFn(DataType::kInt64, ReduceOp::kProduct)(d64, a64, b64, 1);
  EXPECT_EQ(d64[0], INT64_MIN);
}

TEST(ReduceKernelTest, MinMaxAtTheExtremesOfEachIntegerType) {
  int8_t a8[] = {-128, 127, -1}, b8[] = {127, -128, 0}, d8[3];
  GetReduceFn(DataType::kInt8, ReduceOp::kMin)(d8, a8, b8, 3);
  EXPECT_EQ(std::vector<int>(d8, d8 + 3), (std::vector<int>{-128, -128, -1}));
  GetReduceFn(DataType::kInt8, ReduceOp::kMax)(d8, a8, b8, 3);
  EXPECT_EQ(std::vector<int>(d8, d8 + 3), (std::vector<int>{127, 127, 0}));
  // uint8 compares unsigned: 200 > 100 (a signed compare would say -56 < 100).
  uint8_t au[] = {200, 0}, bu[] = {100, 255}, du[2];
  GetReduceFn(DataType::kUInt8, ReduceOp::kMax)(du, au, bu, 2);
  EXPECT_EQ(du[0], 200);
  EXPECT_EQ(du[1], 255);
  GetReduceFn(DataType::kUInt8, ReduceOp::kMin)(du, au, bu, 2);
  EXPECT_EQ(du[0], 100);
  EXPECT_EQ(du[1], 0);
  int64_t a64[] = {INT64_MIN, -5}, b64[] = {INT64_MAX, -6}, d64[2];
  GetReduceFn(DataType::kInt64, ReduceOp::kMin)(d64, a64, b64, 2);
  EXPECT_EQ(d64[0], INT64_MIN);
  EXPECT_EQ(d64[1], -6);
  GetReduceFn(DataType::kInt64, ReduceOp::kMax)(d64, a64, b64, 2);
  EXPECT_EQ(d64[0], INT64_MAX);
  EXPECT_EQ(d64[1], -5);
}

TEST(ReduceKernelTest, HalfSumRoundsToNearestEvenAndOverflowsToInfinity) {
  // 2048 + 1 is a tie between 2048 and 2050 in float16: even 2048. 2050 + 1 -> 2052.
  uint16_t a[] = {FloatToHalf(2048), FloatToHalf(2050), FloatToHalf(65504), FloatToHalf(-65504)};
  uint16_t b[] = {FloatToHalf(1), FloatToHalf(1), FloatToHalf(65504), FloatToHalf(-65504)};
  uint16_t d[4];
  GetReduceFn(DataType::kFloat16, ReduceOp::kSum)(d, a, b, 4);
  EXPECT_EQ(HalfToFloat(d[0]), 2048.0f);
  EXPECT_EQ(HalfToFloat(d[1]), 2052.0f);
  EXPECT_EQ(d[2], 0x7c00);
  EXPECT_EQ(d[3], 0xfc00);
  // bfloat16: 256 + 1 ties to 256; 258 + 1 goes to 260.
  uint16_t c[] = {FloatToBFloat16(256), FloatToBFloat16(258)};
  uint16_t e[] = {FloatToBFloat16(1), FloatToBFloat16(1)};
  GetReduceFn(DataType::kBFloat16, ReduceOp::kSum)(d, c, e, 2);
  EXPECT_EQ(BFloat16ToFloat(d[0]), 256.0f);
  EXPECT_EQ(BFloat16ToFloat(d[1]), 260.0f);
}

TEST(ReduceKernelTest, FloatSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  float a[] = {inf, -inf, 1e38f, -0.0f}, b[] = {1, 5, 1e38f, -0.0f}, d[4];
  GetReduceFn(DataType::kFloat32, ReduceOp::kSum)(d, a, b, 4);
  EXPECT_EQ(d[0], inf);
  EXPECT_EQ(d[1], -inf);
  EXPECT_EQ(d[2], 2e38f);
  EXPECT_TRUE(std::signbit(d[3]));
  GetReduceFn(DataType::kFloat32, ReduceOp::kMin)(d, a, b, 4);
  EXPECT_EQ(d[0], 1);
  EXPECT_EQ(d[1], -inf);
}

// ---------------------------------------------------------------- ScaledCopy

TEST(ScaledCopyTest, FactorOneCopiesEveryTypeBitForBit) {
  for (DataType t : kAllTypes) {
    std::vector<uint8_t> src(7 * DataTypeSize(t));
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 37 + 11);
    if (t == DataType::kFloat16 || t == DataType::kBFloat16) {
      // Include a NaN pattern: a copy must not go through arithmetic.
      src[0] = 0xc1;
      src[1] = 0x7f;  // 0x7fc1, a NaN in both 16-bit formats
    }
    std::vector<uint8_t> dst(src.size(), 0);
    ScaledCopy(t, dst.data(), src.data(), 7, 1.0);
    EXPECT_EQ(dst, src) << DataTypeName(t);
    auto same = src;
    ScaledCopy(t, same.data(), same.data(), 7, 1.0);  // dst == src
    EXPECT_EQ(same, src) << DataTypeName(t);
  }
}

TEST(ScaledCopyTest, FactorOneHandlesOverlappingBuffers) {
  int32_t buf[] = {1, 2, 3, 4, 5};
  ScaledCopy(DataType::kInt32, buf + 1, buf, 4, 1.0);
  EXPECT_EQ(std::vector<int32_t>(buf, buf + 5), (std::vector<int32_t>{1, 1, 2, 3, 4}));
  int32_t buf2[] = {1, 2, 3, 4, 5};
  ScaledCopy(DataType::kInt32, buf2, buf2 + 1, 4, 1.0);
  EXPECT_EQ(std::vector<int32_t>(buf2, buf2 + 5), (std::vector<int32_t>{2, 3, 4, 5, 5}));
}

TEST(ScaledCopyTest, ZeroElementsTouchNothing) {
  for (double factor : {1.0, 2.0}) {
    float src[] = {1}, dst[] = {42};
    ScaledCopy(DataType::kFloat32, dst, src, 0, factor);
    EXPECT_EQ(dst[0], 42);
  }
  // Null pointers are fine when there is nothing to copy.
  ScaledCopy(DataType::kFloat32, nullptr, nullptr, 0, 1.0);
}

TEST(ScaledCopyTest, IntegersTruncateTowardZero) {
  int32_t src[] = {7, -7, 5, -5, 1, -1, 0};
  int32_t dst[7];
  ScaledCopy(DataType::kInt32, dst, src, 7, 0.5);
  EXPECT_EQ(std::vector<int32_t>(dst, dst + 7), (std::vector<int32_t>{3, -3, 2, -2, 0, 0, 0}));
  ScaledCopy(DataType::kInt32, dst, src, 7, 1.5);
  EXPECT_EQ(std::vector<int32_t>(dst, dst + 7), (std::vector<int32_t>{10, -10, 7, -7, 1, -1, 0}));
  // 10 * 0.3 is 3.0000000000000004 in double: still 3 (and -3, not -4).
  int64_t s64[] = {10, -10, int64_t{1} << 40}, d64[3];
  ScaledCopy(DataType::kInt64, d64, s64, 3, 0.3);
  EXPECT_EQ(d64[0], 3);
  EXPECT_EQ(d64[1], -3);
  EXPECT_EQ(d64[2], static_cast<int64_t>(static_cast<double>(int64_t{1} << 40) * 0.3));
  int8_t s8[] = {-3, 3, -128, 127}, d8[4];
  ScaledCopy(DataType::kInt8, d8, s8, 4, 0.5);
  EXPECT_EQ(std::vector<int>(d8, d8 + 4), (std::vector<int>{-1, 1, -64, 63}));
  uint8_t su[] = {255, 3}, du[2];
  ScaledCopy(DataType::kUInt8, du, su, 2, 0.5);
  EXPECT_EQ(du[0], 127);
  EXPECT_EQ(du[1], 1);
  ScaledCopy(DataType::kInt32, dst, src, 7, -1.0);
  EXPECT_EQ(std::vector<int32_t>(dst, dst + 7), (std::vector<int32_t>{-7, 7, -5, 5, -1, 1, 0}));
}

// Horovod's exact rule: float32 is scaled by float(factor) in float32 (not in
// double and rounded once), and the 16-bit floats by float(factor) in float32.
TEST(ScaledCopyTest, FloatsScaleInFloat32AsHorovodDoes) {
  const double factor = 0.1915194503788923;  // numpy.random.seed(1234); uniform()
  std::vector<float> src;
  for (int i = -100; i < 100; ++i) src.push_back(static_cast<float>(i) * 1.37f);
  std::vector<float> dst(src.size());
  ScaledCopy(DataType::kFloat32, dst.data(), src.data(), src.size(), factor);
  int differs_from_double = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(dst[i], src[i] * static_cast<float>(factor)) << i;
    differs_from_double += dst[i] != static_cast<float>(src[i] * factor);
  }
  EXPECT_GT(differs_from_double, 0) << "the inputs do not tell the two rules apart";
  std::vector<uint16_t> h, hd(src.size());
  for (float x : src) h.push_back(FloatToHalf(x));
  ScaledCopy(DataType::kFloat16, hd.data(), h.data(), h.size(), factor);
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(hd[i], FloatToHalf(HalfToFloat(h[i]) * static_cast<float>(factor))) << i;
}

TEST(ScaledCopyTest, FloatsScale) {
  float f[] = {1.5f, -2.0f, 0.0f}, fd[3];
  ScaledCopy(DataType::kFloat32, fd, f, 3, 2.0);
  EXPECT_EQ(std::vector<float>(fd, fd + 3), (std::vector<float>{3.0f, -4.0f, 0.0f}));
  double g[] = {1.0, -3.0}, gd[2];
  ScaledCopy(DataType::kFloat64, gd, g, 2, 0.1);
  EXPECT_EQ(gd[0], 0.1);
  EXPECT_EQ(gd[1], -3.0 * 0.1);
  uint16_t h[] = {FloatToHalf(3.0f), FloatToHalf(-1.0f)}, hd[2];
  ScaledCopy(DataType::kFloat16, hd, h, 2, 0.5);
  EXPECT_EQ(HalfToFloat(hd[0]), 1.5f);
  EXPECT_EQ(HalfToFloat(hd[1]), -0.5f);
  ScaledCopy(DataType::kFloat16, hd, h, 1, 1.0 / 3);
  EXPECT_EQ(hd[0], FloatToHalf(1.0f));
  uint16_t b[] = {FloatToBFloat16(1.0f), FloatToBFloat16(-8.0f)}, bd[2];
  ScaledCopy(DataType::kBFloat16, bd, b, 2, 0.25);
  EXPECT_EQ(BFloat16ToFloat(bd[0]), 0.25f);
  EXPECT_EQ(BFloat16ToFloat(bd[1]), -2.0f);
  ScaledCopy(DataType::kFloat16, hd, h, 1, 1e6);  // 3e6 overflows float16
  EXPECT_EQ(hd[0], 0x7c00);
}

TEST(ScaledCopyTest, InPlaceScaling) {
  for (DataType t : kAllTypes) {
    const std::vector<double> v = {2, 4, 6, IsSigned(t) ? -8.0 : 8.0};
    auto buf = Encode(t, v);
    ScaledCopy(t, buf.data(), buf.data(), v.size(), 0.5);
    EXPECT_EQ(Decode(t, buf), (std::vector<double>{1, 2, 3, IsSigned(t) ? -4.0 : 4.0}))
        << DataTypeName(t);
  }
}

// ---------------------------------------------------------------- DivideBuffer

TEST(DivideBufferTest, IntegersTruncateTowardZero) {
  int32_t i32[] = {7, -7, 6, -6, 1, -1, 0, INT32_MIN};
  DivideBuffer(DataType::kInt32, i32, 8, 2);
  EXPECT_EQ(std::vector<int32_t>(i32, i32 + 8),
            (std::vector<int32_t>{3, -3, 3, -3, 0, 0, 0, INT32_MIN / 2}));
  int64_t i64[] = {-7, 7, -9, INT64_MAX};
  DivideBuffer(DataType::kInt64, i64, 4, 4);
  EXPECT_EQ(std::vector<int64_t>(i64, i64 + 4), (std::vector<int64_t>{-1, 1, -2, INT64_MAX / 4}));
  int8_t i8[] = {-128, 127, -5, 5};
  DivideBuffer(DataType::kInt8, i8, 4, 3);
  EXPECT_EQ(std::vector<int>(i8, i8 + 4), (std::vector<int>{-42, 42, -1, 1}));
  uint8_t u8[] = {255, 1, 200};
  DivideBuffer(DataType::kUInt8, u8, 3, 2);
  EXPECT_EQ(std::vector<int>(u8, u8 + 3), (std::vector<int>{127, 0, 100}));
}

TEST(DivideBufferTest, DivisorOneChangesNothing) {
  for (DataType t : kAllTypes) {
    std::vector<uint8_t> buf(5 * DataTypeSize(t));
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 29 + 3);
    const auto before = buf;
    DivideBuffer(t, buf.data(), 5, 1);
    EXPECT_EQ(buf, before) << DataTypeName(t);
  }
}

TEST(DivideBufferTest, Floats) {
  float f[] = {1.0f, -3.0f, 0.0f};
  DivideBuffer(DataType::kFloat32, f, 3, 2);
  EXPECT_EQ(std::vector<float>(f, f + 3), (std::vector<float>{0.5f, -1.5f, 0.0f}));
  double d[] = {1.0, -7.0};
  DivideBuffer(DataType::kFloat64, d, 2, 3);
  EXPECT_EQ(d[0], 1.0 / 3);
  EXPECT_EQ(d[1], -7.0 / 3);
  uint16_t h[] = {FloatToHalf(3.0f), FloatToHalf(-1.0f), FloatToHalf(1.0f)};
  DivideBuffer(DataType::kFloat16, h, 3, 2);
  EXPECT_EQ(HalfToFloat(h[0]), 1.5f);
  EXPECT_EQ(HalfToFloat(h[1]), -0.5f);
  EXPECT_EQ(HalfToFloat(h[2]), 0.5f);
  uint16_t b[] = {FloatToBFloat16(1.0f)};
  DivideBuffer(DataType::kBFloat16, b, 1, 3);
  EXPECT_EQ(b[0], FloatToBFloat16(1.0f / 3));
  float big[] = {1.0f};
  DivideBuffer(DataType::kFloat32, big, 1, 1024);
  EXPECT_EQ(big[0], 1.0f / 1024);
}

TEST(DivideBufferTest, OnlyNElements) {
  int32_t buf[] = {8, 8, 8};
  DivideBuffer(DataType::kInt32, buf, 2, 2);
  EXPECT_EQ(std::vector<int32_t>(buf, buf + 3), (std::vector<int32_t>{4, 4, 8}));
  DivideBuffer(DataType::kInt32, nullptr, 0, 2);
}

TEST(DivideBufferDeathTest, NonPositiveDivisorIsABrokenInvariant) {
  int32_t buf[] = {1};
  EXPECT_DEATH(DivideBuffer(DataType::kInt32, buf, 1, 0), "divisor > 0");
  EXPECT_DEATH(DivideBuffer(DataType::kFloat32, buf, 1, -2), "divisor > 0");
}

// The divisor is not narrowed to the element type: an 8-bit average over more than
// 127/255 contributors divides by the right number (narrowed, 200 would become -56
// for int8, 300 would become 44 for uint8, and 256 would become 0, a SIGFPE).
TEST(DivideBufferTest, EightBitIntegersWithADivisorBeyondTheirRange) {
  int8_t i8[] = {127, -128, 100};
  DivideBuffer(DataType::kInt8, i8, 3, 200);
  EXPECT_EQ(std::vector<int>(i8, i8 + 3), (std::vector<int>{0, 0, 0}));
  uint8_t u8[] = {255, 44};
  DivideBuffer(DataType::kUInt8, u8, 2, 300);
  EXPECT_EQ(std::vector<int>(u8, u8 + 2), (std::vector<int>{0, 0}));
}

// ---------------------------------------------------------------- FillIdentity

// Integers: exact values as documented.
template <typename T>
void ExpectIntegerIdentities(DataType dtype) {
  const std::pair<ReduceOp, T> cases[] = {
      {ReduceOp::kSum, T(0)},
      {ReduceOp::kAverage, T(0)},
      {ReduceOp::kProduct, T(1)},
      {ReduceOp::kMin, std::numeric_limits<T>::max()},
      {ReduceOp::kMax, std::numeric_limits<T>::lowest()},
  };
  for (const auto& [op, want] : cases) {
    T buf[6];
    std::fill(buf, buf + 6, T(42));
    FillIdentity(dtype, op, buf, 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(buf[i], want) << DataTypeName(dtype) << " " << ReduceOpName(op);
    EXPECT_EQ(buf[5], T(42)) << "wrote past n";
  }
}

TEST(FillIdentityTest, IntegerValues) {
  ExpectIntegerIdentities<int8_t>(DataType::kInt8);
  ExpectIntegerIdentities<uint8_t>(DataType::kUInt8);
  ExpectIntegerIdentities<int32_t>(DataType::kInt32);
  ExpectIntegerIdentities<int64_t>(DataType::kInt64);
}

TEST(FillIdentityTest, FloatValues) {
  float f[2];
  FillIdentity(DataType::kFloat32, ReduceOp::kSum, f, 2);
  EXPECT_EQ(f[0], 0.0f);
  EXPECT_FALSE(std::signbit(f[0]));
  FillIdentity(DataType::kFloat32, ReduceOp::kProduct, f, 2);
  EXPECT_EQ(f[1], 1.0f);
  // MIN and MAX pass over NaN (fmin/fmax), so NaN is their identity on floats.
  FillIdentity(DataType::kFloat32, ReduceOp::kMin, f, 2);
  EXPECT_TRUE(std::isnan(f[0]));
  FillIdentity(DataType::kFloat32, ReduceOp::kMax, f, 2);
  EXPECT_TRUE(std::isnan(f[0]));
  uint16_t h[2];
  FillIdentity(DataType::kFloat16, ReduceOp::kProduct, h, 2);
  EXPECT_EQ(h[1], 0x3c00);
  FillIdentity(DataType::kFloat16, ReduceOp::kAverage, h, 2);
  EXPECT_EQ(h[1], 0x0000);
  FillIdentity(DataType::kBFloat16, ReduceOp::kProduct, h, 2);
  EXPECT_EQ(h[1], 0x3f80);
  FillIdentity(DataType::kFloat16, ReduceOp::kMin, h, 2);
  EXPECT_TRUE(std::isnan(HalfToFloat(h[0])));
  FillIdentity(DataType::kBFloat16, ReduceOp::kMax, h, 2);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(h[0])));
}

// MIN and MAX are IEEE minNum/maxNum on every float type: a NaN loses to a number
// in either operand, so the result does not depend on which rank held the NaN;
// only NaN against NaN is NaN.
TEST(ReduceFnNaNTest, MinAndMaxPassOverNaNWhateverTheOrder) {
  const double nan = std::nan("");
  const std::vector<double> x = {nan, 1.0, nan, -2.0, nan, 5.0, 7.0};
  const std::vector<double> y = {3.0, nan, nan, nan, -1.0, 4.0, nan};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                     DataType::kBFloat16}) {
    const auto a = Encode(t, x), b = Encode(t, y);
    std::vector<uint8_t> ab(a.size()), ba(a.size());
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
      GetReduceFn(t, op)(ab.data(), a.data(), b.data(), x.size());
      GetReduceFn(t, op)(ba.data(), b.data(), a.data(), x.size());
      const auto got = Decode(t, ab), swapped = Decode(t, ba);
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = op == ReduceOp::kMin ? std::fmin(x[i], y[i]) : std::fmax(x[i], y[i]);
        const std::string at = std::string(DataTypeName(t)) + " " + ReduceOpName(op) + " at " +
                               std::to_string(i);
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got[i]) && std::isnan(swapped[i])) << at;
        } else {
          EXPECT_EQ(got[i], want) << at;
          EXPECT_EQ(swapped[i], want) << at;
        }
      }
    }
  }
}

// The defining property: a joined rank's contribution changes nothing, op(identity, x)
// == x, for every op and dtype, including the extremes of each type (and infinity).
TEST_P(ReduceFnTest, IdentityLeavesEveryValueUnchanged) {
  const auto [dtype, op] = GetParam();
  std::vector<double> x;
  switch (dtype) {
    case DataType::kInt8: x = {-128, -1, 0, 1, 127}; break;
    case DataType::kUInt8: x = {0, 1, 128, 255}; break;
    case DataType::kInt16: x = {INT16_MIN, -1, 0, 1, INT16_MAX}; break;
    case DataType::kInt32: x = {INT32_MIN, -1, 0, 1, INT32_MAX}; break;
    case DataType::kInt64: x = {-9.2233720368547758e18, -1, 0, 1, 4.6e18}; break;
    case DataType::kFloat16: x = {-65504, -1, -0.5, 0, 1, 65504, INFINITY, -INFINITY}; break;
    case DataType::kBFloat16:
    case DataType::kFloat32: x = {-3.4e38, -1, -0.5, 0, 1, 3.4e38, INFINITY, -INFINITY}; break;
    case DataType::kFloat64: x = {-1.7e308, -1, -0.5, 0, 1, 1.7e308, INFINITY, -INFINITY}; break;
  }
  const auto ex = Encode(dtype, x);
  std::vector<uint8_t> id(ex.size());
  FillIdentity(dtype, op, id.data(), x.size());
  std::vector<uint8_t> out(ex.size());
  GetReduceFn(dtype, op)(out.data(), id.data(), ex.data(), x.size());
  EXPECT_EQ(Decode(dtype, out), Decode(dtype, ex)) << DataTypeName(dtype) << " " << ReduceOpName(op);
  GetReduceFn(dtype, op)(out.data(), ex.data(), id.data(), x.size());
  EXPECT_EQ(Decode(dtype, out), Decode(dtype, ex)) << "identity second";
}

TEST(FillIdentityTest, ZeroElementsTouchNothing) {
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps) FillIdentity(t, op, nullptr, 0);
  int32_t guard = 42;
  FillIdentity(DataType::kInt32, ReduceOp::kProduct, &guard, 0);
  EXPECT_EQ(guard, 42);
}

}  // namespace
}  // namespace hvd
