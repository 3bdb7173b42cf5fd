// Unit tests for runtime/kernels/adasum.h: the pairwise combination and the tree against
// a straightforward double-precision reference (tests/adasum_reference.h, which
// rounds each combination to the dtype, as the contract says), fused buffers,
// zero vectors, every float dtype;
// and that the fusion planner never puts Adasum tensors with other ops.
#include "runtime/kernels/adasum.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "controller/fusion_planner.h"
#include "tests/adasum_reference.h"
#include "tests/test_util.h"

namespace hvd {
namespace {

using testing::Decode;
using testing::Encode;

const DataType kFloatTypes[] = {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                                DataType::kFloat64};

using Vec = std::vector<double>;
using testing::AdasumMismatch;

Vec RefCombine(const Vec& a, const Vec& b) { return testing::AdasumRefCombine(a, b); }
Vec RefTree(std::vector<Vec> v, DataType dtype) { return testing::AdasumRefTree(std::move(v), dtype); }

void ExpectNear(const Vec& got, const Vec& want, DataType dtype, const std::string& what) {
  const std::string diff = AdasumMismatch(got, want, dtype);
  EXPECT_TRUE(diff.empty()) << what << ": " << diff;
}

std::vector<Vec> Inputs(int n, int64_t count, uint32_t seed) {
  return testing::AdasumInputs(n, count, seed);
}

// Runs AdasumTree on encoded copies of `in` and returns vectors[0], decoded.
Vec RunTree(const std::vector<Vec>& in, DataType dtype) {
  std::vector<std::vector<uint8_t>> bytes;
  for (const Vec& v : in) bytes.push_back(Encode(v, dtype));
  std::vector<void*> ptrs;
  for (auto& b : bytes) ptrs.push_back(b.data());
  AdasumTree(dtype, ptrs, static_cast<int64_t>(in[0].size()));
  return Decode(bytes[0], dtype);
}

TEST(AdasumTest, SupportsFloatTypesOnly) {
  for (DataType t : kFloatTypes) EXPECT_TRUE(AdasumSupports(t)) << DataTypeName(t);
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kInt32,
                     DataType::kInt64})
    EXPECT_FALSE(AdasumSupports(t)) << DataTypeName(t);
}

TEST(AdasumTest, PairOnVectorsWithKnownResults) {
  // Orthogonal vectors add; equal ones give themselves back; zero leaves the other;
  // opposite ones a, -a: a.b = -|a|^2, coefficients 3/2, result 0.
  struct Case {
    Vec a, b, want;
  };
  const Case cases[] = {
      {{1, 0, 0}, {0, 2, 0}, {1, 2, 0}},
      {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}},
      {{1, -2, 4}, {0, 0, 0}, {1, -2, 4}},
      {{0, 0, 0}, {3, 0, -1}, {3, 0, -1}},
      {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      {{1, 2, 2}, {-1, -2, -2}, {0, 0, 0}},
      // Scalars: (1 - b/2a) a + (1 - a/2b) b = (a + b) / 2.
      {{2}, {4}, {3}},
  };
  for (DataType t : kFloatTypes) {
    for (const Case& c : cases) {
      std::vector<uint8_t> a = Encode(c.a, t), b = Encode(c.b, t);
      AdasumPair(t, a.data(), b.data(), static_cast<int64_t>(c.a.size()));
      EXPECT_EQ(Decode(a, t), c.want) << DataTypeName(t);
    }
  }
}

TEST(AdasumTest, TinyNormsCountAsZero) {
  // |b|^2 = 1e-160 is below sqrt(DBL_MIN) (about 1.5e-154): b's coefficient is 1,
  // not 1 - a.b / (2 |b|^2) = 1 - 5e79, which would make a[0] 0.5.
  std::vector<double> a = {1, 1}, b = {1e-80, 0};
  AdasumPair(DataType::kFloat64, a.data(), b.data(), 2);
  EXPECT_EQ(a[0], 1.0);
  EXPECT_EQ(a[1], 1.0);
}

TEST(AdasumTest, TreeMatchesReferenceForEveryRankCountAndDtype) {
  for (DataType t : kFloatTypes) {
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8}) {
      for (int64_t count : {1, 2, 7, 1000}) {
        const std::vector<Vec> in = Inputs(n, count, 100 * n + static_cast<uint32_t>(count));
        ExpectNear(RunTree(in, t), RefTree(in, t), t,
                   std::string(DataTypeName(t)) + " n=" + std::to_string(n) +
                       " count=" + std::to_string(count));
      }
    }
  }
}

