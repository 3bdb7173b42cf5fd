// Adasum written out the plain way, for tests: sequential double sums, the formula
// of runtime/kernels/adasum.h, the tree as a list of levels, each combination rounded to
// the dtype. Shares no code with runtime/kernels/adasum.cc.
#ifndef HVD_TESTS_ADASUM_REFERENCE_H_
#define HVD_TESTS_ADASUM_REFERENCE_H_

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace hvd {
namespace testing {

// The values `dtype` stores for `v`.
inline std::vector<double> RoundTo(const std::vector<double>& v, DataType dtype) {
  return Decode(Encode(v, dtype), dtype);
}

// combine(a, b) in double.
inline std::vector<double> AdasumRefCombine(const std::vector<double>& a,
                                            const std::vector<double>& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa < std::sqrt(DBL_MIN) ? 1.0 : 1.0 - dot / (2 * aa);
  const double cb = bb < std::sqrt(DBL_MIN) ? 1.0 : 1.0 - dot / (2 * bb);
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// The tree over vectors[0..n) (rank order): pair neighbours level by level, carry
// an odd one out, round every input and combination to the dtype.
inline std::vector<double> AdasumRefTree(std::vector<std::vector<double>> level, DataType dtype) {
  for (auto& v : level) v = RoundTo(v, dtype);
  while (level.size() > 1) {
    std::vector<std::vector<double>> next;
    for (size_t i = 0; i + 1 < level.size(); i += 2)
      next.push_back(RoundTo(AdasumRefCombine(level[i], level[i + 1]), dtype));
    if (level.size() % 2 == 1) next.push_back(level.back());
    level = next;
  }
  return level[0];
}

// Rank r's vector among n: a direction shared by the ranks, scaled differently
// per rank, plus noise, so the coefficients are far from 1 and the shape of the
// tree shows in the result. Any rank can rebuild every rank's vector.
inline std::vector<std::vector<double>> AdasumInputs(int n, int64_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<double> common(count);
  for (auto& x : common) x = normal(gen);
  std::vector<std::vector<double>> v(n, std::vector<double>(count));
  for (int r = 0; r < n; ++r) {
    const double scale = 0.3 + 0.7 * r;
    const double noise = r % 2 ? 0.2 : 1.0;
    for (int64_t i = 0; i < count; ++i) v[r][i] = scale * common[i] + noise * normal(gen);
  }
  return v;
}

// Tolerance relative to the largest magnitude of an expected tensor: the reference
// and the runtime may round a dot product differently in its last bit, and so,
// rarely, an element.
inline double AdasumTolerance(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return 4e-3;
    case DataType::kBFloat16: return 2e-2;
    case DataType::kFloat32: return 1e-5;
    default: return 1e-12;
  }
}

// Empty if `got` is within tolerance of `want`, else what differs (first 3 elements).
inline std::string AdasumMismatch(const std::vector<double>& got, const std::vector<double>& want,
                                  DataType dtype) {
  if (got.size() != want.size())
    return "size " + std::to_string(got.size()) + ", expected " + std::to_string(want.size());
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::fabs(w));
  const double tol = AdasumTolerance(dtype) * std::max(scale, 1e-30);
  std::string out;
  int shown = 0;
  for (size_t i = 0; i < got.size() && shown < 3; ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      out += "element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(want[i]) + " (tolerance " + std::to_string(tol) + "); ";
      ++shown;
    }
  }
  return out;
}

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_ADASUM_REFERENCE_H_
