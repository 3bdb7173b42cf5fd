#include "controller/loop/loop_pacer.h"

#include <algorithm>
#include <utility>

namespace hvd {

LoopPacer::LoopPacer(std::chrono::microseconds cycle_time, NowFn now)
    : now_(std::move(now)), cycle_time_(cycle_time) {}

void LoopPacer::BeginLoop() {
  began_ = Now();
  hurry_ = false;
}

bool LoopPacer::Due(Clock::time_point* wake) const {
  if (hurry_) return true;  // rule 1
  const auto now = Now();
  const auto due = began_ + cycle_time_;
  const auto latest = due + cycle_time_;
  if (now >= latest) return true;  // rule 2
  auto deadline = due;             // rule 5
  if (work_pending_.load(std::memory_order_acquire)) {
    const auto last = Clock::time_point(
        std::chrono::nanoseconds(last_enqueue_ns_.load(std::memory_order_relaxed)));
    const auto quiet_at = last + cycle_time_ / 10;
    if (quiet_at <= now || flush_.load(std::memory_order_acquire)) return true;  // rules 3, 4
    // Mid-burst, even a due cycle waits for the burst to end, up to rule 2's
    // limit; the loop looks again no sooner than the burst has lasted so far.
    const auto start = std::min(last, Clock::time_point(std::chrono::nanoseconds(
                                          burst_start_ns_.load(std::memory_order_relaxed))));
    const auto backoff = now + std::max(now - start, Clock::duration::zero());
    deadline = std::min(std::max(quiet_at, backoff), latest);
  }
  if (now >= deadline) return true;
  *wake = deadline;
  return false;
}

LoopPacer::Clock::time_point LoopPacer::BeginCycle() {
  // Requests enqueued from here on are seen by this cycle or flag the next one.
  work_pending_.store(false, std::memory_order_release);
  flush_.store(false, std::memory_order_release);
  began_ = Now();
  return began_;
}

void LoopPacer::EndCycle(bool hurry, std::chrono::microseconds cycle_time) {
  hurry_ = hurry;
  cycle_time_ = cycle_time;
}

}  // namespace hvd
