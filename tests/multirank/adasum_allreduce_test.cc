// Adasum all-reduce across N threads, each its own Runtime (shared memory, Gloo
// in the .gloo run, the hierarchical backend with two "hosts"): fused tensors of
// every float dtype against tests/adasum_reference.h on every rank, results
// bitwise-identical across ranks, scale factors, a joined rank, process sets, and
// the refusals at enqueue.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/adasum_reference.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using Vec = std::vector<double>;

const DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                DataType::kBFloat16};
constexpr auto kWait = std::chrono::milliseconds(60000);

struct Tensor {
  std::string name;
  DataType dtype;
  int64_t count;
  bool in_place;
  uint32_t seed;
};

std::vector<Tensor> EveryDtypeAndCount(const std::vector<int64_t>& counts) {
  std::vector<Tensor> out;
  for (DataType t : kFloatTypes)
    for (int64_t n : counts)
      out.push_back({std::string("ada.") + DataTypeName(t) + "." + std::to_string(n), t, n,
                     out.size() % 2 == 1, static_cast<uint32_t>(out.size() + 1)});
  return out;
}

Vec Scaled(Vec v, double factor) {
  for (auto& x : v) x *= factor;
  return v;
}

// What every rank should hold for `t`: the tree over the `present` ranks' vectors
// (zeros for the others), between the scale factors, rounded as the runtime rounds.
// The factors used here are exact in every dtype, so scaling commutes with rounding.
Vec Expected(const Tensor& t, int size, const std::vector<bool>& present, double pre = 1,
             double post = 1) {
  std::vector<Vec> in = AdasumInputs(size, t.count, t.seed);
  for (int r = 0; r < size; ++r) in[r] = present[r] ? Scaled(RoundTo(in[r], t.dtype), pre) : Vec(t.count, 0.0);
  return RoundTo(Scaled(AdasumRefTree(in, t.dtype), post), t.dtype);
}

struct Options {
  int64_t fusion_threshold = 128 << 20;
  double pre = 1, post = 1;
  std::function<void(RuntimeOptions&)> adjust;
};

// Every rank enqueues every tensor at once (in its own order, so they fuse in
// negotiated order), waits, and checks; returns each rank's result bytes.
std::vector<std::vector<std::vector<uint8_t>>> RunAdasum(int size, const std::vector<Tensor>& tensors,
                                                         const Options& opt) {
  std::vector<std::vector<std::vector<uint8_t>>> results(size);
  const std::vector<bool> everyone(size, true);
  RunRanks(
      size,
      [&](int rank, Runtime& rt) {
        const size_t n = tensors.size();
        std::vector<std::vector<uint8_t>> ins(n), outs(n);
        std::vector<std::shared_ptr<Work>> works(n);
        std::vector<size_t> order(n);
        for (size_t i = 0; i < n; ++i) order[i] = i;
        std::mt19937 gen(rank);
        std::shuffle(order.begin(), order.end(), gen);
        for (size_t i : order) {
          const Tensor& t = tensors[i];
          ins[i] = Encode(AdasumInputs(size, t.count, t.seed)[rank], t.dtype);
          outs[i].assign(ins[i].size(), 0xAB);
          TensorEntry a;
          a.name = t.name;
          a.input = ins[i].data();
          a.output = t.in_place ? ins[i].data() : outs[i].data();
          a.shape = {t.count};
          a.dtype = t.dtype;
          a.reduce_op = ReduceOp::kAdasum;
          a.prescale_factor = opt.pre;
          a.postscale_factor = opt.post;
          Status s = rt.EnqueueOne(TensorEntry(a), 0, &works[i]);
          ASSERT_TRUE(s.ok()) << t.name << ": " << s.ToString();
        }
        for (size_t i = 0; i < n; ++i) {
          const Tensor& t = tensors[i];
          Status s = works[i]->Wait(kWait);
          ASSERT_TRUE(s.ok()) << "rank " << rank << " " << t.name << ": " << s.ToString();
          const auto& got = t.in_place ? ins[i] : outs[i];
          const std::string diff =
              AdasumMismatch(Decode(got, t.dtype), Expected(t, size, everyone, opt.pre, opt.post), t.dtype);
          EXPECT_TRUE(diff.empty()) << "rank " << rank << " of " << size << " " << t.name << ": " << diff;
          results[rank].push_back(got);
        }
      },
      [&](RuntimeOptions& o) {
        o.fusion_threshold = opt.fusion_threshold;
        if (opt.adjust) opt.adjust(o);
      });
  return results;
}

