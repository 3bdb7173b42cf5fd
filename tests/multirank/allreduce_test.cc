// All-reduce across N threads, each its own Runtime over real Gloo on 127.0.0.1,
// checked against a local reference: ranks 1..8, every dtype and op, counts 0, 1,
// odd and large, in place and not, and a tiny fusion threshold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>

#include "runtime/kernels/reduce_kernels.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                              DataType::kBFloat16, DataType::kInt8,   DataType::kUInt8,
                              DataType::kInt32,   DataType::kInt64,  DataType::kInt16};
const ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProduct};

bool IsInteger(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt32 ||
         t == DataType::kInt64 || t == DataType::kInt16;
}

// Rank data chosen so every reference is exact: small integers, non-negative for
// uint8, and {-1, 1, 2} (or {1, 2}) for products so 8 ranks stay within range.
std::vector<double> InputFor(int rank, int64_t count, DataType dtype, ReduceOp op, uint32_t seed) {
  std::vector<double> v = RankData(rank, count, seed);
  for (auto& x : v) {
    if (op == ReduceOp::kProduct) x = (static_cast<int>(x) % 3 == 0) ? 2 : (x < 0 ? -1 : 1);
    if (dtype == DataType::kUInt8) x = std::fabs(x);
  }
  return v;
}

// The reference result, computed in int64 or double and rounded as the dtype would be.
std::vector<double> Reference(int size, int64_t count, DataType dtype, ReduceOp op, uint32_t seed,
                              double pre = 1.0, double post = 1.0) {
  std::vector<double> acc;
  for (int r = 0; r < size; ++r) {
    std::vector<double> in = InputFor(r, count, dtype, op, seed);
    for (auto& x : in) x *= pre;
    if (r == 0) {
      acc = in;
      continue;
    }
    for (int64_t i = 0; i < count; ++i) {
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage: acc[i] += in[i]; break;
        case ReduceOp::kProduct: acc[i] *= in[i]; break;
        case ReduceOp::kMin: acc[i] = std::min(acc[i], in[i]); break;
        case ReduceOp::kMax: acc[i] = std::max(acc[i], in[i]); break;
        case ReduceOp::kAdasum: break;  // Not element-wise: adasum_test.cc.
      }
    }
  }
  for (auto& x : acc) {
    if (IsInteger(dtype)) {
      // Wrap as the dtype does, then divide with truncation.
      x = Decode(Encode({x}, dtype), dtype)[0];
      if (op == ReduceOp::kAverage) x = std::trunc(x / size);
    } else if (op == ReduceOp::kAverage) {
      x /= size;
    }
    x *= post;
  }
  return acc;
}

double Tolerance(DataType dtype, double expected) {
  switch (dtype) {
    case DataType::kFloat16: return 2e-3 * std::max(1.0, std::fabs(expected));
    case DataType::kBFloat16: return 1e-2 * std::max(1.0, std::fabs(expected));
    case DataType::kFloat32: return 1e-6 * std::max(1.0, std::fabs(expected));
    case DataType::kFloat64: return 1e-12 * std::max(1.0, std::fabs(expected));
    default: return 0;
  }
}

void ExpectMatches(const std::vector<double>& got, const std::vector<double>& want, DataType dtype,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int shown = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::fabs(got[i] - want[i]) > Tolerance(dtype, want[i])) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
      if (++shown >= 3) return;
    }
  }
}

struct Case {
  std::string name;
  DataType dtype;
  ReduceOp op;
  int64_t count;
  bool in_place;
};

std::vector<Case> AllCases(const std::vector<int64_t>& counts) {
  std::vector<Case> cases;
  for (DataType t : kAllTypes)
    for (ReduceOp op : kAllOps)
      for (int64_t n : counts)
        for (bool in_place : {false, true})
          cases.push_back({std::string(DataTypeName(t)) + "." + ReduceOpName(op) + "." +
                               std::to_string(n) + (in_place ? ".inplace" : ""),
                           t, op, n, in_place});
  return cases;
}

