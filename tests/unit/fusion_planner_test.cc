// Unit tests for controller/fusion_planner.h: which agreed responses PlanFusion merges,
// in what order, and a randomized property test of the documented invariants.
#include "controller/fusion_planner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/types.h"

namespace hvd {
namespace {

using ::testing::ElementsAre;

proto::Response Resp(const std::string& name, int64_t count, DataType dtype = DataType::kFloat32,
                     proto::ResponseType type = proto::RESPONSE_ALLREDUCE) {
  proto::Response r;
  r.set_type(type);
  r.add_names(name);
  r.set_dtype(static_cast<int>(dtype));
  r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_device(-1);
  r.add_counts(count);
  return r;
}

proto::Response Gather(const std::string& name, int64_t row, std::vector<int64_t> rank_dims) {
  proto::Response r = Resp(name, row, DataType::kFloat32, proto::RESPONSE_ALLGATHER);
  for (int64_t d : rank_dims) r.add_rank_dims(d);
  return r;
}

std::vector<std::vector<std::string>> Names(const std::vector<proto::Response>& out) {
  std::vector<std::vector<std::string>> v;
  for (const auto& r : out) v.emplace_back(r.names().begin(), r.names().end());
  return v;
}

using Groups = std::vector<std::vector<std::string>>;

TEST(PlanFusionTest, AppendingIntoClearedResponsesPlansTheSameAsFresh) {
  // The steady state: the loop clears last cycle's responses and plans into
  // them again. Leftovers of a different plan (more names, other fields) must
  // not leak into the new one.
  std::vector<proto::Response> big, small;
  for (int i = 0; i < 6; ++i) big.push_back(Resp("big" + std::to_string(i), 100));
  big.push_back(Resp("d", 4, DataType::kFloat64));
  small.push_back(Resp("x", 8, DataType::kFloat64));
  small.push_back(Resp("y", 8));
  auto pointers = [](const std::vector<proto::Response>& v) {
    std::vector<const proto::Response*> p;
    for (const auto& r : v) p.push_back(&r);
    return p;
  };
  google::protobuf::RepeatedPtrField<proto::Response> kept;
  PlanFusion(pointers(big), 1 << 20, 2, &kept);
  ASSERT_EQ(kept.size(), 2);
  EXPECT_EQ(kept.Get(0).names_size(), 6);
  kept.Clear();
  PlanFusion(pointers(small), 1 << 20, 2, &kept);
  const std::vector<proto::Response> fresh = PlanFusion(small, 1 << 20, 2);
  ASSERT_EQ(kept.size(), static_cast<int>(fresh.size()));
  for (int i = 0; i < kept.size(); ++i)
    EXPECT_EQ(kept.Get(i).SerializeAsString(), fresh[i].SerializeAsString()) << "response " << i;
  // Appending keeps what was there.
  PlanFusion(pointers(small), 1 << 20, 2, &kept);
  EXPECT_EQ(kept.size(), 2 * static_cast<int>(fresh.size()));
}

TEST(ResponseTensorBytesTest, ElementSizeTimesCount) {
  EXPECT_EQ(ResponseTensorBytes(Resp("a", 10), 0, 4), 40);
  EXPECT_EQ(ResponseTensorBytes(Resp("a", 10, DataType::kFloat16), 0, 4), 20);
  EXPECT_EQ(ResponseTensorBytes(Resp("a", 10, DataType::kInt64), 0, 4), 80);
  EXPECT_EQ(ResponseTensorBytes(Resp("a", 10, DataType::kUInt8), 0, 4), 10);
  EXPECT_EQ(ResponseTensorBytes(Resp("a", 0), 0, 4), 0);
}

TEST(ResponseTensorBytesTest, AllgatherCountsTheWholeGatheredOutput) {
  // 3 floats per row; rank 0 has 2 rows, rank 1 has 5: 7 * 3 * 4 bytes.
  EXPECT_EQ(ResponseTensorBytes(Gather("g", 3, {2, 5}), 0, 2), 84);
  // Tensor i reads rank_dims[i * size ...].
  proto::Response two = Gather("g", 3, {2, 5});
  two.add_names("h");
  two.add_counts(1);
  two.add_rank_dims(10);
  two.add_rank_dims(20);
  EXPECT_EQ(ResponseTensorBytes(two, 1, 2), 120);
}

TEST(PlanFusionTest, ThresholdZeroDisablesFusion) {
  std::vector<proto::Response> in = {Resp("a", 1), Resp("b", 1), Resp("c", 1)};
  auto out = PlanFusion(in, 0, 2);
  EXPECT_EQ(Names(out), (Groups{{"a"}, {"b"}, {"c"}}));
  for (size_t i = 0; i < in.size(); ++i)
    EXPECT_EQ(out[i].SerializeAsString(), in[i].SerializeAsString()) << "responses pass through unchanged";
}

TEST(PlanFusionTest, EmptyInput) {
  EXPECT_TRUE(PlanFusion(std::vector<proto::Response>{}, 1024, 2).empty());
}

TEST(PlanFusionTest, CompatibleTensorsFuseInOrderUpToTheThreshold) {
  // 40 bytes each; 100 holds two.
  auto out = PlanFusion({Resp("a", 10), Resp("b", 10), Resp("c", 10), Resp("d", 10), Resp("e", 10)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"a", "b"}, {"c", "d"}, {"e"}}));
  EXPECT_THAT(out[0].counts(), ElementsAre(10, 10));
  EXPECT_EQ(out[0].type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_EQ(out[0].dtype(), static_cast<int>(DataType::kFloat32));
  // Filling the threshold exactly is allowed.
  out = PlanFusion({Resp("a", 10), Resp("b", 10), Resp("c", 10), Resp("d", 10)}, 80, 2);
  EXPECT_EQ(Names(out), (Groups{{"a", "b"}, {"c", "d"}}));
  out = PlanFusion({Resp("a", 10), Resp("b", 10), Resp("c", 10), Resp("d", 10)}, 79, 2);
  EXPECT_EQ(Names(out), (Groups{{"a"}, {"b"}, {"c"}, {"d"}}));
  // A large threshold takes them all, counts in name order.
  out = PlanFusion({Resp("a", 1), Resp("b", 2), Resp("c", 3)}, 1 << 20, 2);
  EXPECT_EQ(Names(out), (Groups{{"a", "b", "c"}}));
  EXPECT_THAT(out[0].counts(), ElementsAre(1, 2, 3));
}

TEST(PlanFusionTest, ATensorLargerThanTheThresholdStaysAlone) {
  auto out = PlanFusion({Resp("a", 10), Resp("big", 100), Resp("b", 10), Resp("c", 10)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"a"}, {"big"}, {"b", "c"}}));
  out = PlanFusion({Resp("big", 100), Resp("huge", 1000)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"big"}, {"huge"}}));
  // Exactly the threshold: nothing else fits beside it.
  out = PlanFusion({Resp("full", 25), Resp("x", 1), Resp("y", 1)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"full"}, {"x", "y"}}));
  // Zero-sized tensors fit anywhere.
  out = PlanFusion({Resp("z0", 0), Resp("full", 25), Resp("z1", 0)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"z0", "full", "z1"}}));
}

