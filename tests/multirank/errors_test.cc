// Bad input across ranks: every rank gets a clear error naming the tensor, the
// ranks and the values, and the runtime keeps serving later tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <thread>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;

// After an error the runtime must still reduce correctly.
void ExpectStillWorks(int rank, Runtime& rt, int size, const std::string& name) {
  std::vector<int64_t> v(5, rank + 1);
  Status s = AllreduceSync(rt, name, v.data(), v.data(), 5, DataType::kInt64, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v[4], size * (size + 1) / 2);
}

TEST(Errors, CountMismatchFailsOnEveryRankAndNamesRanksAndCounts) {
  const int size = 4;
  RunRanks(size, [&](int rank, Runtime& rt) {
    // Ranks 1 and 3 submit 99 elements, the others 100.
    const int64_t n = (rank % 2 == 1) ? 99 : 100;
    std::vector<float> in(n, 1.0f), out(n, -7.0f);
    Status s = AllreduceSync(rt, "grad.w", in.data(), out.data(), n, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("tensor 'grad.w'"));
    EXPECT_THAT(s.message(), HasSubstr("element count"));
    EXPECT_THAT(s.message(), HasSubstr("ranks 0, 2 have 100"));
    EXPECT_THAT(s.message(), HasSubstr("ranks 1, 3 have 99"));
    // The output buffer is untouched: no partial result.
    EXPECT_EQ(out[0], -7.0f);
    ExpectStillWorks(rank, rt, size, "after.count");
  });
}

TEST(Errors, DtypeMismatch) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<int64_t> buf(4, 1);
    const DataType t = rank == 0 ? DataType::kFloat32 : DataType::kInt32;
    Status s = AllreduceSync(rt, "mixed", buf.data(), buf.data(), 4, t, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("dtype differs across ranks: rank 0 has float32; rank 1 has int32"));
    ExpectStillWorks(rank, rt, 2, "after.dtype");
  });
}

TEST(Errors, OpAndScaleMismatch) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    std::vector<double> buf(3, 1);
    Status s = AllreduceSync(rt, "op", buf.data(), buf.data(), 3, DataType::kFloat64,
                             rank == 2 ? ReduceOp::kMax : ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("reduce op differs across ranks: ranks 0, 1 have sum; rank 2 has max"));
    s = AllreduceSync(rt, "scale", buf.data(), buf.data(), 3, DataType::kFloat64, ReduceOp::kSum,
                      rank == 0 ? 2.0 : 1.0);
    EXPECT_EQ(s.code(), StatusCode::kMismatch);
    EXPECT_THAT(s.message(), HasSubstr("prescale factor"));
    ExpectStillWorks(rank, rt, 3, "after.op");
  });
}

TEST(Errors, SameNameTwiceInFlightIsRefusedLocally) {
  // Rank 1 enqueues only after rank 0's second try, so "dup" cannot have
  // completed on rank 0 in between (it did under ASan, whose cycle came first).
  std::atomic<bool> tried{false};
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> a(8, 1), b(8, 1);
    TensorEntry args;
    args.name = "dup";
    args.input = a.data();
    args.output = a.data();
    args.shape = {8};
    std::shared_ptr<Work> first, second;
    if (rank == 0) {
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(args), 0, &first).ok());
      args.input = b.data();
      args.output = b.data();
      Status s = rt.EnqueueOne(TensorEntry(args), 0, &second);
      EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
      EXPECT_THAT(s.message(), HasSubstr("'dup' is already in flight"));
      tried = true;
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!tried && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_TRUE(tried);
      ASSERT_TRUE(rt.EnqueueOne(TensorEntry(args), 0, &first).ok());
    }
    Status s = first->Wait(std::chrono::milliseconds(20000));
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(a[0], 2.0f);
  });
}