// Enqueues every case asynchronously (so they fuse), waits, and checks each.
// `stats`, if given, receives rank 0's negotiation counts for the global set.
void RunCases(int size, const std::vector<Case>& cases, int64_t fusion_threshold,
              const std::function<void(RuntimeOptions&)>& adjust = nullptr,
              Controller::Stats* stats = nullptr) {
  RunRanks(
      size,
      [&](int rank, Runtime& rt) {
        std::vector<std::vector<uint8_t>> ins(cases.size()), outs(cases.size());
        std::vector<std::shared_ptr<Work>> works(cases.size());
        // Each rank enqueues in a different order: negotiation must still agree.
        std::vector<size_t> order(cases.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::mt19937 gen(rank);
        std::shuffle(order.begin(), order.end(), gen);
        for (size_t i : order) {
          const Case& c = cases[i];
          ins[i] = Encode(InputFor(rank, c.count, c.dtype, c.op, 1 + i), c.dtype);
          outs[i].assign(ins[i].size(), 0xAB);
          TensorEntry a;
          a.name = c.name;
          a.input = ins[i].data();
          a.output = c.in_place ? ins[i].data() : outs[i].data();
          a.shape = {c.count};
          a.dtype = c.dtype;
          a.reduce_op = c.op;
          Status s = rt.EnqueueOne(TensorEntry(a), 0, &works[i]);
          ASSERT_TRUE(s.ok()) << c.name << ": " << s.ToString();
        }
        for (size_t i = 0; i < cases.size(); ++i) {
          const Case& c = cases[i];
          Status s = works[i]->Wait(std::chrono::milliseconds(60000));
          ASSERT_TRUE(s.ok()) << "rank " << rank << " " << c.name << ": " << s.ToString();
          const auto& result = c.in_place ? ins[i] : outs[i];
          ExpectMatches(Decode(result, c.dtype), Reference(size, c.count, c.dtype, c.op, 1 + i),
                        c.dtype, "rank " + std::to_string(rank) + " size " + std::to_string(size) +
                                     " " + c.name);
        }
        if (rank == 0 && stats != nullptr) *stats = rt.NegotiationStats(0);
      },
      [&](RuntimeOptions& o) {
        o.fusion_threshold = fusion_threshold;
        if (adjust) adjust(o);
      });
}

// Ranks grouped in "hosts" of `per_host` by HVD_HOST_ID.
std::function<void(RuntimeOptions&)> HostsOf(int per_host) {
  return [per_host](RuntimeOptions& o) { o.host_id = "host" + std::to_string(o.rank / per_host); };
}

const char* ExpectedFlatPath() {
  const char* forced = std::getenv("HVD_TEST_CPU_OPERATIONS");
  return forced != nullptr && std::string(forced) == "gloo" ? "gloo" : "shm";
}

class AllreduceSweep : public ::testing::TestWithParam<int> {};

TEST_P(AllreduceSweep, EveryDtypeOpAndCount) {
  RunCases(GetParam(), AllCases({0, 1, 17, 1031}), 128 << 20);
}

// A 64-byte fusion buffer holds at most 64 one-byte elements: the 33-element
// tensors of every type run alone or in pairs, and the one-element tensors fuse
// a few at a time, never all together.
TEST_P(AllreduceSweep, TinyFusionThresholdSplitsIntoManyBuffers) {
  const auto cases = AllCases({1, 33});
  Controller::Stats stats;
  RunCases(GetParam(), cases, 64, nullptr, &stats);
  const int64_t n = static_cast<int64_t>(cases.size());
  // Fusion joins tensors of one dtype and op (4 each here): one response each with
  // a large threshold, two or three with this one.
  EXPECT_GE(stats.responses, n / 2) << "tensors were fused past the 64-byte threshold";
  EXPECT_GT(stats.max_fused, 1) << "nothing was fused";
  EXPECT_LE(stats.max_fused, 3) << "a buffer held more than 64 bytes";
  Controller::Stats unsplit;
  RunCases(GetParam(), cases, 128 << 20, nullptr, &unsplit);
  EXPECT_LT(unsplit.responses, stats.responses) << "a large threshold should fuse more";
}

// Fused tensors with a prescale factor: scaled into their outputs first, which the
// backend then reduces in place (Executor::AllreducePieces); postscaled per stretch.
TEST_P(AllreduceSweep, PrescaledFusedTensorsAreExact) {
  const int size = GetParam();
  const DataType types[] = {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                            DataType::kInt64};
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::vector<std::vector<uint8_t>> ins, outs;
    std::vector<std::shared_ptr<Work>> works;
    std::vector<std::string> names;
    std::vector<std::vector<double>> expect;
    int i = 0;
    for (DataType t : types)
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax})
        for (int64_t count : {int64_t{17}, int64_t{1031}})
          for (bool in_place : {false, true}) {
            ins.push_back(Encode(InputFor(rank, count, t, op, 500 + i), t));
            outs.emplace_back(ins.back().size(), 0xAB);
            expect.push_back(Reference(size, count, t, op, 500 + i));
            for (double& v : expect.back()) v *= 6.0;
            TensorEntry a;
            a.name = "scaled." + std::to_string(i++);
            a.input = ins.back().data();
            a.output = in_place ? ins.back().data() : outs.back().data();
            a.shape = {count};
            a.dtype = t;
            a.reduce_op = op;
            a.prescale_factor = 2.0;
            a.postscale_factor = 3.0;
            works.emplace_back();
            names.push_back(a.name + (in_place ? " in place" : ""));
            ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works.back()).ok());
          }
    i = 0;
    for (DataType t : types)
      for (int k = 0; k < 8; ++k, ++i) {
        ASSERT_TRUE(works[i]->Wait(std::chrono::milliseconds(60000)).ok()) << names[i];
        const auto& got = (i % 2) ? ins[i] : outs[i];
        ExpectMatches(Decode(got, t), expect[i], t, "rank " + std::to_string(rank) + " " + names[i]);
      }
  });
}

