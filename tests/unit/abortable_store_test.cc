// NewAbortableStore (runtime/store/store.h): waits that end when the launcher records
// why the job failed, and otherwise behave like the store they wrap.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "runtime/store/store.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kAbort[] = "hvd/abort/reason";

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(AbortableStore, AWaitEndsWithTheRecordedReasonSoonAfterItIsSet) {
  auto base = NewInMemoryStore();
  auto store = NewAbortableStore(NewPrefixStore(base, "job/"), base, kAbort, milliseconds(50));
  std::thread launcher([&] {
    std::this_thread::sleep_for(milliseconds(200));
    ASSERT_TRUE(base->Set(kAbort, "rank 2 (pid 77) was killed by signal 9 (Killed)").ok());
  });
  const auto start = Clock::now();
  std::string v;
  const Status get = store->Get("host/2", milliseconds(30000), &v);
  const double waited = SecondsSince(start);
  launcher.join();
  EXPECT_EQ(get.code(), StatusCode::kRemoteError);
  EXPECT_EQ(get.message(), "rank 2 (pid 77) was killed by signal 9 (Killed)");
  EXPECT_LT(waited, 5.0);
  // Every later wait ends the same way, Wait included.
  const Status wait = store->Wait({"host/3"}, milliseconds(30000));
  EXPECT_EQ(wait.code(), StatusCode::kRemoteError);
  EXPECT_THAT(wait.message(), HasSubstr("rank 2 (pid 77)"));
}

TEST(AbortableStore, WithoutAReasonItIsTheStoreItWraps) {
  auto base = NewInMemoryStore();
  auto store = NewAbortableStore(NewPrefixStore(base, "job/"), base, kAbort, milliseconds(20));
  ASSERT_TRUE(base->Set(kAbort, "").ok());  // an empty reason is no reason
  ASSERT_TRUE(store->Set("a", "1").ok());
  std::string v;
  ASSERT_TRUE(store->Get("a", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(base->Get("job/a", milliseconds(0), &v).ok());  // through the prefix
  int64_t n = 0;
  ASSERT_TRUE(store->Add("n", 5, &n).ok());
  EXPECT_EQ(n, 5);
  // A key set during the wait is found in a later slice.
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    ASSERT_TRUE(base->Set("job/late", "x").ok());
  });
  EXPECT_TRUE(store->Wait({"a", "late"}, milliseconds(5000)).ok());
  setter.join();
  // The whole timeout is kept, and the error names the key.
  const auto start = Clock::now();
  const Status missing = store->Get("never", milliseconds(300), &v);
  EXPECT_EQ(missing.code(), StatusCode::kTimeout);
  EXPECT_THAT(missing.message(), HasSubstr("never"));
  EXPECT_THAT(missing.message(), HasSubstr("after 300 ms"));  // the whole wait, not a slice
  EXPECT_GE(SecondsSince(start), 0.28);
  EXPECT_LT(SecondsSince(start), 3.0);
  ASSERT_TRUE(store->Delete("a").ok());
  EXPECT_EQ(base->Get("job/a", milliseconds(0), &v).code(), StatusCode::kTimeout);
}

}  // namespace
}  // namespace hvd
