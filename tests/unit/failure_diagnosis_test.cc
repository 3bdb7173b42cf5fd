// FailureDiagnosis: the cause every rank reports, found through an in-memory store.
#include "controller/loop/failure_diagnosis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/common/job_keys.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;

TEST(FailureDiagnosis, AnErrorOfThisRankOnlyGainsItsRank) {
  FailureDiagnosis d(1, 2, NewInMemoryStore(), nullptr);
  const Status s = d.Diagnose(Status::InvalidArgument("bad tensor"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rank 1: bad tensor");
}

TEST(FailureDiagnosis, TheLaunchersRecordOfADeadRankIsTheCause) {
  auto launcher = NewInMemoryStore();
  ASSERT_TRUE(launcher->Set(keys::kLauncherAbortReason, "rank 2 was killed by SIGKILL").ok());
  FailureDiagnosis d(0, 3, NewInMemoryStore(), launcher);
  const Status s = d.Diagnose(Status(StatusCode::kTimeout, "no reply from rank 1"));
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.message(), "rank 2 was killed by SIGKILL (rank 0 saw: no reply from rank 1)");
}

// Rank 0 beats, rank 1 beat once and stopped, rank 2 never beat.
TEST(FailureDiagnosis, ARankWhoseHeartbeatStoppedIsNamed) {
  auto store = NewInMemoryStore();
  int64_t beats = 0;
  ASSERT_TRUE(store->Add(keys::Alive(1), 1, &beats).ok());
  FailureDiagnosis beating(0, 3, store, nullptr);
  beating.StartHeartbeat();
  FailureDiagnosis d(2, 3, store, nullptr);
  const Status s = d.Diagnose(Status(StatusCode::kRemoteError, "connection closed by rank 0"));
  beating.StopHeartbeat();
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.message(),
            "rank 1 is gone or frozen (no heartbeat for 1.5 s) "
            "(rank 2 saw: connection closed by rank 0)");
}

TEST(FailureDiagnosis, WithEveryRankBeatingThisRanksViewStands) {
  auto store = NewInMemoryStore();
  FailureDiagnosis other(1, 2, store, nullptr);
  other.StartHeartbeat();
  FailureDiagnosis d(0, 2, store, nullptr);
  const Status s = d.Diagnose(Status(StatusCode::kTimeout, "waited 5 s"));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(), "rank 0: waited 5 s");
}

// A rank that fails after another has recorded the job's first failure (the one that
// closed its connections) needs no diagnosis of its own, and must not wait for one:
// under srun the rank that recorded it serves the store and exits soon after.
TEST(FailureDiagnosis, AfterTheFirstFailureIsRecordedItReturnsAtOnce) {
  auto store = NewInMemoryStore();
  auto launcher = NewInMemoryStore();
  int64_t beats = 0;
  ASSERT_TRUE(store->Add(keys::Alive(2), 1, &beats).ok());  // rank 2 beat once, then stopped
  FailureDiagnosis first(0, 3, store, launcher);
  ASSERT_EQ(first.AgreeOnFirstFailure(Status::RemoteError("rank 2 is gone")).message(),
            "rank 2 is gone");
  FailureDiagnosis d(1, 3, store, launcher);
  const auto begin = std::chrono::steady_clock::now();
  const Status s = d.Diagnose(Status::RemoteError("connection closed by rank 0"));
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(500));
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.message(), "rank 1: connection closed by rank 0");
  EXPECT_EQ(d.AgreeOnFirstFailure(s).message(),
            "rank 2 is gone [the job's first failure; then rank 1: connection closed by rank 0]");
}

TEST(FailureDiagnosis, TheHeartbeatCountsUntilStopped) {
  auto store = NewInMemoryStore();
  FailureDiagnosis d(1, 2, store, nullptr);
  d.StartHeartbeat();
  int64_t beats = 0;
  for (int i = 0; i < 100 && beats == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(store->Add(keys::Alive(1), 0, &beats).ok());
  }
  EXPECT_GE(beats, 1);
  const auto begin = std::chrono::steady_clock::now();
  d.StopHeartbeat();
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::milliseconds(400));
  d.StopHeartbeat();  // idempotent
}