TEST_P(AllreduceSweep, FusionThresholdZeroRunsEveryTensorAlone) {
  const auto cases = AllCases({1, 33});
  Controller::Stats stats;
  RunCases(GetParam(), cases, 0, nullptr, &stats);
  EXPECT_EQ(stats.max_fused, 1);
  EXPECT_EQ(stats.responses, static_cast<int64_t>(cases.size()));
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllreduceSweep, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

// Shared memory inside each host and Gloo across: 2 hosts of 2, 3 of 2, 2 of 3.
class HierarchicalSweep : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(HierarchicalSweep, EveryDtypeOpAndCount) {
  const auto [size, per_host] = GetParam();
  RunCases(size, AllCases({0, 1, 17, 1031}), 128 << 20, HostsOf(per_host));
  RunCases(size, {{"big.f32", DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 3, false}}, 1 << 20,
           HostsOf(per_host));
}

// Each size class runs both paths on its first calls, agrees on one and keeps it
// (runtime/transport/hierarchy_choice.h): every call's result is exact throughout,
// in auto mode and with either path forced (HVD_HIERARCHICAL_ALLREDUCE).
TEST_P(HierarchicalSweep, RepeatedCallsStayExactWhileThePathIsChosen) {
  const auto [size, per_host] = GetParam();
  for (const char* mode : {"auto", "1", "0"}) {
    RunRanks(
        size,
        [&, size = size](int rank, Runtime& rt) {
          for (int64_t count : {int64_t{5}, int64_t{70000}}) {
            for (int i = 0; i < 14; ++i) {
              std::vector<float> buf(static_cast<size_t>(count));
              for (int64_t j = 0; j < count; ++j) buf[j] = static_cast<float>((rank + i + j) % 7);
              const std::string name =
                  "repeat." + std::to_string(count) + "." + std::to_string(i);
              Status s = AllreduceSync(rt, name, buf.data(), buf.data(), count,
                                       DataType::kFloat32, ReduceOp::kSum);
              ASSERT_TRUE(s.ok()) << mode << " " << name << ": " << s.ToString();
              for (int64_t j = 0; j < count; ++j) {
                float want = 0;
                for (int r = 0; r < size; ++r) want += static_cast<float>((r + i + j) % 7);
                ASSERT_EQ(buf[j], want) << mode << " " << name << " rank " << rank << " at " << j;
              }
            }
          }
        },
        [&, per_host = per_host](RuntimeOptions& o) {
          HostsOf(per_host)(o);
          o.hierarchical_allreduce = mode;
        });
  }
}

INSTANTIATE_TEST_SUITE_P(Hosts, HierarchicalSweep,
                         ::testing::Values(std::make_pair(4, 2), std::make_pair(6, 2),
                                           std::make_pair(6, 3)),
                         [](const auto& info) {
                           return "np" + std::to_string(info.param.first) + "x" +
                                  std::to_string(info.param.second);
                         });

// NaN under MIN and MAX: the same answer on every backend and whichever rank holds
// it (fmin/fmax: a NaN loses to a number; all-NaN stays NaN), joined ranks included.
TEST(NaN, MinAndMaxPassOverNaNOnEveryRankAndBackend) {
  for (int size : {2, 3, 5}) {
    // Position i: rank (i % (size + 2)) holds NaN; i % (size + 2) == size: nobody
    // does; == size + 1: every rank does.
    const int64_t n = 4 * (size + 2);
    auto value = [&](int rank, int64_t i) {
      const int64_t who = i % (size + 2);
      if (who == size + 1 || who == rank) return std::nan("");
      return static_cast<double>((rank * 7 + i * 3) % 11) - 5.0;
    };
    RunRanks(size, [&](int rank, Runtime& rt) {
      for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                         DataType::kBFloat16}) {
        for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
          std::vector<double> mine(n);
          for (int64_t i = 0; i < n; ++i) mine[i] = value(rank, i);
          auto buf = Encode(mine, t);
          const std::string name = std::string("nan.") + DataTypeName(t) + "." + ReduceOpName(op);
          Status s = AllreduceSync(rt, name, buf.data(), buf.data(), n, t, op);
          ASSERT_TRUE(s.ok()) << s.ToString();
          const auto got = Decode(buf, t);
          for (int64_t i = 0; i < n; ++i) {
            double want = std::nan("");
            for (int r = 0; r < size; ++r)
              want = op == ReduceOp::kMin ? std::fmin(want, value(r, i)) : std::fmax(want, value(r, i));
            if (std::isnan(want)) {
              EXPECT_TRUE(std::isnan(got[i])) << name << " rank " << rank << " at " << i;
            } else {
              EXPECT_EQ(got[i], want) << name << " rank " << rank << " at " << i;
            }
          }
        }
      }
    });
  }
}