void ExpectSameBytesEverywhere(const std::vector<std::vector<std::vector<uint8_t>>>& results,
                               const std::vector<Tensor>& tensors) {
  for (size_t r = 1; r < results.size(); ++r) {
    ASSERT_EQ(results[r].size(), results[0].size()) << "rank " << r;
    for (size_t i = 0; i < results[0].size(); ++i)
      EXPECT_TRUE(results[r][i] == results[0][i]) << tensors[i].name << ": rank " << r << " differs from rank 0";
  }
}

class AdasumSweep : public ::testing::TestWithParam<int> {};

TEST_P(AdasumSweep, FusedTensorsMatchTheReferenceBitwiseAlikeOnEveryRank) {
  const auto tensors = EveryDtypeAndCount({0, 1, 17, 1031});
  ExpectSameBytesEverywhere(RunAdasum(GetParam(), tensors, {}), tensors);
}

TEST_P(AdasumSweep, TinyFusionThresholdSplitsIntoManyBuffers) {
  Options opt;
  opt.fusion_threshold = 64;
  const auto tensors = EveryDtypeAndCount({1, 9, 33});
  ExpectSameBytesEverywhere(RunAdasum(GetParam(), tensors, opt), tensors);
}

TEST_P(AdasumSweep, PrescaleBeforeAndPostscaleAfter) {
  for (int64_t threshold : {128 << 20, 0}) {  // Fused, and each tensor alone.
    Options opt;
    opt.pre = 0.5;
    opt.post = 3;
    opt.fusion_threshold = threshold;
    RunAdasum(GetParam(), EveryDtypeAndCount({1, 40}), opt);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AdasumSweep, ::testing::Values(1, 2, 3, 4, 5),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(AdasumAllreduce, HierarchicalBackend) {
  // Two "hosts" of two ranks: shared memory inside each, Gloo across (or Gloo
  // throughout in the .gloo run).
  Options opt;
  opt.adjust = [](RuntimeOptions& o) { o.host_id = "host" + std::to_string(o.rank / 2); };
  const auto tensors = EveryDtypeAndCount({3, 257});
  ExpectSameBytesEverywhere(RunAdasum(4, tensors, opt), tensors);
}

TEST(AdasumAllreduce, LargeTensorAcrossRanks) {
  const std::vector<Tensor> tensors = {{"ada.big", DataType::kFloat32, (1 << 20) + 3, false, 77}};
  ExpectSameBytesEverywhere(RunAdasum(3, tensors, {}), tensors);
}

TEST(AdasumAllreduce, JoinedRankContributesNothing) {
  // Rank 1 joins at once; ranks 0 and 2 reduce two fused tensors twice. The tree of
  // (v0, 0, v2) is combine(combine(v0, 0), v2) = combine(v0, v2).
  const int size = 3;
  const std::vector<Tensor> tensors = {{"j.f32", DataType::kFloat32, 50, false, 5},
                                       {"j.f64", DataType::kFloat64, 7, true, 6}};
  const std::vector<bool> present = {true, false, true};
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::shared_ptr<Work> join;
    if (rank == 1) {
      ASSERT_TRUE(rt.Join(0, &join).ok());
      ASSERT_TRUE(join->Wait(kWait).ok());
      return;
    }
    for (int step = 0; step < 2; ++step) {
      std::vector<std::vector<uint8_t>> ins, outs;
      std::vector<std::shared_ptr<Work>> works(tensors.size());
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i];
        ins.push_back(Encode(AdasumInputs(size, t.count, t.seed)[rank], t.dtype));
        outs.push_back(std::vector<uint8_t>(ins.back().size()));
      }
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i];
        TensorEntry a;
        a.name = t.name;
        a.input = ins[i].data();
        a.output = t.in_place ? ins[i].data() : outs[i].data();
        a.shape = {t.count};
        a.dtype = t.dtype;
        a.reduce_op = ReduceOp::kAdasum;
        ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works[i]).ok());
      }
      for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& t = tensors[i];
        Status s = works[i]->Wait(kWait);
        ASSERT_TRUE(s.ok()) << s.ToString();
        const std::string diff = AdasumMismatch(Decode(t.in_place ? ins[i] : outs[i], t.dtype),
                                                Expected(t, size, present), t.dtype);
        EXPECT_TRUE(diff.empty()) << "rank " << rank << " step " << step << " " << t.name << ": " << diff;
      }
    }
    ASSERT_TRUE(rt.Join(0, &join).ok());
    ASSERT_TRUE(join->Wait(kWait).ok());
  });
}