TEST(FailureDiagnosis, EveryRankReportsTheFirstFailure) {
  auto store = NewInMemoryStore();
  FailureDiagnosis first(2, 3, store, nullptr), second(0, 3, store, nullptr),
      same(1, 3, store, nullptr);
  const Status cause(StatusCode::kRemoteError, "rank 2: shm peer died");
  EXPECT_EQ(first.AgreeOnFirstFailure(cause).message(), cause.message());
  const Status later = second.AgreeOnFirstFailure(Status::ShutDown("rank 0: aborted"));
  EXPECT_EQ(later.code(), StatusCode::kRemoteError);
  EXPECT_EQ(later.message(),
            "rank 2: shm peer died [the job's first failure; then rank 0: aborted]");
  // A rank that saw the very same thing reports it once.
  EXPECT_EQ(same.AgreeOnFirstFailure(cause).message(), cause.message());
}

// Forwards to an in-memory store; when the reason the other ranks read is set, notes
// what the launcher's store holds for dprun at that moment.
class WatchingStore : public Store {
 public:
  explicit WatchingStore(std::shared_ptr<Store> launcher) : launcher_(std::move(launcher)) {}
  Status Set(const std::string& key, const std::string& value) override {
    if (key == keys::kAbortReason)
      launcher_had_ = launcher_->Get(keys::kJobFailure, std::chrono::milliseconds(0), &seen_).ok();
    return base_->Set(key, value);
  }
  Status Get(const std::string& key, std::chrono::milliseconds timeout,
             std::string* value) override {
    return base_->Get(key, timeout, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    return base_->Add(key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    return base_->Wait(keys, timeout);
  }
  Status Delete(const std::string& key) override { return base_->Delete(key); }

  bool launcher_had_ = false;
  std::string seen_;

 private:
  const std::shared_ptr<Store> base_ = NewInMemoryStore();
  const std::shared_ptr<Store> launcher_;
};

// Another rank exits as soon as it reads the first failure, and dprun names the job's
// cause from its own store when it sees that exit: so the cause is there first.
TEST(FailureDiagnosis, TheLauncherHasTheCauseBeforeAnotherRankCanReadIt) {
  auto launcher = NewInMemoryStore();
  auto store = std::make_shared<WatchingStore>(launcher);
  FailureDiagnosis first(1, 3, store, launcher);
  const Status cause(StatusCode::kTimeout, "rank 2 is gone or frozen");
  EXPECT_EQ(first.AgreeOnFirstFailure(cause).message(), cause.message());
  EXPECT_TRUE(store->launcher_had_);
  EXPECT_EQ(store->seen_, "HVD_TIMEOUT: rank 2 is gone or frozen");
}

// A rank that finds another one recording the job's failure returns only once it is
// recorded (it may exit next).
TEST(FailureDiagnosis, ASecondRecordWaitsForTheFirstToLand) {
  auto launcher = NewInMemoryStore();
  int64_t order = 0;
  ASSERT_TRUE(launcher->Add(keys::kJobFailureCount, 1, &order).ok());  // another rank's
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_TRUE(launcher->Set(keys::kJobFailure, "HVD_SHUT_DOWN: rank 1 has shut down").ok());
  });
  FailureDiagnosis second(2, 3, NewInMemoryStore(), launcher);
  second.RecordJobFailure(Status::ShutDown("rank 2: tensor x failed"));
  std::string cause;
  const bool recorded = launcher->Get(keys::kJobFailure, std::chrono::milliseconds(0), &cause).ok();
  other.join();
  EXPECT_TRUE(recorded);
  EXPECT_EQ(cause, "HVD_SHUT_DOWN: rank 1 has shut down");
}

}  // namespace
}  // namespace hvd
