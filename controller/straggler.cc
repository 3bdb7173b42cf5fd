#include "controller/straggler.h"

#include <algorithm>
#include <cstdio>

namespace hvd {

void StragglerTracker::Record(const std::vector<Clock::time_point>& arrivals) {
  Clock::time_point first = Clock::time_point::max(), last = Clock::time_point::min();
  int last_rank = -1;
  for (size_t r = 0; r < arrivals.size() && r < per_rank_.size(); ++r) {
    if (arrivals[r] == Clock::time_point{}) continue;
    first = std::min(first, arrivals[r]);
    if (arrivals[r] > last) {
      last = arrivals[r];
      last_rank = static_cast<int>(r);
    }
  }
  RecordLast(last_rank, first, last);
}

void StragglerTracker::Record(const Arrivals& a) {
  if (a.each != nullptr) {
    Record(*a.each);
    return;
  }
  RecordLast(a.last_rank, a.first, a.last);
}

void StragglerTracker::RecordLast(int last_rank, Clock::time_point first, Clock::time_point last) {
  // Most tensors arrive from every rank in the same cycle: those only count,
  // without the lock (the coordinator records a step's 1000 tensors per cycle).
  // One thread records, so a plain load and store count: a locked add per
  // tensor was most of Record's cost in a cached cycle.
  tensors_.store(tensors_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (last_rank < 0 || last_rank >= static_cast<int>(per_rank_.size()) || last <= first) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++straggled_;
  PerRank& p = per_rank_[last_rank];
  const double lag_ms = std::chrono::duration<double, std::milli>(last - first).count();
  ++p.times_last;
  p.lag_sum_ms += lag_ms;
  if (p.recent_ms.size() < kWindow) {
    p.recent_ms.push_back(static_cast<float>(lag_ms));
  } else {
    p.recent_ms[p.next] = static_cast<float>(lag_ms);
    p.next = (p.next + 1) % kWindow;
  }
}

int64_t StragglerTracker::tensors() const { return tensors_.load(std::memory_order_relaxed); }

StragglerTracker::RankStats StragglerTracker::Stats(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  RankStats s;
  const PerRank& p = per_rank_.at(rank);
  s.times_last = p.times_last;
  if (p.times_last > 0) s.mean_lag_ms = p.lag_sum_ms / p.times_last;
  if (!p.recent_ms.empty()) {
    std::vector<float> v = p.recent_ms;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(0.95 * (v.size() - 1) + 0.5));
    std::nth_element(v.begin(), v.begin() + k, v.end());
    s.p95_lag_ms = v[k];
  }
  return s;
}

std::string StragglerTracker::Report() const {
  int64_t straggled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    straggled = straggled_;
  }
  // Read after straggled_: a tensor is counted before it can straggle.
  const int64_t total = tensors();
  char line[160];
  std::snprintf(line, sizeof(line),
                "straggler report: %lld tensors negotiated, %lld waited on a last rank\n",
                static_cast<long long>(total), static_cast<long long>(straggled));
  std::string out = line;
  out += "  rank     last   share   mean lag    p95 lag\n";
  for (size_t r = 0; r < per_rank_.size(); ++r) {
    const RankStats s = Stats(static_cast<int>(r));
    const double share = straggled > 0 ? 100.0 * s.times_last / straggled : 0.0;
    std::snprintf(line, sizeof(line), "  %4zu  %7lld  %5.1f%%  %7.2f ms  %7.2f ms\n", r,
                  static_cast<long long>(s.times_last), share, s.mean_lag_ms, s.p95_lag_ms);
    out += line;
  }
  return out;
}

}  // namespace hvd