// Regression (fixed in e83a5c8): a tensor of exactly `threshold` bytes did not open a
// group, so a following zero-byte compatible tensor, which fits (100 + 0 <= 100), got a
// response of its own; {z0, full} fused but {full, z1} did not.
TEST(PlanFusionTest, AZeroByteTensorFitsBesideOneThatFillsTheThreshold) {
  auto out = PlanFusion({Resp("full", 25), Resp("z1", 0)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"full", "z1"}}));
}

TEST(PlanFusionTest, AGroupClosesWhenTheNextCompatibleTensorDoesNotFit) {
  // c does not fit beside a and b; d would fit beside a and b but must not reach back.
  auto out = PlanFusion({Resp("a", 10), Resp("b", 10), Resp("c", 20), Resp("d", 1)}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"a", "b"}, {"c", "d"}}));
}

TEST(PlanFusionTest, IncompatibleResponsesNeverFuse) {
  std::vector<std::pair<std::string, std::function<void(proto::Response*)>>> changes = {
      {"dtype", [](proto::Response* r) { r->set_dtype(static_cast<int>(DataType::kInt32)); }},
      {"op", [](proto::Response* r) { r->set_reduce_op(static_cast<int>(ReduceOp::kMax)); }},
      {"average", [](proto::Response* r) { r->set_reduce_op(static_cast<int>(ReduceOp::kAverage)); }},
      {"prescale", [](proto::Response* r) { r->set_prescale_factor(0.5); }},
      {"postscale", [](proto::Response* r) { r->set_postscale_factor(2.0); }},
      {"device", [](proto::Response* r) { r->set_device(0); }},
      {"joined", [](proto::Response* r) { r->add_joined_ranks(1); }},
      {"reducescatter",
       [](proto::Response* r) {
         r->set_type(proto::RESPONSE_REDUCESCATTER);
         r->add_rank_dims(1);
       }},
  };
  for (const auto& [what, change] : changes) {
    SCOPED_TRACE(what);
    proto::Response other = Resp("b", 1);
    change(&other);
    auto out = PlanFusion({Resp("a", 1), other, Resp("c", 1)}, 1 << 20, 2);
    EXPECT_EQ(Names(out), (Groups{{"a", "c"}, {"b"}}));
    proto::Response other2 = Resp("d", 1);
    change(&other2);
    out = PlanFusion({other, other2}, 1 << 20, 2);
    EXPECT_EQ(Names(out), (Groups{{"b", "d"}})) << "equal non-default keys fuse with each other";
  }
  // Joined ranks must be equal as lists.
  proto::Response j1 = Resp("j1", 1), j2 = Resp("j2", 1);
  j1.add_joined_ranks(1);
  j2.add_joined_ranks(2);
  EXPECT_EQ(Names(PlanFusion({j1, j2}, 1 << 20, 3)), (Groups{{"j1"}, {"j2"}}));
}

