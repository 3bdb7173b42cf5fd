// StragglerTracker: which rank held each negotiated tensor back, and by how much.
//
// The coordinator records, for every tensor that became ready, when each rank
// submitted it. The rank that submitted last is that tensor's straggler; its lag
// is the time between the first and the last submission. Report() summarises per
// rank: how often it was last, the mean and p95 of its lag. Tensors every rank
// submitted in the same cycle have no straggler.
// One thread records (the coordinator's background thread); any thread reports.
#ifndef HVD_CONTROLLER_STRAGGLER_H_
#define HVD_CONTROLLER_STRAGGLER_H_

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

namespace hvd {

// When a negotiated tensor's submissions reached the coordinator (Controller's
// on_arrivals hook).
struct Arrivals {
  using Clock = std::chrono::steady_clock;
  // When each rank submitted it (time_point{} for a rank that had joined), when the
  // coordinator saw each rank's request; null when it knows only the summary below
  // (cached tensors of a cycle settled by word all-reduce, and tensors every rank
  // submitted in one cycle), so that a cached cycle costs it O(1) per tensor, not
  // O(ranks).
  const std::vector<Clock::time_point>* each = nullptr;
  // Without `each`: the first and the last submission, and who made the last (-1:
  // every rank came in the same cycle, nobody held the tensor back).
  Clock::time_point first{}, last{};
  int last_rank = -1;
};

class StragglerTracker {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StragglerTracker(int size) : per_rank_(size) {}

  // `arrivals[r]` is when rank r submitted the tensor (time_point{} for a rank that
  // had joined and did not submit).
  void Record(const std::vector<Clock::time_point>& arrivals);
  // The same from `a` (its `each` if given).
  void Record(const Arrivals& a);

  struct RankStats {
    int64_t times_last = 0;
    double mean_lag_ms = 0;
    double p95_lag_ms = 0;
  };
  int64_t tensors() const;
  RankStats Stats(int rank) const;

  // A table, one line per rank, e.g.
  //   rank  last  share  mean lag  p95 lag
  //      1   950  95.0%   20.1 ms  22.4 ms
  std::string Report() const;

 private:
  struct PerRank {
    int64_t times_last = 0;
    double lag_sum_ms = 0;
    std::vector<float> recent_ms;  // the last kWindow lags, for the p95
    size_t next = 0;
  };
  // Counts a tensor; when `last_rank` held it back by `last - first`, records that.
  void RecordLast(int last_rank, Clock::time_point first, Clock::time_point last);
  static constexpr size_t kWindow = 4096;
  mutable std::mutex mu_;
  std::vector<PerRank> per_rank_;
  std::atomic<int64_t> tensors_{0};
  int64_t straggled_ = 0;  // guarded by mu_
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_STRAGGLER_H_
