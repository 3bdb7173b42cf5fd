// The response cache in real runs: steady-state tensors travel as bits, a change
// of parameters is caught (never a silent stale hit), eviction and the fall back
// to full requests keep results right.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;

// One training-like step: `n` tensors of `count` int32 elements, all async.
void Step(Runtime& rt, int rank, int size, int n, int64_t count, int step) {
  std::vector<std::vector<int32_t>> bufs(n);
  std::vector<std::shared_ptr<Work>> works(n);
  for (int i = 0; i < n; ++i) {
    bufs[i].assign(count, rank + i + step);
    TensorEntry a;
    a.name = "t" + std::to_string(i);
    a.input = a.output = bufs[i].data();
    a.shape = {count};
    a.dtype = DataType::kInt32;
    ASSERT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works[i]).ok());
  }
  for (int i = 0; i < n; ++i) {
    Status s = works[i]->Wait(std::chrono::milliseconds(30000));
    ASSERT_TRUE(s.ok()) << s.ToString();
    const int32_t want = size * (i + step) + size * (size - 1) / 2;
    ASSERT_EQ(bufs[i][count - 1], want) << "tensor " << i << " step " << step;
  }
}

TEST(ResponseCache, SteadyStateTravelsAsBits) {
  const int size = 3, n = 10, steps = 20;
  RunRanks(size, [&](int rank, Runtime& rt) {
    for (int step = 0; step < steps; ++step) Step(rt, rank, size, n, 7, step);
    Controller::Stats st = rt.NegotiationStats(0);
    // The first step negotiates in full; every later one hits the cache.
    EXPECT_EQ(st.full_requests, n) << "rank " << rank;
    EXPECT_EQ(st.cache_bits, n * (steps - 1));
    EXPECT_EQ(st.cache_hits, n * (steps - 1));
  });
}

TEST(ResponseCache, DisabledWithCapacityZero) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    for (int step = 0; step < 5; ++step) Step(rt, rank, 2, 4, 3, step);
    EXPECT_EQ(rt.NegotiationStats(0).cache_bits, 0);
    EXPECT_EQ(rt.NegotiationStats(0).full_requests, 20);
  }, [](RuntimeOptions& o) { o.cache_capacity = 0; });
}

TEST(ResponseCache, ChangedParametersEverywhereRenegotiate) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    Step(rt, rank, 2, 3, 5, 0);
    Step(rt, rank, 2, 3, 5, 1);
    Step(rt, rank, 2, 3, 9, 2);  // every rank changes the count
    Step(rt, rank, 2, 3, 9, 3);  // and the new shape is cached again
    Controller::Stats st = rt.NegotiationStats(0);
    EXPECT_EQ(st.full_requests, 6);
    EXPECT_EQ(st.cache_hits, 6);
  });
}

TEST(ResponseCache, ChangeOnOneRankIsAMismatchNotAStaleHit) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    Step(rt, rank, 3, 1, 4, 0);  // "t0" with 4 elements is now cached everywhere
    std::vector<int32_t> buf(8, 1);
    const int64_t count = rank == 1 ? 8 : 4;
    Status s = AllreduceSync(rt, "t0", buf.data(), buf.data(), count, DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kMismatch) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("element count differs across ranks: ranks 0, 2 have 4; rank 1 has 8"));
    Step(rt, rank, 3, 2, 4, 1);  // still serving, cache and all
  });
}

TEST(ResponseCache, TinyCapacityEvictsAndStaysCorrect) {
  RunRanks(3, [&](int rank, Runtime& rt) {
    for (int step = 0; step < 8; ++step) Step(rt, rank, 3, 9, 2, step);
    EXPECT_GT(rt.NegotiationStats(0).full_requests, 9);
  }, [](RuntimeOptions& o) { o.cache_capacity = 4; });
}

TEST(ResponseCache, AStragglingRankFallsBackToTheFullPathAndCompletes) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    Step(rt, rank, 2, 2, 3, 0);
    // Rank 1 arrives 1.5 s late: the cached entry goes the full path meanwhile.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    Step(rt, rank, 2, 2, 3, 1);
    Step(rt, rank, 2, 2, 3, 2);
  });
}

TEST(ResponseCache, ShutdownOfAPeerFailsACachedTensorThatWaitsOnIt) {
  RunRanks(2, [&](int rank, Runtime& rt) {
    Step(rt, rank, 2, 1, 3, 0);
    if (rank == 1) return;  // rank 1 shuts down; "t0" is cached
    std::vector<int32_t> buf(3, 1);
    Status s = AllreduceSync(rt, "t0", buf.data(), buf.data(), 3, DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(s.code(), StatusCode::kShutDown) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("rank 1 has shut down"));
  });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