TEST(PlanFusionTest, InterleavedKeysGroupByKeyInOrderOfFirstTensor) {
  auto h = [](const std::string& n) { return Resp(n, 1, DataType::kFloat16); };
  auto out = PlanFusion({h("h1"), Resp("f1", 1), h("h2"), Resp("f2", 1), h("h3")}, 1 << 20, 2);
  EXPECT_EQ(Names(out), (Groups{{"h1", "h2", "h3"}, {"f1", "f2"}}));
  EXPECT_EQ(out[0].dtype(), static_cast<int>(DataType::kFloat16));
  EXPECT_EQ(out[1].dtype(), static_cast<int>(DataType::kFloat32));
}

TEST(PlanFusionTest, ErrorsBroadcastsBarriersAlltoallsAndJoinsAreNeverFused) {
  for (auto type : {proto::RESPONSE_ERROR, proto::RESPONSE_BROADCAST, proto::RESPONSE_BARRIER,
                    proto::RESPONSE_ALLTOALL, proto::RESPONSE_JOIN}) {
    SCOPED_TRACE(type);
    auto out = PlanFusion({Resp("x1", 1, DataType::kFloat32, type), Resp("a", 1),
                           Resp("x2", 1, DataType::kFloat32, type), Resp("b", 1)},
                          1 << 20, 2);
    EXPECT_EQ(Names(out), (Groups{{"x1"}, {"a", "b"}, {"x2"}}));
    EXPECT_EQ(out[0].type(), type);
    EXPECT_EQ(out[2].type(), type);
  }
}

TEST(PlanFusionTest, AllgatherBytesUseRankDims) {
  // Each gathers (2 + 3) rows of 3 floats = 60 bytes; by counts alone it would be 12.
  auto out = PlanFusion({Gather("g1", 3, {2, 3}), Gather("g2", 3, {1, 4})}, 100, 2);
  EXPECT_EQ(Names(out), (Groups{{"g1"}, {"g2"}}));
  out = PlanFusion({Gather("g1", 3, {2, 3}), Gather("g2", 3, {1, 4})}, 120, 2);
  ASSERT_EQ(Names(out), (Groups{{"g1", "g2"}}));
  EXPECT_EQ(out[0].type(), proto::RESPONSE_ALLGATHER);
  EXPECT_THAT(out[0].counts(), ElementsAre(3, 3));
  EXPECT_THAT(out[0].rank_dims(), ElementsAre(2, 3, 1, 4)) << "tensor-major, in name order";
}

