// Allgather, broadcast, alltoall, reducescatter, barrier, join, grouped ops and
// process sets, across N threads over real Gloo, against local references.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;

const DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                              DataType::kBFloat16, DataType::kInt8,   DataType::kUInt8,
                              DataType::kInt32,   DataType::kInt64,  DataType::kInt16};
constexpr auto kWait = std::chrono::milliseconds(60000);

// Element j of rank r's tensor for test `seed`: a small exact integer.
double Value(int rank, int64_t j, int seed) { return static_cast<double>((rank * 7 + j * 3 + seed) % 23); }

std::vector<uint8_t> RankTensor(int rank, int64_t elements, DataType t, int seed) {
  std::vector<double> v(elements);
  for (int64_t j = 0; j < elements; ++j) v[j] = Value(rank, j, seed);
  return Encode(v, t);
}

TensorEntry Entry(const std::string& name, OpType type, DataType dtype, const void* in,
                  std::vector<int64_t> shape) {
  TensorEntry e;
  e.name = name;
  e.type = type;
  e.dtype = dtype;
  e.input = in;
  e.shape = std::move(shape);
  return e;
}

int64_t Prod(const std::vector<int64_t>& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<int64_t>());
}

class Collectives : public ::testing::TestWithParam<int> {};

TEST_P(Collectives, AllgatherUnevenFirstDimensionEveryDtype) {
  const int size = GetParam();
  RunRanks(size, [&](int rank, Runtime& rt) {
    int seed = 0;
    for (DataType t : kAllTypes) {
      // Rank r contributes r rows (rank 0: none) of 3 x 2.
      const std::vector<int64_t> shape = {rank, 3, 2};
      auto in = RankTensor(rank, Prod(shape), t, seed);
      std::shared_ptr<Work> w;
      Status s = rt.EnqueueOne(Entry(std::string("ag.") + DataTypeName(t), OpType::kAllgather, t,
                                     in.data(), shape), 0, &w);
      ASSERT_TRUE(s.ok()) << s.ToString();
      s = w->Wait(kWait);
      ASSERT_TRUE(s.ok()) << s.ToString();
      std::vector<double> want;
      for (int r = 0; r < size; ++r) {
        auto part = Decode(RankTensor(r, r * 6, t, seed), t);
        want.insert(want.end(), part.begin(), part.end());
      }
      EXPECT_EQ(w->result_shape(), (std::vector<int64_t>{size * (size - 1) / 2, 3, 2}));
      EXPECT_EQ(Decode(w->result(), t), want) << DataTypeName(t);
      ++seed;
    }
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int size = GetParam();
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (int root = 0; root < size; ++root) {
      for (DataType t : {DataType::kFloat32, DataType::kBFloat16, DataType::kInt64, DataType::kUInt8}) {
        const int64_t n = 37;
        auto buf = RankTensor(rank, n, t, root);
        TensorEntry e = Entry("bc." + std::to_string(root) + DataTypeName(t), OpType::kBroadcast, t,
                              buf.data(), {n});
        e.output = buf.data();
        e.root_rank = root;
        std::shared_ptr<Work> w;
        ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &w).ok());
        Status s = w->Wait(kWait);
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(buf, RankTensor(root, n, t, root)) << "root " << root;
      }
    }
  });
}

