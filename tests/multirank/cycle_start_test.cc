// When a negotiation cycle starts: on the cycle-time cadence, or early for new
// work (runtime/runtime.cc, Runtime::Loop). The cycle times here are far longer
// than the waits, so a collective completes within a wait only if its cycle
// started early; the margins are seconds against the milliseconds it takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;

// Enqueues `n` float sums of 8 elements; returns their Works.
std::vector<std::shared_ptr<Work>> EnqueueSums(Runtime& rt, int rank, int n,
                                               std::vector<std::vector<float>>* in,
                                               std::vector<std::vector<float>>* out) {
  in->assign(n, std::vector<float>(8));
  out->assign(n, std::vector<float>(8, -1));
  std::vector<std::shared_ptr<Work>> works(n);
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < 8; ++i) (*in)[t][i] = static_cast<float>((rank + 1) * (t + i));
    AllreduceArgs a;
    a.name = "grad." + std::to_string(t);
    a.input = (*in)[t].data();
    a.output = (*out)[t].data();
    a.count = 8;
    EXPECT_TRUE(rt.Allreduce(a, &works[t]).ok());
  }
  return works;
}

void ExpectSums(int size, const std::vector<std::vector<float>>& out) {
  const float ranks = static_cast<float>(size * (size + 1) / 2);
  for (size_t t = 0; t < out.size(); ++t)
    for (int i = 0; i < 8; ++i)
      ASSERT_EQ(out[t][i], ranks * static_cast<float>(t + i)) << "tensor " << t << " element " << i;
}

TEST(CycleStart, FlushStartsTheCycleForNewWorkAtOnce) {
  // 10 minutes between cycles, and a 60 s pause before new work starts one on its
  // own: only Flush can get these done within the 5 s waits.
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> in, out;
    auto works = EnqueueSums(rt, rank, 20, &in, &out);
    rt.Flush();
    for (auto& w : works) ASSERT_TRUE(w->Wait(milliseconds(5000)).ok()) << "rank " << rank;
    ExpectSums(2, out);
    // Every tensor went in the first cycle with work, plus at most one early
    // cycle per rank for a peer that had just begun an empty one.
    EXPECT_LE(rt.NegotiationStats(0).cycles, 2) << "rank " << rank;
  }, [](RuntimeOptions& o) { o.cycle_time = std::chrono::minutes(10); });
}

TEST(CycleStart, NewWorkStartsTheCycleOnceEnqueuesPause) {
  // 30 s between cycles; new work starts one after a tenth of that without
  // enqueues (3 s), well within the 20 s waits.
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<std::vector<float>> in, out;
    auto works = EnqueueSums(rt, rank, 5, &in, &out);
    for (auto& w : works) ASSERT_TRUE(w->Wait(milliseconds(20000)).ok()) << "rank " << rank;
    ExpectSums(2, out);
  }, [](RuntimeOptions& o) { o.cycle_time = std::chrono::seconds(30); });
}

TEST(CycleStart, WithoutNewWorkTheCadenceHolds) {
  // Nothing is enqueued and nothing flushes: no cycle runs before the first
  // cycle time is up (10 minutes here), however often Flush is called.
  RunRanks(2, [&](int rank, Runtime& rt) {
    for (int i = 0; i < 100; ++i) rt.Flush();
    std::this_thread::sleep_for(milliseconds(200));
    EXPECT_EQ(rt.NegotiationStats(0).cycles, 0) << "rank " << rank;
  }, [](RuntimeOptions& o) { o.cycle_time = std::chrono::minutes(10); });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
