// Autotuner: picks the fusion threshold and cycle time online from measured
// throughput (HVD_AUTOTUNE=1).
//
// The coordinator feeds it the bytes each cycle's responses move. It scores a
// setting by bytes per second over a window (at least `window` long and at least
// `min_cycles` busy cycles, after a warm-up window is thrown away), and searches
// one parameter at a time (coordinate descent): every candidate threshold at the
// current cycle time, the best one kept, then every candidate cycle time, then
// once more over thresholds at the chosen cycle time. Each setting is scored as
// the median of `samples` windows, so one noisy window cannot win. It then stays
// on the best setting. The coordinator broadcasts the setting in every response
// list, so all ranks use the same one.
//
// Pure: time comes in through Observe. Not thread-safe (the background thread).
#ifndef HVD_CONTROLLER_AUTOTUNER_H_
#define HVD_CONTROLLER_AUTOTUNER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hvd {

class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  struct Setting {
    int64_t fusion_threshold;
    std::chrono::microseconds cycle_time;
    bool operator==(const Setting& o) const {
      return fusion_threshold == o.fusion_threshold && cycle_time == o.cycle_time;
    }
  };

  struct Options {
    std::vector<int64_t> thresholds = {1 << 20, 4 << 20, 16 << 20, 32 << 20, 64 << 20, 128 << 20};
    std::vector<std::chrono::microseconds> cycle_times = {
        std::chrono::microseconds(250), std::chrono::microseconds(500),
        std::chrono::microseconds(1000), std::chrono::microseconds(2500),
        std::chrono::microseconds(5000)};
    std::chrono::milliseconds window{1000};
    int min_cycles = 10;
    int samples = 3;
    // Called once per scored setting: (setting, bytes per second).
    std::function<void(const Setting&, double)> log;
  };

  Autotuner(Setting initial, Options options);

  // Records that a cycle ending at `now` moved `bytes`. Returns true when the
  // setting changed (read it with current()).
  bool Observe(int64_t bytes, Clock::time_point now);

  const Setting& current() const { return current_; }
  bool done() const { return phase_ == Phase::kDone; }
  // The best setting found so far.
  const Setting& best() const { return best_; }

 private:
  enum class Phase { kThresholds, kCycleTimes, kThresholdsAgain, kDone };
  // Moves to the next candidate (or phase); returns false when the search ends.
  bool Advance();
  void StartWindow(Clock::time_point now);

  Options options_;
  Setting current_;
  Setting best_;
  double best_score_ = -1;
  Phase phase_ = Phase::kThresholds;
  size_t candidate_ = 0;
  // The best of the current phase, carried into the next.
  Setting phase_best_;
  double phase_best_score_ = -1;
  std::vector<double> scores_;  // windows of the current setting
  bool warmed_up_ = false;
  bool started_ = false;
  Clock::time_point window_start_;
  int64_t window_bytes_ = 0;
  int window_cycles_ = 0;
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_AUTOTUNER_H_