TEST(PlanFusionTest, ReducescatterRankDimsConcatenate) {
  proto::Response a = Resp("a", 6, DataType::kFloat32, proto::RESPONSE_REDUCESCATTER);
  a.add_rank_dims(3);
  proto::Response b = Resp("b", 8, DataType::kFloat32, proto::RESPONSE_REDUCESCATTER);
  b.add_rank_dims(4);
  auto out = PlanFusion({a, b}, 1 << 20, 2);
  ASSERT_EQ(Names(out), (Groups{{"a", "b"}}));
  EXPECT_THAT(out[0].counts(), ElementsAre(6, 8));
  EXPECT_THAT(out[0].rank_dims(), ElementsAre(3, 4));
}

TEST(PlanFusionTest, GroupedTensorsShareAResponseWhateverTheThreshold) {
  auto grouped = [](const std::string& n, int64_t count, int64_t group) {
    proto::Response r = Resp(n, count);
    r.set_group_id(group);
    return r;
  };
  for (int64_t threshold : {int64_t{0}, int64_t{4}, int64_t{1} << 20}) {
    SCOPED_TRACE(threshold);
    auto out = PlanFusion({grouped("g1", 100, 7), Resp("plain", 1), grouped("g2", 100, 7),
                           grouped("h1", 1, 8), grouped("g3", 100, 7)},
                          threshold, 2);
    ASSERT_GE(out.size(), 3u);
    EXPECT_EQ(Names(out)[0], (std::vector<std::string>{"g1", "g2", "g3"}));
    EXPECT_EQ(out[0].group_id(), 7);
    EXPECT_THAT(out[0].counts(), ElementsAre(100, 100, 100));
    for (size_t i = 1; i < out.size(); ++i)
      for (const auto& n : out[i].names()) EXPECT_TRUE(n == "plain" || n == "h1") << n;
  }
}

TEST(PlanFusionTest, MultiNameResponsesPassThrough) {
  proto::Response pre = Resp("p", 1);
  pre.add_names("q");
  pre.add_counts(1);
  auto out = PlanFusion({Resp("a", 1), pre, Resp("b", 1)}, 1 << 20, 2);
  EXPECT_EQ(Names(out), (Groups{{"a", "b"}, {"p", "q"}}));
}

// ---------------------------------------------------------------- property test

std::string Key(const proto::Response& r) {
  std::ostringstream o;
  o << r.type() << "/" << r.dtype() << "/" << r.reduce_op() << "/" << r.device() << "/"
    << r.prescale_factor() << "/" << r.postscale_factor() << "/";
  for (int j : r.joined_ranks()) o << j << ",";
  return o.str();
}

int64_t ResponseBytesForTest(const proto::Response& r, int size) {
  int64_t total = 0;
  for (int i = 0; i < r.names_size(); ++i) total += ResponseTensorBytes(r, i, size);
  return total;
}

bool IsFusableType(proto::ResponseType t) {
  return t == proto::RESPONSE_ALLREDUCE || t == proto::RESPONSE_ALLGATHER ||
         t == proto::RESPONSE_REDUCESCATTER;
}

