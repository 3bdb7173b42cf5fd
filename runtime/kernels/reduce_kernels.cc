#include "runtime/kernels/reduce_kernels.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "runtime/common/status.h"

// Kernels are plain loops written so that the compiler vectorises them for the
// baseline ISA (this file is built with -O3); on x86 an AVX2 build of the same
// loops is picked at run time where the CPU has it.
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define HVD_AVX2_KERNELS 1
#define HVD_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define HVD_AVX2_KERNELS 0
#define HVD_ALWAYS_INLINE inline
#endif

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
// IEEE 754 minNum/maxNum (C's fmin/fmax, and NCCL's min and max): a NaN loses to
// a number, so the result is NaN only where every operand is, whatever their order
// (a != a is false for integers, and the compiler drops it). Branch-free, so loops
// vectorise.
struct MinOp { template <typename C> static C Apply(C a, C b) { return (b < a || a != a) ? b : a; } };
struct MaxOp { template <typename C> static C Apply(C a, C b) { return (a < b || a != a) ? b : a; } };

// Branch-free forms of the conversions above, bit-identical to them (every 16-bit
// pattern and every float was compared; tests/unit/reduce_kernels_vector_test.cc
// keeps checking through the kernels), so that loops over arrays vectorise. The
// float16 subnormal case lets the FPU round: |f| + 0.5f leaves |f| / 2^-24, rounded
// to nearest even, in the low mantissa bits.
inline uint32_t FloatBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}
inline float BitsFloat(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// c ? a : b as bit masks. With float arithmetic among the operands, GCC keeps a
// plain ?: as a branch and then does not vectorise the loop.
inline uint32_t Select(bool c, uint32_t a, uint32_t b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return (a & m) | (b & ~m);
}

inline float HalfToFloatFast(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = static_cast<uint32_t>(h & 0x7fffu) << 13;
  const uint32_t exp = h & 0x7c00u;
  const uint32_t sub = FloatBits(static_cast<float>(static_cast<int32_t>(h & 0x3ffu)) * 0x1p-24f);
  const uint32_t normal = em + (112u << 23);
  const uint32_t special = em + (224u << 23);  // infinity and NaN keep their payload
  return BitsFloat(sign | Select(exp == 0, sub, Select(exp == 0x7c00u, special, normal)));
}

inline uint16_t FloatToHalfFast(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int32_t a = static_cast<int32_t>(x & 0x7fffffffu);
  const uint32_t ua = static_cast<uint32_t>(a);
  const uint32_t normal = ((ua + 0xfffu + ((ua >> 13) & 1u)) >> 13) - (112u << 10);
  const uint32_t sub = FloatBits(BitsFloat(ua) + 0.5f) - 0x3f000000u;
  const uint32_t nan = 0x7e00u | ((ua >> 13) & 0x3ffu);
  const uint32_t r =
      Select(a > 0x7f800000, nan,
             Select(a >= (143 << 23), 0x7c00u, Select(a >= (113 << 23), normal, sub)));
  return static_cast<uint16_t>(sign | r);
}

inline float BFloat16ToFloatFast(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBFloat16Fast(float f) {
  const uint32_t x = FloatBits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>(Select(static_cast<int32_t>(x & 0x7fffffffu) > 0x7f800000, nan, rounded));
}

template <typename T> constexpr bool kIsHalfType = std::is_same_v<T, Half> || std::is_same_v<T, BHalf>;

// 16-bit floats are converted a block at a time into float arrays, so the decode,
// the arithmetic and the encode are each a simple loop.
constexpr size_t kBlock = 512;

template <typename T>
HVD_ALWAYS_INLINE void DecodeBlock(const T* src, float* out, size_t n) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  if constexpr (std::is_same_v<T, Half>) {
    for (size_t i = 0; i < n; ++i) out[i] = HalfToFloatFast(s[i]);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = BFloat16ToFloatFast(s[i]);
  }
}

template <typename T>
HVD_ALWAYS_INLINE void EncodeBlock(const float* in, T* dst, size_t n) {
  uint16_t* d = reinterpret_cast<uint16_t*>(dst);
  if constexpr (std::is_same_v<T, Half>) {
    for (size_t i = 0; i < n; ++i) d[i] = FloatToHalfFast(in[i]);
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = FloatToBFloat16Fast(in[i]);
  }
}

template <typename T, typename Op>
HVD_ALWAYS_INLINE void ReduceLoop(void* dst, const void* a, const void* b, size_t n) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  if constexpr (kIsHalfType<T>) {
    float fx[kBlock], fy[kBlock];
    for (size_t i = 0; i < n; i += kBlock) {
      const size_t m = std::min(kBlock, n - i);
      DecodeBlock(x + i, fx, m);
      DecodeBlock(y + i, fy, m);
      for (size_t j = 0; j < m; ++j) fx[j] = Op::Apply(fx[j], fy[j]);
      EncodeBlock(fx, d + i, m);
    }
  } else {
    for (size_t i = 0; i < n; ++i) d[i] = Op::Apply(x[i], y[i]);
  }
}

