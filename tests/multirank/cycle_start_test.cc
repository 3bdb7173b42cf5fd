// When a negotiation cycle starts: on the cycle-time cadence, or early for new
// work (controller/loop/loop_pacer.h, used by Runtime::Loop). The cycle times here are far longer
// than the waits, so a collective completes within a wait only if its cycle
// started early; the margins are seconds against the milliseconds it takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
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
    TensorEntry a;
    a.name = "grad." + std::to_string(t);
    a.input = (*in)[t].data();
    a.output = (*out)[t].data();
    a.shape = {8};
    EXPECT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &works[t]).ok());
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

TEST(CycleStart, WorkEnqueuedDuringACycleWaitsForItsBurstToEnd) {
  // Rank 0 enqueues y1 while its cycle for x is under way, and y2 later. A rank
  // whose cycle completed all it sent must not start the next cycle at once for
  // y1 alone (it once did, as long as its queue held anything): y1 and y2 go in
  // one cycle, as a step's tensors enqueued right after a barrier should. With
  // 10 minutes between cycles and a minute of quiet before new work starts one,
  // only Flush and that mistake start cycles here.
  std::atomic<int> stage{0};
  auto wait_for = [&](int s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (stage.load() < s && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(milliseconds(1));
    ASSERT_GE(stage.load(), s) << "the other rank did not reach stage " << s;
  };
  RunRanks(2, [&](int rank, Runtime& rt) {
    std::vector<float> x_in(4, rank + 1.0f), x_out(4), y1_in(4, 10.0f * (rank + 1)), y1_out(4),
        y2_in(4, 100.0f * (rank + 1)), y2_out(4);
    auto enqueue = [&](const char* name, std::vector<float>& in, std::vector<float>& out) {
      TensorEntry a;
      a.name = name;
      a.input = in.data();
      a.output = out.data();
      a.shape = {4};
      std::shared_ptr<Work> w;
      EXPECT_TRUE(rt.EnqueueOne(TensorEntry(a), 0, &w).ok());
      return w;
    };
    std::shared_ptr<Work> x, y1, y2;
    if (rank == 0) {
      x = enqueue("x", x_in, x_out);
      rt.Flush();  // the cycle starts and waits for rank 1
      std::this_thread::sleep_for(milliseconds(300));
      y1 = enqueue("y1", y1_in, y1_out);
      stage = 1;
      ASSERT_TRUE(x->Wait(milliseconds(20000)).ok());
      std::this_thread::sleep_for(milliseconds(300));  // time for a mistaken early cycle
      y2 = enqueue("y2", y2_in, y2_out);
      rt.Flush();
      stage = 2;
    } else {
      wait_for(1);
      x = enqueue("x", x_in, x_out);
      rt.Flush();
      ASSERT_TRUE(x->Wait(milliseconds(20000)).ok());
      wait_for(2);
      y1 = enqueue("y1", y1_in, y1_out);
      y2 = enqueue("y2", y2_in, y2_out);
      rt.Flush();
    }
    ASSERT_TRUE(y1->Wait(milliseconds(20000)).ok()) << "rank " << rank;
    ASSERT_TRUE(y2->Wait(milliseconds(20000)).ok()) << "rank " << rank;
    EXPECT_THAT(x_out, ::testing::Each(3.0f));
    EXPECT_THAT(y1_out, ::testing::Each(30.0f));
    EXPECT_THAT(y2_out, ::testing::Each(300.0f));
    EXPECT_EQ(rt.NegotiationStats(0).cycles, 2) << "rank " << rank << ": y1 and y2 went in separate cycles";
  }, [](RuntimeOptions& o) { o.cycle_time = std::chrono::minutes(10); });
}

}  // namespace
}  // namespace testing
}  // namespace hvd