TEST(HostPlane, ChosenFromWhereRanksAre) {
  const bool gloo = std::string(ExpectedFlatPath()) == "gloo";
  RunRanks(4, [&](int, Runtime& rt) { EXPECT_STREQ(rt.HostBackendName(0), ExpectedFlatPath()); });
  // Two hosts of two; set 1 is one host's ranks, set 2 one rank per host.
  RunRanks(
      4,
      [&](int rank, Runtime& rt) {
        EXPECT_STREQ(rt.HostBackendName(0), gloo ? "gloo" : "hierarchical");
        int same_host = 0, across = 0;
        ASSERT_TRUE(rt.AddProcessSet({0, 1}, &same_host).ok());
        ASSERT_TRUE(rt.AddProcessSet({0, 2}, &across).ok());
        if (rank == 0 || rank == 1) {
          EXPECT_STREQ(rt.HostBackendName(same_host), gloo ? "gloo" : "shm");
        }
        if (rank == 0 || rank == 2) {
          EXPECT_STREQ(rt.HostBackendName(across), "gloo");
        }
        EXPECT_EQ(rt.HostBackendName(77), nullptr);
      },
      HostsOf(2));
  // Uneven hosts: Gloo.
  RunRanks(3, [&](int, Runtime& rt) { EXPECT_STREQ(rt.HostBackendName(0), "gloo"); },
           HostsOf(2));
}