TEST(AdasumAllreduce, ProcessSetsCombineTheirOwnRanksInSetOrder) {
  // Sets {0, 2} and {1, 3} and {0, 1, 3}: each combines its members' vectors, in
  // the order of their ranks within the set.
  const int size = 4;
  const std::vector<std::vector<int>> sets = {{0, 2}, {1, 3}, {0, 1, 3}};
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::vector<int> ids(sets.size());
    for (size_t k = 0; k < sets.size(); ++k) ASSERT_TRUE(rt.AddProcessSet(sets[k], &ids[k]).ok());
    for (size_t k = 0; k < sets.size(); ++k) {
      const std::vector<int>& members = sets[k];
      if (std::find(members.begin(), members.end(), rank) == members.end()) continue;
      const Tensor t = {"set.grad", DataType::kFloat32, 64, false, 40 + static_cast<uint32_t>(k)};
      const std::vector<Vec> all = AdasumInputs(size, t.count, t.seed);
      std::vector<uint8_t> in = Encode(all[rank], t.dtype), out(in.size());
      TensorEntry a;
      a.name = t.name;
      a.input = in.data();
      a.output = out.data();
      a.shape = {t.count};
      a.dtype = t.dtype;
      a.reduce_op = ReduceOp::kAdasum;
      std::shared_ptr<Work> w;
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), ids[k], &w).ok());
      ASSERT_TRUE(w->Wait(kWait).ok());
      std::vector<Vec> mine;
      for (int m : members) mine.push_back(all[m]);
      const std::string diff = AdasumMismatch(Decode(out, t.dtype), AdasumRefTree(mine, t.dtype), t.dtype);
      EXPECT_TRUE(diff.empty()) << "rank " << rank << " set " << k << ": " << diff;
    }
  });
}

TEST(AdasumAllreduce, RefusesIntegerDeviceAndReducescatterAtEnqueue) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<int32_t> ints(4, 1);
    std::vector<float> floats(4, 1);
    std::shared_ptr<Work> w;
    TensorEntry a;
    a.name = "ada.int";
    a.input = a.output = ints.data();
    a.shape = {4};
    a.dtype = DataType::kInt32;
    a.reduce_op = ReduceOp::kAdasum;
    Status s = rt.EnqueueOne(TensorEntry(a), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(),
                HasSubstr("tensor 'ada.int': Adasum takes float16, bfloat16, float32 or float64, not int32"));

    a.name = "ada.gpu";
    a.input = a.output = floats.data();
    a.dtype = DataType::kFloat32;
    a.device = 0;
    s = rt.EnqueueOne(TensorEntry(a), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("tensor 'ada.gpu': Adasum takes host tensors only, and this one is on cuda:0"));

    TensorEntry rs;
    rs.name = "ada.rs";
    rs.type = OpType::kReducescatter;
    rs.dtype = DataType::kFloat32;
    rs.reduce_op = ReduceOp::kAdasum;
    rs.input = floats.data();
    rs.shape = {4};
    s = rt.EnqueueOne(std::move(rs), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("reducescatter supports only sum and average"));

    // Nothing was enqueued: the runtime goes on.
    a.name = "ada.ok";
    a.device = -1;
    floats.assign(4, static_cast<float>(rank + 1));
    ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &w).ok());
    ASSERT_TRUE(w->Wait(kWait).ok());
    // Parallel vectors (1,1,1,1) and (2,2,2,2): a.b = 8, coefficients 1 - 8/8 = 0
    // and 1 - 8/32 = 3/4, so the result is 3/4 of the second: 1.5.
    EXPECT_EQ(floats, std::vector<float>(4, 1.5f));
  });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
