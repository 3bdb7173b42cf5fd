// LoopPacer: each rule of when the next cycle starts (controller/loop/loop_pacer.h), on a
// fake clock that only moves when a test moves it. The cycle time is 10 ms, so
// the quiet tenth is 1 ms.
#include "controller/loop/loop_pacer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace hvd {
namespace {

using Clock = LoopPacer::Clock;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr microseconds kCycle = milliseconds(10);

class LoopPacerTest : public ::testing::Test {
 protected:
  // The pacer's clock: t0 until a test advances it.
  const Clock::time_point t0_ = Clock::time_point(std::chrono::hours(1));
  Clock::time_point now_ = t0_;
  LoopPacer pacer_{kCycle, [this] { return now_; }};

  void Advance(microseconds d) { now_ += d; }
  void AdvanceTo(microseconds since_t0) { now_ = t0_ + since_t0; }
  // The enqueue side: an enqueue now; true if it asked to wake the loop.
  bool Enqueue() { return pacer_.OnEnqueue(now_); }

  // Whether the next cycle may start now; if not, `*wake` is when to ask again.
  bool Due(Clock::time_point* wake = nullptr) {
    Clock::time_point w{};
    const bool due = pacer_.Due(&w);
    if (wake) *wake = w;
    return due;
  }
  // How long after t0 the pacer says to look again (it must not be due now).
  microseconds WakeAfterT0() {
    Clock::time_point wake;
    EXPECT_FALSE(Due(&wake)) << "due at t0 + " << Since(now_).count() << " us";
    return Since(wake);
  }
  microseconds Since(Clock::time_point t) {
    return std::chrono::duration_cast<microseconds>(t - t0_);
  }
  // Runs one cycle that begins now and takes `length`; `hurry` as RunCycle sets it.
  void RunCycle(microseconds length = microseconds(0), bool hurry = false,
                microseconds next_cycle_time = kCycle) {
    EXPECT_EQ(pacer_.BeginCycle(), now_);
    Advance(length);
    pacer_.EndCycle(hurry, next_cycle_time);
  }
};

// Rule 5: without new work a cycle starts a cycle time after the last began.
TEST_F(LoopPacerTest, WithoutNewWorkTheCycleStartsACycleTimeAfterTheLastBegan) {
  pacer_.BeginLoop();
  EXPECT_EQ(WakeAfterT0(), milliseconds(10));
  AdvanceTo(microseconds(9999));
  EXPECT_EQ(WakeAfterT0(), milliseconds(10));
  AdvanceTo(milliseconds(10));
  EXPECT_TRUE(Due());
  RunCycle(milliseconds(2));  // t0+10 .. t0+12
  EXPECT_EQ(WakeAfterT0(), milliseconds(20));
  AdvanceTo(milliseconds(20));
  EXPECT_TRUE(Due());
}

// The cadence counts from when the last cycle began, however long it ran.
TEST_F(LoopPacerTest, ASlowCycleSetsTheCadence) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(10));
  RunCycle(milliseconds(25));  // t0+10 .. t0+35: the next was due at t0+20
  EXPECT_TRUE(Due());
  AdvanceTo(milliseconds(37));  // a late start sets the cadence from there
  RunCycle();
  EXPECT_EQ(WakeAfterT0(), milliseconds(47));
}

// Rule 3: new work starts the cycle once enqueues pause for a tenth of the cycle
// time, long before the cycle is due.
TEST_F(LoopPacerTest, NewWorkStartsTheCycleOnceEnqueuesPauseForATenth) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(2));
  EXPECT_TRUE(Enqueue());
  EXPECT_EQ(WakeAfterT0(), milliseconds(3));
  AdvanceTo(microseconds(2500));
  EXPECT_FALSE(Enqueue());  // the burst goes on; the loop is awake already
  EXPECT_EQ(WakeAfterT0(), microseconds(3500));
  AdvanceTo(microseconds(3499));
  EXPECT_FALSE(Due());
  AdvanceTo(microseconds(3500));
  EXPECT_TRUE(Due());
  // The early cycle sets the cadence.
  RunCycle();
  EXPECT_EQ(WakeAfterT0(), microseconds(13500));
}

// Rules 3 and 2: a cycle that falls due mid-burst waits for the burst to pause,
// by up to one more cycle time.
TEST_F(LoopPacerTest, ADueCycleWaitsForABurstToEndByUpToACycleTime) {
  pacer_.BeginLoop();
  AdvanceTo(microseconds(9500));
  EXPECT_TRUE(Enqueue());
  AdvanceTo(milliseconds(10));  // due, but the burst goes on
  EXPECT_EQ(WakeAfterT0(), microseconds(10500));
  for (int us = 10000; us <= 19800; us += 200) {  // a burst with 0.2 ms gaps
    AdvanceTo(microseconds(us));
    Enqueue();
    EXPECT_FALSE(Due()) << "at t0 + " << us << " us";
  }
  AdvanceTo(microseconds(19900));
  EXPECT_EQ(WakeAfterT0(), milliseconds(20));  // the latest start, not the quiet at 20.8
  AdvanceTo(milliseconds(20));
  EXPECT_TRUE(Due());
}