TEST(AdasumTest, TreeShapeIsPairsInRankOrderWithTheOddOneCarried) {
  // Spelled out for 3 and 5, independently of RefTree.
  const DataType t = DataType::kFloat64;
  const std::vector<Vec> v3 = Inputs(3, 50, 3);
  ExpectNear(RunTree(v3, t), RefCombine(RefCombine(v3[0], v3[1]), v3[2]), t, "n=3");
  const std::vector<Vec> v5 = Inputs(5, 50, 5);
  ExpectNear(RunTree(v5, t),
             RefCombine(RefCombine(RefCombine(v5[0], v5[1]), RefCombine(v5[2], v5[3])), v5[4]), t,
             "n=5");
  const std::vector<Vec> v6 = Inputs(6, 50, 6);
  ExpectNear(RunTree(v6, t),
             RefCombine(RefCombine(RefCombine(v6[0], v6[1]), RefCombine(v6[2], v6[3])),
                        RefCombine(v6[4], v6[5])),
             t, "n=6");
  // Another association gives another answer: the test above can tell them apart.
  const Vec other = RefCombine(v3[0], RefCombine(v3[1], v3[2]));
  const Vec want = RefCombine(RefCombine(v3[0], v3[1]), v3[2]);
  double diff = 0;
  for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::fabs(other[i] - want[i]));
  EXPECT_GT(diff, 1e-3);
}

TEST(AdasumTest, ZeroVectorsAreSkipped) {
  // A joined rank's zeros drop out: the tree of (a, 0, b, 0) is combine(a, b).
  for (DataType t : kFloatTypes) {
    const std::vector<Vec> in = Inputs(2, 33, 9);
    const Vec zero(33, 0.0);
    const Vec want = RefTree({in[0], in[1]}, t);
    ExpectNear(RunTree({in[0], zero, in[1], zero}, t), want, t,
               std::string(DataTypeName(t)) + " a,0,b,0");
    ExpectNear(RunTree({zero, zero, zero}, t), zero, t, "all zero");
  }
}

TEST(AdasumTest, FusedBufferCombinesEachTensorOnItsOwn) {
  const std::vector<int64_t> counts = {5, 0, 1, 17, 1000, 3, 0};
  for (DataType t : kFloatTypes) {
    for (int n : {1, 2, 3, 4, 5, 8}) {
      // Tensor k of rank r comes from Inputs(n, counts[k], seed k); rank r's buffer
      // holds its tensors back to back.
      std::vector<std::vector<Vec>> per_tensor;
      for (size_t k = 0; k < counts.size(); ++k)
        per_tensor.push_back(Inputs(n, counts[k], 7 + static_cast<uint32_t>(k)));
      std::vector<std::vector<uint8_t>> buffers(n);
      for (int r = 0; r < n; ++r) {
        Vec flat;
        for (size_t k = 0; k < counts.size(); ++k)
          flat.insert(flat.end(), per_tensor[k][r].begin(), per_tensor[k][r].end());
        buffers[r] = Encode(flat, t);
      }
      std::vector<void*> ptrs;
      for (auto& b : buffers) ptrs.push_back(b.data());
      AdasumFused(t, ptrs, counts);
      const Vec got = Decode(buffers[0], t);
      int64_t offset = 0;
      for (size_t k = 0; k < counts.size(); ++k) {
        const Vec part(got.begin() + offset, got.begin() + offset + counts[k]);
        offset += counts[k];
        if (counts[k] == 0) continue;
        ExpectNear(part, RefTree(per_tensor[k], t), t,
                   std::string(DataTypeName(t)) + " n=" + std::to_string(n) + " tensor " +
                       std::to_string(k));
      }
    }
  }
}

TEST(AdasumTest, SameBytesInSameBytesOut) {
  const std::vector<Vec> in = Inputs(5, 4097, 21);
  const Vec a = RunTree(in, DataType::kFloat32), b = RunTree(in, DataType::kFloat32);
  EXPECT_EQ(a, b);
}

proto::Response Allreduce(const std::string& name, ReduceOp op) {
  proto::Response r;
  r.set_type(proto::RESPONSE_ALLREDUCE);
  r.add_names(name);
  r.set_dtype(static_cast<int>(DataType::kFloat32));
  r.set_reduce_op(static_cast<int>(op));
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_device(-1);
  r.add_counts(4);
  return r;
}

TEST(AdasumTest, FusionPlannerKeepsAdasumApartFromOtherOps) {
  const std::vector<proto::Response> in = {
      Allreduce("s0", ReduceOp::kSum), Allreduce("a0", ReduceOp::kAdasum),
      Allreduce("s1", ReduceOp::kSum), Allreduce("a1", ReduceOp::kAdasum),
      Allreduce("v0", ReduceOp::kAverage)};
  const std::vector<proto::Response> out = PlanFusion(in, 1 << 20, 4);
  ASSERT_EQ(out.size(), 3u);
  for (const auto& r : out) {
    for (const auto& name : r.names()) {
      const ReduceOp want = name[0] == 'a' ? ReduceOp::kAdasum
                            : name[0] == 's' ? ReduceOp::kSum
                                             : ReduceOp::kAverage;
      EXPECT_EQ(r.reduce_op(), static_cast<int>(want)) << name;
    }
  }
  EXPECT_EQ(out[1].names_size(), 2);
  EXPECT_EQ(out[1].names(0), "a0");
  EXPECT_EQ(out[1].names(1), "a1");
}

TEST(AdasumTest, OpIsNamedAndValid) {
  EXPECT_TRUE(IsValidReduceOp(static_cast<int>(ReduceOp::kAdasum)));
  EXPECT_FALSE(IsValidReduceOp(kNumReduceOps));
  EXPECT_STREQ(ReduceOpName(ReduceOp::kAdasum), "adasum");
}

}  // namespace
}  // namespace hvd
