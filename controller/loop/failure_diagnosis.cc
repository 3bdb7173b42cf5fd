#include "controller/loop/failure_diagnosis.h"

#include <pthread.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>

#include "runtime/common/job_keys.h"

namespace hvd {
namespace {

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

FailureDiagnosis::FailureDiagnosis(int rank, int size, std::shared_ptr<Store> store,
                                   std::shared_ptr<Store> launcher_store)
    : rank_(rank),
      size_(size),
      store_(std::move(store)),
      launcher_store_(std::move(launcher_store)) {}

FailureDiagnosis::~FailureDiagnosis() { StopHeartbeat(); }

void FailureDiagnosis::StartHeartbeat() {
  if (size_ <= 1 || heartbeat_.joinable()) return;
  // Named for top, perf and gdb (at most 15 characters).
  heartbeat_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvd-heartbeat");
    Heartbeat();
  });
}

void FailureDiagnosis::StopHeartbeat() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_stop_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

void FailureDiagnosis::SetStoreLostHandler(std::function<void(const Status&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  store_lost_ = std::move(handler);
}

void FailureDiagnosis::SetLauncherReportHandler(std::function<void(const Status&)> handler) {
  std::lock_guard<std::mutex> lock(mu_);
  launcher_report_ = std::move(handler);
}

void FailureDiagnosis::Heartbeat() {
  const std::string key = keys::Alive(rank_);
  int64_t beats = 0;
  int reported_beats = 0;  // consecutive beats that found the launcher's record
  std::unique_lock<std::mutex> lock(mu_);
  while (!heartbeat_stop_) {
    lock.unlock();
    const Status beat = store_->Add(key, 1, &beats);
    lock.lock();
    if (!beat.ok() && store_lost_ && !heartbeat_stop_) {
      // The store is gone: nothing left to tell the others; the handler decides
      // what it means for this process.
      auto handler = store_lost_;
      lock.unlock();
      handler(beat);
      return;
    }
    if (launcher_report_) {
      lock.unlock();
      const Status reported = LauncherReported();
      lock.lock();
      // Only on the second beat that sees it: the usual path (a peer's closed
      // connection, which names the same record) has had half a second to report.
      reported_beats = reported.ok() ? 0 : reported_beats + 1;
      if (reported_beats >= 2 && launcher_report_ && !heartbeat_stop_) {
        auto handler = std::move(launcher_report_);
        launcher_report_ = nullptr;
        lock.unlock();
        handler(reported);
        lock.lock();
      }
    }
    cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return heartbeat_stop_; });
  }
}

std::vector<int> FailureDiagnosis::SilentRanks() {
  auto read = [&] {
    std::vector<int64_t> v(size_, -1);
    for (int r = 0; r < size_; ++r) {
      int64_t x = 0;
      if (r != rank_ && store_->Add(keys::Alive(r), 0, &x).ok()) v[r] = x;
    }
    return v;
  };
  const std::vector<int64_t> before = read();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::vector<int64_t> after = read();
  std::vector<int> silent;
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && before[r] >= 0 && after[r] == before[r]) silent.push_back(r);
  return silent;
}

Status FailureDiagnosis::LauncherReported() const {
  std::string reason;
  if (launcher_store_ &&
      launcher_store_->Get(keys::kLauncherAbortReason, std::chrono::milliseconds(0), &reason).ok() &&
      !reason.empty())
    return Status::RemoteError(reason);
  return Status::OK();
}

Status FailureDiagnosis::Diagnose(const Status& status) {
  const std::string seen = "rank " + std::to_string(rank_) + " saw: " + status.message();
  if (status.code() != StatusCode::kRemoteError && status.code() != StatusCode::kTimeout)
    return Status(status.code(), "rank " + std::to_string(rank_) + ": " + status.message());
  // Another rank has recorded the job's first failure already: this rank's failure
  // follows from it (a peer that failed closes its connections), and
  // AgreeOnFirstFailure reports that one. Waiting here would only let the rank that
  // serves the store exit before this one has read it.
  std::string first;
  if (store_->Get(keys::kAbortReason, std::chrono::milliseconds(0), &first).ok() && !first.empty())
    return Status(status.code(), "rank " + std::to_string(rank_) + ": " + status.message());
  // A lost peer is usually a dead process, and the launcher saw it die: give it a
  // moment to say which rank and how, since a closed socket names neither.
  std::string reason;
  if (launcher_store_ &&
      launcher_store_->Get(keys::kLauncherAbortReason, std::chrono::milliseconds(1000), &reason)
          .ok() &&
      !reason.empty())
    return Status(StatusCode::kRemoteError, reason + " (" + seen + ")");
  // Otherwise name whoever stopped beating. In a ring a rank waits on its
  // neighbour, who waits on the culprit, so the peer in the error is rarely it.
  const std::vector<int> silent = SilentRanks();
  if (!silent.empty()) {
    const bool one = silent.size() == 1;
    return Status(status.code(), std::string(one ? "rank " : "ranks ") + JoinRanks(silent) +
                                     (one ? " is" : " are") +
                                     " gone or frozen (no heartbeat for 1.5 s) (" + seen + ")");
  }
  return Status(status.code(), "rank " + std::to_string(rank_) + ": " + status.message());
}

void FailureDiagnosis::RecordJobFailure(const Status& failure) {
  int64_t order = 0;
  if (!launcher_store_ || !launcher_store_->Add(keys::kJobFailureCount, 1, &order).ok()) return;
  if (order != 1) {
    // Another rank is recording it: wait (briefly) until it has, so this rank's exit
    // cannot reach dprun before the cause does.
    std::string first;
    launcher_store_->Get(keys::kJobFailure, std::chrono::milliseconds(2000), &first);
    return;
  }
  launcher_store_->Set(keys::kJobFailure,
                       std::string(StatusCodeName(failure.code())) + ": " + failure.message());
}

Status FailureDiagnosis::AgreeOnFirstFailure(const Status& mine) {
  int64_t order = 0;
  if (!store_->Add(keys::kAbortCount, 1, &order).ok()) return mine;
  if (order == 1) {
    // The launcher's record first: a rank that reads the reason may exit at once, and
    // dprun names the job's cause when it sees that exit.
    RecordJobFailure(mine);
    store_->Set(keys::kAbortReason,
                std::to_string(static_cast<int>(mine.code())) + " " + mine.message());
    return mine;
  }
  std::string reason;
  if (!store_->Get(keys::kAbortReason, std::chrono::milliseconds(2000), &reason).ok()) return mine;
  const size_t sp = reason.find(' ');
  const int code = std::atoi(reason.substr(0, sp).c_str());
  if (sp == std::string::npos || code <= 0 || reason.substr(sp + 1) == mine.message()) return mine;
  return Status(static_cast<StatusCode>(code),
                reason.substr(sp + 1) + " [the job's first failure; then " + mine.message() + "]");
}

}  // namespace hvd
