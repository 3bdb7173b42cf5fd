#include "runtime/reduce_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/status.h"

namespace hvd {

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7fffffu;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xffu);
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0));
  const int32_t e = exp - 127 + 15;
  if (e >= 0x1f) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {  // A float16 subnormal (or zero): value = m * 2^-24.
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t m = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (m & 1u))) ++m;
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t h = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // A carry rounds up to infinity.
  return static_cast<uint16_t>(h);
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {  // Subnormal: normalise.
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      x = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t FloatToBFloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

namespace {

struct Half { uint16_t bits; };
struct BHalf { uint16_t bits; };

// Loads and stores through the compute type: float for the 16-bit floats.
template <typename T> struct Codec {
  using Compute = T;
  static T Load(T v) { return v; }
  static T Store(T v) { return v; }
};
template <> struct Codec<Half> {
  using Compute = float;
  static float Load(Half v) { return HalfToFloat(v.bits); }
  static Half Store(float v) { return Half{FloatToHalf(v)}; }
};
template <> struct Codec<BHalf> {
  using Compute = float;
  static float Load(BHalf v) { return BFloat16ToFloat(v.bits); }
  static BHalf Store(float v) { return BHalf{FloatToBFloat16(v)}; }
};

// Integer arithmetic through the unsigned type, so overflow wraps instead of being UB.
template <typename C> C Add(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename C> C Mul(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    // Promote 8-bit types past int so the product never overflows int.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return static_cast<C>(static_cast<W>(static_cast<U>(a)) * static_cast<W>(static_cast<U>(b)));
  } else {
    return a * b;
  }
}

struct SumOp { template <typename C> static C Apply(C a, C b) { return Add(a, b); } };
struct ProdOp { template <typename C> static C Apply(C a, C b) { return Mul(a, b); } };
struct MinOp { template <typename C> static C Apply(C a, C b) { return b < a ? b : a; } };
struct MaxOp { template <typename C> static C Apply(C a, C b) { return a < b ? b : a; } };

template <typename T, typename Op>
void ReduceKernel(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = Codec<T>::Store(Op::Apply(Codec<T>::Load(x[i]), Codec<T>::Load(y[i])));
}

template <typename T>
ReduceFn PickOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return &ReduceKernel<T, SumOp>;
    case ReduceOp::kProduct: return &ReduceKernel<T, ProdOp>;
    case ReduceOp::kMin: return &ReduceKernel<T, MinOp>;
    case ReduceOp::kMax: return &ReduceKernel<T, MaxOp>;
  }
  return nullptr;
}

// Calls f(T{}) with T the storage type of `dtype`.
template <typename F>
void Dispatch(DataType dtype, F&& f) {
  switch (dtype) {
    case DataType::kFloat32: f(float{}); return;
    case DataType::kFloat64: f(double{}); return;
    case DataType::kFloat16: f(Half{}); return;
    case DataType::kBFloat16: f(BHalf{}); return;
    case DataType::kInt8: f(int8_t{}); return;
    case DataType::kUInt8: f(uint8_t{}); return;
    case DataType::kInt32: f(int32_t{}); return;
    case DataType::kInt64: f(int64_t{}); return;
  }
  HVD_CHECK_MSG(false, "invalid dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

ReduceFn GetReduceFn(DataType dtype, ReduceOp op) {
  ReduceFn fn = nullptr;
  Dispatch(dtype, [&](auto tag) { fn = PickOp<decltype(tag)>(op); });
  return fn;
}

void ScaledCopy(DataType dtype, void* dst, const void* src, size_t n, double factor) {
  if (factor == 1.0) {
    if (dst != src && n > 0) std::memmove(dst, src, n * DataTypeSize(dtype));
    return;
  }
  Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Codec<T>::Compute;
    T* d = static_cast<T*>(dst);
    const T* s = static_cast<const T*>(src);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<C>) {
        d[i] = static_cast<T>(static_cast<double>(s[i]) * factor);
      } else {
        d[i] = Codec<T>::Store(static_cast<C>(Codec<T>::Load(s[i]) * factor));
      }
    }
  });
}

void DivideBuffer(DataType dtype, void* buf, size_t n, int64_t divisor) {
  if (divisor == 1) return;
  HVD_CHECK(divisor > 0);
  Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Codec<T>::Compute;
    T* d = static_cast<T*>(buf);
    if constexpr (std::is_integral_v<C>) {
      // In 64 bits: the divisor (a rank count) may not fit the element type.
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<int64_t>(d[i]) / divisor);
    } else {
      const C div = static_cast<C>(divisor);
      for (size_t i = 0; i < n; ++i) d[i] = Codec<T>::Store(static_cast<C>(Codec<T>::Load(d[i]) / div));
    }
  });
}

void FillIdentity(DataType dtype, ReduceOp op, void* buf, size_t n) {
  Dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = typename Codec<T>::Compute;
    C v{};
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAverage: v = C(0); break;
      case ReduceOp::kProduct: v = C(1); break;
      case ReduceOp::kMin:
        v = std::numeric_limits<C>::has_infinity ? std::numeric_limits<C>::infinity()
                                                 : std::numeric_limits<C>::max();
        break;
      case ReduceOp::kMax:
        v = std::numeric_limits<C>::has_infinity ? -std::numeric_limits<C>::infinity()
                                                 : std::numeric_limits<C>::lowest();
        break;
    }
    T* d = static_cast<T*>(buf);
    const T stored = Codec<T>::Store(v);
    std::fill(d, d + n, stored);
  });
}

}  // namespace hvd