TEST_P(Collectives, AlltoallEqualAndUnevenSplits) {
  const int size = GetParam();
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (DataType t : {DataType::kFloat64, DataType::kFloat16, DataType::kInt32}) {
      // Equal shares: 2 rows of 3 to every rank.
      {
        const std::vector<int64_t> shape = {2 * size, 3};
        auto in = RankTensor(rank, Prod(shape), t, 1);
        std::shared_ptr<Work> w;
        ASSERT_TRUE(rt.EnqueueOne(Entry(std::string("a2a.eq.") + DataTypeName(t), OpType::kAlltoall,
                                        t, in.data(), shape), 0, &w).ok());
        Status s = w->Wait(kWait);
        ASSERT_TRUE(s.ok()) << s.ToString();
        std::vector<double> want;
        for (int src = 0; src < size; ++src) {
          auto all = Decode(RankTensor(src, Prod(shape), t, 1), t);
          want.insert(want.end(), all.begin() + rank * 6, all.begin() + rank * 6 + 6);
        }
        EXPECT_EQ(Decode(w->result(), t), want);
        EXPECT_EQ(w->received_splits(), std::vector<int64_t>(size, 2));
      }
      // Uneven: rank s sends (s + d) % 3 rows to rank d (some zero).
      {
        std::vector<int64_t> splits(size);
        for (int d = 0; d < size; ++d) splits[d] = (rank + d) % 3;
        const int64_t rows = std::accumulate(splits.begin(), splits.end(), int64_t{0});
        auto in = RankTensor(rank, rows * 2, t, 2);
        TensorEntry e = Entry(std::string("a2a.uneven.") + DataTypeName(t), OpType::kAlltoall, t,
                              in.data(), {rows, 2});
        e.splits = splits;
        std::shared_ptr<Work> w;
        ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &w).ok());
        Status s = w->Wait(kWait);
        ASSERT_TRUE(s.ok()) << s.ToString();
        std::vector<double> want;
        std::vector<int64_t> got_splits;
        for (int src = 0; src < size; ++src) {
          int64_t start = 0;
          for (int d = 0; d < rank; ++d) start += (src + d) % 3;
          const int64_t count = (src + rank) % 3;
          int64_t src_rows = 0;
          for (int d = 0; d < size; ++d) src_rows += (src + d) % 3;
          auto all = Decode(RankTensor(src, src_rows * 2, t, 2), t);
          want.insert(want.end(), all.begin() + start * 2, all.begin() + (start + count) * 2);
          got_splits.push_back(count);
        }
        EXPECT_EQ(Decode(w->result(), t), want);
        EXPECT_EQ(w->received_splits(), got_splits);
        EXPECT_EQ(w->result_shape()[0], std::accumulate(got_splits.begin(), got_splits.end(), int64_t{0}));
      }
    }
  });
}

// Reducescatter of 2 * size + 1 rows of 3, every dtype, SUM and AVERAGE.
void ReducescatterUnevenRows(int size, const std::function<void(RuntimeOptions&)>& adjust) {
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (DataType t : kAllTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        // dim0 = 2 * size + 1: the first rank(s) get an extra row (Horovod's rule).
        const int64_t dim0 = 2 * size + 1, cols = 3;
        auto in = RankTensor(rank, dim0 * cols, t, 5);
        TensorEntry e = Entry(std::string("rs.") + DataTypeName(t) + ReduceOpName(op),
                              OpType::kReducescatter, t, in.data(), {dim0, cols});
        e.reduce_op = op;
        std::shared_ptr<Work> w;
        ASSERT_TRUE(rt.EnqueueOne(std::move(e), 0, &w).ok());
        Status s = w->Wait(kWait);
        ASSERT_TRUE(s.ok()) << s.ToString();
        const int64_t my_rows = dim0 / size + (rank < dim0 % size ? 1 : 0);
        int64_t first = 0;
        for (int r = 0; r < rank; ++r) first += dim0 / size + (r < dim0 % size ? 1 : 0);
        std::vector<double> want(my_rows * cols, 0);
        for (int r = 0; r < size; ++r) {
          auto all = Decode(RankTensor(r, dim0 * cols, t, 5), t);
          for (int64_t j = 0; j < my_rows * cols; ++j) want[j] += all[first * cols + j];
        }
        const bool is_int = t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt32 ||
                            t == DataType::kInt64 || t == DataType::kInt16;
        for (auto& x : want) {
          x = Decode(Encode({x}, t), t)[0];  // wrap as the dtype would
          if (op == ReduceOp::kAverage) x = is_int ? std::trunc(x / size) : x / size;
        }
        EXPECT_EQ(w->result_shape(), (std::vector<int64_t>{my_rows, cols}));
        auto got = Decode(w->result(), t);
        ASSERT_EQ(got.size(), want.size());
        for (size_t j = 0; j < got.size(); ++j)
          EXPECT_NEAR(got[j], want[j], 0.02 * std::max(1.0, std::fabs(want[j])))
              << DataTypeName(t) << " " << ReduceOpName(op) << " element " << j;
      }
    }
  }, adjust);
}

TEST_P(Collectives, ReducescatterUnevenRowsSumAndAverage) {
  ReducescatterUnevenRows(GetParam(), nullptr);
}

// Across "hosts" (HVD_HOST_ID), the hierarchical backend hands reducescatter to the
// Gloo ring over every rank.
TEST(CollectivesAcrossHosts, ReducescatterUnevenRowsSumAndAverage) {
  for (int per_host : {2, 3})
    ReducescatterUnevenRows(2 * per_host, [per_host](RuntimeOptions& o) {
      o.host_id = "host" + std::to_string(o.rank / per_host);
    });
}