TEST(PlanFusionPropertyTest, RandomResponses) {
  std::mt19937 rng(20240611);
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  const proto::ResponseType types[] = {proto::RESPONSE_ALLREDUCE,     proto::RESPONSE_ALLREDUCE,
                                       proto::RESPONSE_ALLGATHER,     proto::RESPONSE_REDUCESCATTER,
                                       proto::RESPONSE_BROADCAST,     proto::RESPONSE_ERROR,
                                       proto::RESPONSE_BARRIER};
  const DataType dtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kInt64};
  const int64_t thresholds[] = {0, 1, 16, 64, 200, 1000, 1 << 20};
  int fused_groups = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const int size = 1 + pick(4);
    const int64_t threshold = thresholds[pick(7)];
    const int n = pick(30);
    std::vector<proto::Response> in;
    std::map<std::string, int> index;  // name -> position in `in`
    for (int i = 0; i < n; ++i) {
      const auto type = types[pick(7)];
      proto::Response r = Resp("t" + std::to_string(i), pick(40), dtypes[pick(2 + (iter % 2))], type);
      if (pick(4) == 0) r.set_reduce_op(static_cast<int>(ReduceOp::kMax));
      if (pick(6) == 0) r.set_prescale_factor(0.5);
      if (pick(8) == 0) r.set_postscale_factor(3.0);
      if (pick(8) == 0) r.set_device(0);
      if (pick(8) == 0) r.add_joined_ranks(size - 1);
      if (type == proto::RESPONSE_ALLGATHER)
        for (int k = 0; k < size; ++k) r.add_rank_dims(pick(5));
      if (type == proto::RESPONSE_REDUCESCATTER) r.add_rank_dims(size);
      index[r.names(0)] = i;
      in.push_back(r);
    }
    SCOPED_TRACE("iteration " + std::to_string(iter) + ", threshold " + std::to_string(threshold) +
                 ", size " + std::to_string(size));
    const std::vector<proto::Response> out = PlanFusion(in, threshold, size);

    // Every name exactly once.
    std::multiset<std::string> seen;
    for (const auto& g : out)
      for (const auto& name : g.names()) seen.insert(name);
    ASSERT_EQ(seen.size(), in.size());
    for (const auto& r : in) ASSERT_EQ(seen.count(r.names(0)), 1u) << r.names(0);

    if (threshold == 0) {
      ASSERT_EQ(out.size(), in.size());
      for (size_t i = 0; i < in.size(); ++i)
        ASSERT_EQ(out[i].SerializeAsString(), in[i].SerializeAsString());
      continue;
    }

    int last_first = -1;
    std::map<std::string, std::vector<const proto::Response*>> groups_by_key;
    for (const auto& g : out) {
      ASSERT_GT(g.names_size(), 0);
      const proto::Response& first = in[index.at(g.names(0))];
      // Groups come out in the order of their first tensor.
      ASSERT_GT(index.at(g.names(0)), last_first);
      last_first = index.at(g.names(0));
      if (g.names_size() > 1) {
        ++fused_groups;
        ASSERT_TRUE(IsFusableType(g.type())) << "type " << g.type() << " was fused";
        ASSERT_LE(ResponseBytesForTest(g, size), threshold) << "a fused group exceeds the threshold";
      }
      // Members are compatible with the group, in input order, and the group's
      // counts and rank_dims are the members' concatenated.
      std::vector<int64_t> counts, rank_dims;
      int prev = -1;
      for (const auto& name : g.names()) {
        const proto::Response& m = in[index.at(name)];
        ASSERT_EQ(Key(m), Key(g)) << name << " in a group led by " << g.names(0);
        ASSERT_GT(index.at(name), prev) << "relative order broken at " << name;
        prev = index.at(name);
        counts.insert(counts.end(), m.counts().begin(), m.counts().end());
        rank_dims.insert(rank_dims.end(), m.rank_dims().begin(), m.rank_dims().end());
      }
      ASSERT_EQ(std::vector<int64_t>(g.counts().begin(), g.counts().end()), counts);
      ASSERT_EQ(std::vector<int64_t>(g.rank_dims().begin(), g.rank_dims().end()), rank_dims);
      ASSERT_EQ(Key(g), Key(first));
      if (IsFusableType(g.type())) groups_by_key[Key(g)].push_back(&g);
    }
    // Per key: the groups, read in order, are that key's tensors in input order (no
    // group reaches back past a later one), and each group closed only because the
    // next tensor of its key did not fit.
    for (const auto& [key, groups] : groups_by_key) {
      std::vector<int> order;
      for (const auto* g : groups)
        for (const auto& name : g->names()) order.push_back(index.at(name));
      ASSERT_TRUE(std::is_sorted(order.begin(), order.end())) << "key " << key;
      for (size_t i = 0; i + 1 < groups.size(); ++i) {
        const int64_t next_bytes = ResponseTensorBytes(in[index.at(groups[i + 1]->names(0))], 0, size);
        ASSERT_GT(ResponseBytesForTest(*groups[i], size) + next_bytes, threshold)
            << "group led by " << groups[i]->names(0) << " closed although "
            << groups[i + 1]->names(0) << " fit";
      }
    }
  }
  EXPECT_GT(fused_groups, 100) << "the generator should exercise fusion";
}

}  // namespace
}  // namespace hvd
