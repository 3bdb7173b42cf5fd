#include "controller/autotuner.h"

#include <algorithm>

namespace hvd {

Autotuner::Autotuner(Setting initial, Options options)
    : options_(std::move(options)), current_(initial), best_(initial), phase_best_(initial) {
  if (options_.thresholds.empty()) options_.thresholds = {initial.fusion_threshold};
  if (options_.cycle_times.empty()) options_.cycle_times = {initial.cycle_time};
  current_.fusion_threshold = options_.thresholds[0];
}

void Autotuner::StartWindow(Clock::time_point now) {
  window_start_ = now;
  window_bytes_ = 0;
  window_cycles_ = 0;
}

bool Autotuner::Observe(int64_t bytes, Clock::time_point now) {
  if (phase_ == Phase::kDone) return false;
  if (!started_) {
    started_ = true;
    StartWindow(now);
    return false;
  }
  window_bytes_ += bytes;
  if (bytes > 0) ++window_cycles_;
  const auto elapsed = now - window_start_;
  if (elapsed < options_.window || window_cycles_ < options_.min_cycles) return false;
  const double score =
      window_bytes_ / std::chrono::duration<double>(elapsed).count();
  StartWindow(now);
  // The first window after a change runs partly under the old setting: drop it.
  if (!warmed_up_) {
    warmed_up_ = true;
    return false;
  }
  scores_.push_back(score);
  if (static_cast<int>(scores_.size()) < options_.samples) return false;
  std::sort(scores_.begin(), scores_.end());
  const double median = scores_[scores_.size() / 2];
  scores_.clear();
  if (options_.log) options_.log(current_, median);
  if (median > phase_best_score_) {
    phase_best_score_ = median;
    phase_best_ = current_;
  }
  if (median > best_score_) {
    best_score_ = median;
    best_ = current_;
  }
  const Setting before = current_;
  Advance();
  warmed_up_ = false;
  return !(current_ == before);
}

bool Autotuner::Advance() {
  ++candidate_;
  auto next_phase = [&](Phase p) {
    phase_ = p;
    candidate_ = 0;
    current_ = phase_best_;
    phase_best_score_ = -1;
  };
  switch (phase_) {
    case Phase::kThresholds:
      if (candidate_ < options_.thresholds.size()) {
        current_.fusion_threshold = options_.thresholds[candidate_];
        return true;
      }
      next_phase(Phase::kCycleTimes);
      current_.cycle_time = options_.cycle_times[0];
      return true;
    case Phase::kCycleTimes:
      if (candidate_ < options_.cycle_times.size()) {
        current_.cycle_time = options_.cycle_times[candidate_];
        return true;
      }
      next_phase(Phase::kThresholdsAgain);
      current_.fusion_threshold = options_.thresholds[0];
      return true;
    case Phase::kThresholdsAgain:
      if (candidate_ < options_.thresholds.size()) {
        current_.fusion_threshold = options_.thresholds[candidate_];
        return true;
      }
      phase_ = Phase::kDone;
      current_ = best_;
      return false;
    case Phase::kDone:
      return false;
  }
  return false;
}

}  // namespace hvd