TEST_P(Collectives, GroupedAllgatherAndReducescatterFuse) {
  const int size = GetParam();
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::vector<std::vector<uint8_t>> ins;
    std::vector<TensorEntry> group;
    for (int i = 0; i < 4; ++i) {
      ins.push_back(RankTensor(rank, (rank + 1) * (i + 1), DataType::kFloat32, i));
      group.push_back(Entry("gag." + std::to_string(i), OpType::kAllgather, DataType::kFloat32,
                            ins.back().data(), {rank + 1, i + 1}));
      group.back().group_id = 9;
    }
    std::vector<std::shared_ptr<Work>> works;
    ASSERT_TRUE(rt.Enqueue(std::move(group), 0, &works).ok());
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(works[i]->Wait(kWait).ok());
      std::vector<double> want;
      for (int r = 0; r < size; ++r) {
        auto p = Decode(RankTensor(r, (r + 1) * (i + 1), DataType::kFloat32, i), DataType::kFloat32);
        want.insert(want.end(), p.begin(), p.end());
      }
      EXPECT_EQ(Decode(works[i]->result(), DataType::kFloat32), want) << "tensor " << i;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, Collectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& info) { return "np" + std::to_string(info.param); });

TEST(Collectives, EmptyTensors) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    std::shared_ptr<Work> w;
    ASSERT_TRUE(rt.EnqueueOne(Entry("empty.ag", OpType::kAllgather, DataType::kInt32, nullptr, {0, 4}), 0, &w).ok());
    ASSERT_TRUE(w->Wait(kWait).ok());
    EXPECT_EQ(w->result_shape(), (std::vector<int64_t>{0, 4}));
    EXPECT_TRUE(w->result().empty());
    ASSERT_TRUE(rt.EnqueueOne(Entry("empty.a2a", OpType::kAlltoall, DataType::kInt32, nullptr, {0}), 0, &w).ok());
    ASSERT_TRUE(w->Wait(kWait).ok());
    EXPECT_EQ(w->received_splits(), std::vector<int64_t>(3, 0));
    ASSERT_TRUE(rt.EnqueueOne(Entry("empty.rs", OpType::kReducescatter, DataType::kInt32, nullptr, {0, 2}), 0, &w).ok());
    ASSERT_TRUE(w->Wait(kWait).ok());
    EXPECT_EQ(w->result_shape(), (std::vector<int64_t>{0, 2}));
  });
}

TEST(Collectives, BarrierHoldsEveryRankUntilAllArrive) {
  const int size = 4;
  std::atomic<int> arrived{0};
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (int round = 0; round < 3; ++round) {
      if (rank == round % size) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      arrived++;
      std::shared_ptr<Work> w;
      ASSERT_TRUE(rt.Barrier(0, &w).ok());
      ASSERT_TRUE(w->Wait(kWait).ok());
      // Nobody leaves round k before all ranks arrived at it.
      EXPECT_GE(arrived.load(), size * (round + 1));
    }
  });
}

TEST(Collectives, JoinWithUnevenSteps) {
  const int size = 4;
  std::vector<int> last(size, -2);
  RunRanks(size, [&](int rank, Runtime& rt) {
    // Rank r runs 3 + 2r steps; a joined rank contributes zeros, and AVERAGE
    // still divides by the set's size (as Horovod and torch's Join do).
    const int steps = 3 + 2 * rank;
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(5, static_cast<float>(rank + 1));
      std::vector<float> sum(5), avg(5);
      ASSERT_TRUE(AllreduceSync(rt, "g.sum", g.data(), sum.data(), 5, DataType::kFloat32, ReduceOp::kSum).ok());
      ASSERT_TRUE(AllreduceSync(rt, "g.avg", g.data(), avg.data(), 5, DataType::kFloat32, ReduceOp::kAverage).ok());
      float want = 0;
      for (int r = 0; r < size; ++r)
        if (step < 3 + 2 * r) want += r + 1;
      EXPECT_EQ(sum[0], want) << "rank " << rank << " step " << step;
      EXPECT_FLOAT_EQ(avg[4], want / size) << "rank " << rank << " step " << step;
    }
    std::shared_ptr<Work> w;
    ASSERT_TRUE(rt.Join(0, &w).ok());
    Status s = w->Wait(kWait);
    ASSERT_TRUE(s.ok()) << s.ToString();
    last[rank] = static_cast<int>(w->scalar_result());
    // After join, the runtime works as before.
    std::vector<int32_t> v(2, 1);
    ASSERT_TRUE(AllreduceSync(rt, "after.join", v.data(), v.data(), 2, DataType::kInt32, ReduceOp::kSum).ok());
    EXPECT_EQ(v[0], size);
  });
  for (int r = 0; r < size; ++r) EXPECT_EQ(last[r], size - 1) << "rank " << r;
}