// Non-integer data, so reduction order shows in the bits: every rank must still
// hold the same bytes, on every path.
TEST(HostPlane, ResultsAreBitwiseIdenticalOnEveryRank) {
  for (int per_host : {4, 2}) {
    const int size = 4;
    const int64_t n = 100003;
    std::vector<std::vector<float>> got(size);
    RunRanks(
        size,
        [&](int rank, Runtime& rt) {
          std::mt19937 gen(rank + 11);
          std::uniform_real_distribution<float> dist(-1, 1);
          std::vector<float> in(n);
          for (auto& x : in) x = dist(gen);
          got[rank].resize(n);
          Status s = AllreduceSync(rt, "bits", in.data(), got[rank].data(), n, DataType::kFloat32,
                                   ReduceOp::kAverage);
          ASSERT_TRUE(s.ok()) << s.ToString();
        },
        HostsOf(per_host));
    for (int r = 1; r < size; ++r)
      EXPECT_EQ(std::memcmp(got[0].data(), got[r].data(), n * sizeof(float)), 0)
          << "rank " << r << " differs from rank 0 with " << per_host << " ranks per host";
  }
}

TEST(Allreduce, LargeBuffersAcrossRanks) {
  for (int size : {2, 4, 8}) {
    std::vector<Case> cases = {{"big.f32", DataType::kFloat32, ReduceOp::kSum, (1 << 20) + 3, false},
                               {"big.f16", DataType::kFloat16, ReduceOp::kAverage, (1 << 18) + 1, true},
                               {"big.i64", DataType::kInt64, ReduceOp::kMax, 300001, false}};
    RunCases(size, cases, 1 << 20);
  }
}

TEST(Allreduce, ScaleFactors) {
  const int size = 3;
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kInt32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        const int64_t n = 129;
        const uint32_t seed = 77;
        auto in = Encode(InputFor(rank, n, t, op, seed), t);
        std::vector<uint8_t> out(in.size());
        const std::string name = std::string("scaled.") + DataTypeName(t) + "." + ReduceOpName(op);
        Status s = AllreduceSync(rt, name, in.data(), out.data(), n, t, op, 0.5, 4.0);
        ASSERT_TRUE(s.ok()) << name << ": " << s.ToString();
        std::vector<double> want = Reference(size, n, t, op, seed, 0.5, 4.0);
        if (IsInteger(t)) {
          // Integers truncate after prescaling: recompute the reference that way.
          std::vector<double> acc(n, 0);
          for (int r = 0; r < size; ++r) {
            auto x = InputFor(r, n, t, op, seed);
            for (int64_t i = 0; i < n; ++i) acc[i] += std::trunc(x[i] * 0.5);
          }
          for (int64_t i = 0; i < n; ++i) {
            double v = op == ReduceOp::kAverage ? std::trunc(acc[i] / size) : acc[i];
            want[i] = std::trunc(v * 4.0);
          }
        }
        ExpectMatches(Decode(out, t), want, t, name);
      }
    }
  });
}

TEST(Allreduce, ResultsAreBitwiseIdenticalOnEveryRank) {
  const int size = 4;
  const int64_t n = 100003;
  std::vector<std::vector<float>> results(size);
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::vector<float> in(n);
    std::mt19937 gen(rank);
    std::uniform_real_distribution<float> d(-1, 1);
    for (auto& x : in) x = d(gen);
    results[rank].resize(n);
    Status s = AllreduceSync(rt, "noisy", in.data(), results[rank].data(), n, DataType::kFloat32,
                             ReduceOp::kSum);
    ASSERT_TRUE(s.ok()) << s.ToString();
  });
  for (int r = 1; r < size; ++r)
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[r].data(), n * sizeof(float))) << "rank " << r;
}

TEST(Allreduce, ManyStepsReuseNames) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    for (int step = 0; step < 50; ++step) {
      std::vector<int32_t> v(10, rank + step);
      Status s = AllreduceSync(rt, "grad", v.data(), v.data(), 10, DataType::kInt32, ReduceOp::kSum);
      ASSERT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(v[0], 0 + 1 + 2 + 3 * step);
    }
  });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
