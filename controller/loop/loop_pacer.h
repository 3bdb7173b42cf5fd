// LoopPacer: when the background loop starts its next negotiation cycle.
//
// Terms. A cycle *begins* when the loop takes the queues' requests (BeginCycle).
// The *cadence* puts the next cycle's *due* time one cycle time after the last
// one began, as in Horovod. *New work* is an enqueue since the last cycle began;
// a *burst* is a run of enqueues with no gap of a *quiet* tenth of the cycle time.
// The rules, in the order the pacer applies them:
//   1. Hurry: when the last cycle sent requests that still wait for other ranks,
//      the next cycle starts at once (the others may have enqueued theirs just
//      after their own cycle began). Work enqueued during a cycle does not hurry
//      it; the caller decides that (see Runtime::RunCycle).
//   2. Latest: a cycle never starts later than a cycle time after it was due.
//   3. With new work, the cycle starts once the burst has been quiet for a tenth
//      of the cycle time, even before it is due, so a step's gradients go out as
//      one batch right after the last of them; and a due cycle waits for a burst
//      that is still going on (up to rule 2's limit). Mid-burst, the loop looks
//      again once the burst may have been quiet for a tenth, but not sooner than
//      the burst has lasted so far: a long burst (a backward pass's hooks, tens
//      of microseconds apart) wakes the loop a few times, not once per tenth
//      (each wake preempts the training thread on a shared core). Rule 4 still starts the cycle at once for a blocking caller.
//   4. With new work, a Flush (a caller about to block on its work) starts the
//      cycle at once. Without new work a Flush does nothing.
//   5. Otherwise the cycle starts when it is due (the plain cadence).
// A slow or early cycle sets the cadence: the next is due a cycle time after this
// one began. The cycle time may change between cycles (the coordinator announces
// it, and autotuning moves it); the next wait uses the new one, quiet tenth
// included.
//
// Clock. The pacer reads the injected clock (steady_clock by default; tests pass
// a fake one) only on the loop's side. The enqueue side is handed the time by its
// caller, who reads it once for the entries' own timestamps anyway, so the
// enqueue path costs two relaxed atomics and no clock call of the pacer's; that
// time must come from the same clock.
//
// Threads. BeginLoop, Due, BeginCycle and EndCycle belong to the loop thread.
// OnEnqueue and OnFlush may be called from any thread, concurrently with them.
// The pacer does not sleep or wake anyone: the loop sleeps until the time Due
// gives, under a mutex of its own; OnEnqueue and OnFlush return true when that
// sleep may now end early, and the caller must then lock the loop's mutex and
// notify it, so the wake-up cannot fall between the loop's Due and its wait.
#ifndef HVD_CONTROLLER_LOOP_LOOP_PACER_H_
#define HVD_CONTROLLER_LOOP_LOOP_PACER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

namespace hvd {

class LoopPacer {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // `cycle_time` is the first cycle time (HVD_CYCLE_TIME); `now` the clock, null
  // for steady_clock.
  explicit LoopPacer(std::chrono::microseconds cycle_time, NowFn now = nullptr);

  LoopPacer(const LoopPacer&) = delete;
  LoopPacer& operator=(const LoopPacer&) = delete;

  // --- Any thread.

  // Records an enqueue at `now` (of this pacer's clock). True for the first one
  // since the current cycle began: the loop must then be woken.
  bool OnEnqueue(Clock::time_point now) {
    const int64_t ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
    last_enqueue_ns_.store(ns, std::memory_order_relaxed);
    // A plain load first: in a burst the flag is already set, and the exchange's
    // locked write would bounce its cache line off the loop thread every time.
    if (work_pending_.load(std::memory_order_relaxed)) return false;
    burst_start_ns_.store(ns, std::memory_order_relaxed);  // published by the exchange
    return !work_pending_.exchange(true, std::memory_order_acq_rel);
  }

  // A caller is about to block on work it enqueued. True for the first Flush
  // since the current cycle began with new work: the loop must then be woken.
  bool OnFlush() {
    return work_pending_.load(std::memory_order_acquire) &&
           !flush_.exchange(true, std::memory_order_acq_rel);
  }

  // --- The loop thread.

  // The loop starts: the first cycle is due a cycle time from now.
  void BeginLoop();

  // Whether the next cycle may start now. If not, `*wake` is when to ask again
  // (earlier if OnEnqueue or OnFlush said to wake).
  bool Due(Clock::time_point* wake) const;

  // The cycle begins now, which it returns: enqueues from here on are new work
  // for the next cycle, and its cadence counts from here.
  Clock::time_point BeginCycle();

  // The cycle ended. `hurry`: it sent requests that still wait for other ranks
  // (rule 1). `cycle_time` is the one to pace the next cycle with.
  void EndCycle(bool hurry, std::chrono::microseconds cycle_time);

 private:
  Clock::time_point Now() const { return now_ ? now_() : Clock::now(); }

  const NowFn now_;
  // The loop thread's.
  std::chrono::microseconds cycle_time_;
  Clock::time_point began_;  // when the last cycle began (or the loop, before the first)
  bool hurry_ = false;
  // Any thread's.
  std::atomic<bool> work_pending_{false};    // an enqueue since the cycle began
  std::atomic<int64_t> last_enqueue_ns_{0};  // the latest enqueue, since the clock's epoch
  std::atomic<int64_t> burst_start_ns_{0};   // the first enqueue since the cycle began
  std::atomic<bool> flush_{false};           // a Flush since the cycle began
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_LOOP_PACER_H_