TEST(Collectives, NonAllreduceWaitingOnAJoinedRankFails) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::shared_ptr<Work> w;
    if (rank == 0) {
      ASSERT_TRUE(rt.Join(0, &w).ok());
      ASSERT_TRUE(w->Wait(kWait).ok());
      return;
    }
    std::vector<float> in(4, 1);
    ASSERT_TRUE(rt.EnqueueOne(Entry("ag.joined", OpType::kAllgather, DataType::kFloat32, in.data(), {4}), 0, &w).ok());
    Status s = w->Wait(kWait);
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
    EXPECT_THAT(s.message(), HasSubstr("tensor 'ag.joined' (allgather) cannot complete while rank(s) 0 have joined"));
    ASSERT_TRUE(rt.Join(0, &w).ok());
    ASSERT_TRUE(w->Wait(kWait).ok());
  });
}

TEST(Collectives, MismatchesFailOnEveryRankAndTheRuntimeGoesOn) {
  const int size = 3;
  RunRanks(size, [&](int rank, Runtime& rt) {
    std::vector<float> buf(64, 1);
    std::shared_ptr<Work> w;
    auto run = [&](TensorEntry e) {
      Status s = rt.EnqueueOne(std::move(e), 0, &w);
      if (!s.ok()) return s;
      return w->Wait(kWait);
    };
    // Allgather: trailing shape differs on rank 2.
    Status s = run(Entry("ag.shape", OpType::kAllgather, DataType::kFloat32, buf.data(),
                         {2, rank == 2 ? 5 : 4}));
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("shape after the first dimension differs across ranks: ranks 0, 1 have [4]; rank 2 has [5]"));
    // Allgather: dtype.
    s = run(Entry("ag.dtype", OpType::kAllgather, rank == 0 ? DataType::kInt32 : DataType::kFloat32,
                  buf.data(), {2}));
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("dtype differs"));
    // Broadcast: root differs.
    TensorEntry b = Entry("bc.root", OpType::kBroadcast, DataType::kFloat32, buf.data(), {8});
    b.output = buf.data();
    b.root_rank = rank == 1 ? 1 : 0;
    s = run(b);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("root rank differs across ranks: ranks 0, 2 have 0; rank 1 has 1"));
    // Alltoall: not divisible without splits.
    s = run(Entry("a2a.div", OpType::kAlltoall, DataType::kFloat32, buf.data(), {4}));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("first dimension 4 is not divisible by 3 ranks"));
    // Alltoall: some ranks pass splits, others do not.
    TensorEntry a = Entry("a2a.splits", OpType::kAlltoall, DataType::kFloat32, buf.data(), {3});
    if (rank == 0) a.splits = {1, 1, 1};
    s = run(a);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("use of split sizes differs"));
    // Reducescatter: op differs.
    TensorEntry r = Entry("rs.op", OpType::kReducescatter, DataType::kFloat32, buf.data(), {6});
    r.reduce_op = rank == 0 ? ReduceOp::kAverage : ReduceOp::kSum;
    s = run(r);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("reduce op differs"));
    // Collective kind differs for one name.
    s = run(Entry("kind", rank == 0 ? OpType::kAllgather : OpType::kReducescatter, DataType::kFloat32,
                  buf.data(), {3}));
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("collective differs across ranks: rank 0 has allgather; ranks 1, 2 have reducescatter"));
    // Local validation.
    TensorEntry bad = Entry("a2a.local", OpType::kAlltoall, DataType::kFloat32, buf.data(), {3});
    bad.splits = {1, 1};
    s = run(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("2 split sizes given for 3 ranks"));
    // Still works.
    std::vector<int64_t> v(3, 1);
    ASSERT_TRUE(AllreduceSync(rt, "still", v.data(), v.data(), 3, DataType::kInt64, ReduceOp::kSum).ok());
    EXPECT_EQ(v[0], size);
  });
}