template <typename T, typename Op>
void ReduceKernel(void* dst, const void* a, const void* b, size_t n) {
  ReduceLoop<T, Op>(dst, a, b, n);
}

#if HVD_AVX2_KERNELS
// The same loops compiled for AVX2 (wider vectors, and 64-bit compares that SSE2
// lacks), chosen at run time on CPUs that have it. Same instructions' semantics, so
// the same bytes as the baseline kernels.
template <typename T, typename Op>
__attribute__((target("avx2"))) void ReduceKernelAvx2(void* dst, const void* a, const void* b,
                                                      size_t n) {
  ReduceLoop<T, Op>(dst, a, b, n);
}

bool HaveAvx2() {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
}

template <typename T, typename Op>
ReduceFn Kernel() {
  return HaveAvx2() ? &ReduceKernelAvx2<T, Op> : &ReduceKernel<T, Op>;
}
#else
template <typename T, typename Op>
ReduceFn Kernel() {
  return &ReduceKernel<T, Op>;
}
#endif

template <typename T>
ReduceFn PickOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return Kernel<T, SumOp>();
    case ReduceOp::kProduct: return Kernel<T, ProdOp>();
    case ReduceOp::kMin: return Kernel<T, MinOp>();
    case ReduceOp::kMax: return Kernel<T, MaxOp>();
    case ReduceOp::kAdasum: break;  // Not element-wise: runtime/kernels/adasum.h.
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
    case DataType::kInt16: f(int16_t{}); return;
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
    if constexpr (kIsHalfType<T>) {
      const float ffactor = static_cast<float>(factor);
      float f[kBlock];
      for (size_t i = 0; i < n; i += kBlock) {
        const size_t m = std::min(kBlock, n - i);
        DecodeBlock(s + i, f, m);
        for (size_t j = 0; j < m; ++j) f[j] *= ffactor;
        EncodeBlock(f, d + i, m);
      }
    } else if constexpr (std::is_integral_v<C>) {
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<double>(s[i]) * factor);
    } else {
      const C cfactor = static_cast<C>(factor);
      for (size_t i = 0; i < n; ++i) d[i] = s[i] * cfactor;
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
    } else if constexpr (kIsHalfType<T>) {
      const float div = static_cast<float>(divisor);
      float f[kBlock];
      for (size_t i = 0; i < n; i += kBlock) {
        const size_t m = std::min(kBlock, n - i);
        DecodeBlock(d + i, f, m);
        for (size_t j = 0; j < m; ++j) f[j] = f[j] / div;
        EncodeBlock(f, d + i, m);
      }
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
      case ReduceOp::kAverage:
      case ReduceOp::kAdasum: v = C(0); break;
      case ReduceOp::kProduct: v = C(1); break;
      // Floats: NaN, which MinOp and MaxOp pass over like nothing (a joined rank
      // must not turn the others' all-NaN position into a number); integers: the
      // type's extreme.
      case ReduceOp::kMin:
        v = std::numeric_limits<C>::has_quiet_NaN ? std::numeric_limits<C>::quiet_NaN()
                                                  : std::numeric_limits<C>::max();
        break;
      case ReduceOp::kMax:
        v = std::numeric_limits<C>::has_quiet_NaN ? std::numeric_limits<C>::quiet_NaN()
                                                  : std::numeric_limits<C>::lowest();
        break;
    }
    T* d = static_cast<T*>(buf);
    const T stored = Codec<T>::Store(v);
    std::fill(d, d + n, stored);
  });
}

}  // namespace hvd