TEST(Errors, BadArgumentsGetTheirOwnStatus) {
  RunRanks(1, [&](int, Runtime& rt) {
    std::vector<float> a(4);
    std::shared_ptr<Work> w;
    TensorEntry args;
    args.name = "neg";
    args.input = a.data();
    args.output = a.data();
    args.shape = {-3};
    Status s = rt.EnqueueOne(TensorEntry(args), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("tensor 'neg': negative dimension -3"));
    args.shape = {4};
    args.input = nullptr;
    s = rt.EnqueueOne(TensorEntry(args), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("input buffer is null"));
    args.input = a.data();
    args.name = std::string(kMaxTensorNameLength + 1, 'x');
    s = rt.EnqueueOne(TensorEntry(args), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("longer than the limit of 1024"));
    // Counts whose bytes overflow are refused, not run.
    args.name = "huge";
    args.shape = {int64_t{1} << 61};
    s = rt.EnqueueOne(TensorEntry(args), 0, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("more than 2^48 elements"));
    args.shape = {std::numeric_limits<int64_t>::max()};
    EXPECT_EQ(rt.EnqueueOne(TensorEntry(args), 0, &w).code(), StatusCode::kInvalidArgument);
    args.shape = {4};
    args.name = "unknown-set";
    s = rt.EnqueueOne(TensorEntry(args), 17, &w);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("unknown process set 17"));
  });
}

TEST(Errors, ShutdownFailsTensorsThatWaitOnTheShutDownRank) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    if (rank == 1) {
      // Rank 1 leaves without ever submitting "orphan".
      return;
    }
    std::vector<float> a(4, 1);
    Status s = AllreduceSync(rt, "orphan", a.data(), a.data(), 4, DataType::kFloat32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kShutDown) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("tensor 'orphan' can no longer complete: rank 1 has shut down"));
  });
}

TEST(Errors, EnqueueAfterShutdownIsRefused) {
  auto store = NewInMemoryStore();
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::Create(TestOptions(0, 1), store, &rt).ok());
  ASSERT_TRUE(rt->Shutdown().ok());
  std::vector<float> a(2);
  Status s = AllreduceSync(*rt, "late", a.data(), a.data(), 2, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kShutDown);
}

// A grouped allreduce of 3 tensors on rank 0 and 2 elsewhere: every rank's every
// tensor of the group fails with kMismatch naming the ranks and the sizes (rank 0's
// third tensor too, which no other rank submits), instead of succeeding on some
// ranks and stalling on others; the runtime then serves the next collective. Once
// the same group has run (and been cached), the change is caught the same way.
TEST(Errors, GroupSizeMismatchFailsTheWholeGroupEverywhere) {
  const int size = 3;
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (int round = 0; round < 3; ++round) {
      // Rounds 0 and 1 agree (the second from the cache); round 2 does not.
      const int n = (round == 2 && rank == 0) ? 3 : 2;
      std::vector<std::vector<float>> bufs(n, std::vector<float>(4, 1.0f));
      std::vector<TensorEntry> group;
      for (int i = 0; i < n; ++i) {
        TensorEntry e;
        e.name = "group." + std::to_string(i);
        e.input = e.output = bufs[i].data();
        e.shape = {4};
        e.group_id = 100 + round + rank;  // each rank numbers its groups itself
        e.group_size = n;
        group.push_back(std::move(e));
      }
      std::vector<std::shared_ptr<Work>> works;
      ASSERT_TRUE(rt.Enqueue(std::move(group), 0, &works).ok());
      for (int i = 0; i < n; ++i) {
        Status s = works[i]->Wait(std::chrono::milliseconds(20000));
        if (round < 2) {
          ASSERT_TRUE(s.ok()) << s.ToString();
          EXPECT_EQ(bufs[i][0], size);
          continue;
        }
        EXPECT_EQ(s.code(), StatusCode::kMismatch) << "rank " << rank << " tensor " << i << ": "
                                                   << s.ToString();
        EXPECT_THAT(s.message(), HasSubstr("the number of tensors in its grouped call differs "
                                           "across ranks: rank 0 has 3; ranks 1, 2 have 2"));
        EXPECT_THAT(s.message(), HasSubstr("group." + std::to_string(i)));
      }
    }
    ExpectStillWorks(rank, rt, size, "after.group");
  });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