TEST(ProcessSets, TwoSetsConcurrentWithGlobalAllreduce) {
  const int size = 4;
  RunRanks(size, [&](int rank, Runtime& rt) {
    int even = -1, odd = -1;
    ASSERT_TRUE(rt.AddProcessSet({0, 2}, &even).ok());
    Status add = rt.AddProcessSet({1, 3}, &odd);
    ASSERT_TRUE(add.ok()) << add.ToString();
    EXPECT_EQ(even, 1);
    EXPECT_EQ(odd, 2);
    const int mine = rank % 2 == 0 ? even : odd;
    int set_rank = -2;
    std::vector<int> ranks;
    ASSERT_TRUE(rt.ProcessSetInfo(mine, &set_rank, &ranks).ok());
    EXPECT_EQ(set_rank, rank / 2);
    for (int step = 0; step < 20; ++step) {
      std::vector<int32_t> local(6, rank + step), global(6, rank);
      TensorEntry a;
      a.name = "set.grad";
      a.input = a.output = local.data();
      a.shape = {6};
      a.dtype = DataType::kInt32;
      std::shared_ptr<Work> ws, wg;
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), mine, &ws).ok());
      a.name = "global.grad";
      a.input = a.output = global.data();
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &wg).ok());
      ASSERT_TRUE(ws->Wait(kWait).ok());
      ASSERT_TRUE(wg->Wait(kWait).ok());
      EXPECT_EQ(local[0], (rank % 2 == 0 ? 0 + 2 : 1 + 3) + 2 * step);
      EXPECT_EQ(global[5], 0 + 1 + 2 + 3);
      // Allgather and broadcast inside the set too.
      std::vector<int64_t> me(1, rank);
      TensorEntry g = Entry("set.ag", OpType::kAllgather, DataType::kInt64, me.data(), {1});
      ASSERT_TRUE(rt.EnqueueOne(std::move(g), mine, &ws).ok());
      ASSERT_TRUE(ws->Wait(kWait).ok());
      EXPECT_EQ(Decode(ws->result(), DataType::kInt64),
                (rank % 2 == 0 ? std::vector<double>{0, 2} : std::vector<double>{1, 3}));
    }
    // A rank outside a set is refused with a clear message.
    std::vector<float> x(1);
    TensorEntry a;
    a.name = "outsider";
    a.input = a.output = x.data();
    a.shape = {1};
    std::shared_ptr<Work> w;
    Status s = rt.EnqueueOne(TensorEntry(a), rank % 2 == 0 ? odd : even, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("is not a member of process set"));
    // Removal, then use of the removed set.
    ASSERT_TRUE(rt.RemoveProcessSet(even).ok());
    s = rt.EnqueueOne(TensorEntry(a), even, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("process set 1 has been removed"));
    EXPECT_THAT(rt.RemoveProcessSet(even).message(), HasSubstr("has been removed"));
    EXPECT_THAT(rt.EnqueueOne(TensorEntry(a), 99, &w).message(),
                HasSubstr("unknown process set 99"));
  });
}

TEST(ProcessSets, RanksOutsideASetAreNeverBlockedByIt) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    int a = -1, b = -1;
    ASSERT_TRUE(rt.AddProcessSet({0, 1}, &a).ok());
    ASSERT_TRUE(rt.AddProcessSet({2}, &b).ok());
    std::vector<float> x(3, 1);
    TensorEntry args;
    args.input = args.output = x.data();
    args.shape = {3};
    std::shared_ptr<Work> w;
    if (rank < 2) {
      // Rank 1 submits 600 ms after rank 0: set A's tensor waits that long.
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(600));
      args.name = "slow.set";
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(args), a, &w).ok());
      ASSERT_TRUE(w->Wait(kWait).ok());
      EXPECT_EQ(x[0], 2);
    } else {
      // Meanwhile rank 2 completes 20 collectives in set B.
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 20; ++i) {
        args.name = "fast." + std::to_string(i);
        ASSERT_TRUE(rt.EnqueueOne(TensorEntry(args), b, &w).ok());
        ASSERT_TRUE(w->Wait(kWait).ok());
      }
      EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
      EXPECT_EQ(x[0], 1);
    }
  });
}

TEST(ProcessSets, MismatchedMembershipFailsEverywhere) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    int id = -1;
    Status s = rt.AddProcessSet(rank == 0 ? std::vector<int>{0, 1} : std::vector<int>{0, 2}, &id);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("rank list differs across ranks"));
    // Invalid sets are refused locally.
    EXPECT_EQ(rt.AddProcessSet({0, 0}, &id).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(rt.AddProcessSet({5}, &id).code(), StatusCode::kInvalidArgument);
    // The next good one works.
    ASSERT_TRUE(rt.AddProcessSet({1, 2}, &id).ok());
  });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