// Rule 3, mid-burst: the loop looks again no sooner than the burst has lasted, so a
// long burst of close enqueues wakes it a few times, not once per quiet tenth; the
// cycle still starts by rule 2's limit, and as soon as the burst ends when it looks.
TEST_F(LoopPacerTest, MidBurstTheLoopLooksAgainLessAndLessOften) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(2));
  EXPECT_TRUE(Enqueue());
  Clock::time_point wake{};
  ASSERT_FALSE(Due(&wake));
  std::vector<microseconds> looks;
  int next_enqueue_us = 2050;  // a burst with 50 us gaps until t0 + 19.8 ms
  while (true) {
    for (; next_enqueue_us <= 19800 && t0_ + microseconds(next_enqueue_us) <= wake;
         next_enqueue_us += 50) {
      AdvanceTo(microseconds(next_enqueue_us));
      Enqueue();
    }
    now_ = wake;
    looks.push_back(Since(now_));
    if (Due(&wake)) break;
  }
  // Without the back-off: once per millisecond (the quiet tenth), 18 looks.
  EXPECT_EQ(looks, (std::vector<microseconds>{milliseconds(3), milliseconds(4), milliseconds(6),
                                               milliseconds(10), milliseconds(18),
                                               milliseconds(20)}));
  // After a short burst the cycle starts a tenth after its last enqueue, as before.
  RunCycle();
  AdvanceTo(microseconds(20500));
  EXPECT_TRUE(Enqueue());
  AdvanceTo(microseconds(20600));
  EXPECT_FALSE(Enqueue());
  EXPECT_EQ(WakeAfterT0(), microseconds(21600));
  AdvanceTo(microseconds(21600));
  EXPECT_TRUE(Due());
}

// Rule 4: a Flush with new work starts the cycle at once; without, it does nothing.
TEST_F(LoopPacerTest, FlushStartsTheCycleForNewWorkAtOnce) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(1));
  EXPECT_FALSE(pacer_.OnFlush());  // nothing new: the cadence holds
  EXPECT_EQ(WakeAfterT0(), milliseconds(10));
  EXPECT_TRUE(Enqueue());
  EXPECT_EQ(WakeAfterT0(), milliseconds(2));
  EXPECT_TRUE(pacer_.OnFlush());
  EXPECT_FALSE(pacer_.OnFlush());  // one wake-up is enough
  EXPECT_TRUE(Due());
  // The cycle takes the flush with the work: the next waits for new work again.
  RunCycle();
  EXPECT_FALSE(pacer_.OnFlush());
  EXPECT_EQ(WakeAfterT0(), milliseconds(11));
  EXPECT_TRUE(Enqueue());
  EXPECT_TRUE(pacer_.OnFlush());
  EXPECT_TRUE(Due());
}

// Rule 1: a cycle whose requests still wait for other ranks starts the next at
// once, once; the one after keeps the cadence.
TEST_F(LoopPacerTest, HurryStartsTheNextCycleAtOnceOnce) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(10));
  RunCycle(microseconds(100), /*hurry=*/true);
  EXPECT_TRUE(Due());
  RunCycle(microseconds(100), /*hurry=*/false);  // began at t0+10.1
  EXPECT_EQ(WakeAfterT0(), microseconds(20100));
}

// Work enqueued before a cycle began is that cycle's: it neither starts the next
// early nor stops the next enqueue from asking to wake the loop.
TEST_F(LoopPacerTest, EachCycleTakesTheNewWorkEnqueuedBeforeItBegan) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(1));
  EXPECT_TRUE(Enqueue());
  EXPECT_FALSE(Enqueue());
  AdvanceTo(milliseconds(2));
  ASSERT_TRUE(Due());
  RunCycle();
  AdvanceTo(milliseconds(5));
  EXPECT_EQ(WakeAfterT0(), milliseconds(12));  // the cadence, not the old burst's quiet
  // New work during the wait asks to wake the loop again.
  EXPECT_TRUE(Enqueue());
  EXPECT_EQ(WakeAfterT0(), milliseconds(6));
}

// The cycle time announced at the end of a cycle paces the next one, its quiet
// tenth included.
TEST_F(LoopPacerTest, TheAnnouncedCycleTimePacesTheNextCycle) {
  pacer_.BeginLoop();
  AdvanceTo(milliseconds(10));
  RunCycle(microseconds(0), false, milliseconds(100));
  EXPECT_EQ(WakeAfterT0(), milliseconds(110));
  AdvanceTo(milliseconds(50));
  EXPECT_TRUE(Enqueue());
  EXPECT_EQ(WakeAfterT0(), milliseconds(60));
  AdvanceTo(milliseconds(60));
  EXPECT_TRUE(Due());
  RunCycle(microseconds(0), false, milliseconds(1));
  EXPECT_EQ(WakeAfterT0(), milliseconds(61));
}

}  // namespace
}  // namespace hvd
