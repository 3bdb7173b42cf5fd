// Work::OnDone: the completion callback a framework's asynchronous kernel uses
// instead of a thread blocked in Wait. Exactly once, with the final status, on the
// completing thread, or at once on the registering thread when already done; one
// per Work; never lost or doubled when registration races completion.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "runtime/data/work.h"

namespace hvd {
namespace {

using std::chrono::milliseconds;

TEST(WorkOnDoneTest, RunsOnceOnTheCompletingThreadWithTheStatus) {
  Work w("grad");
  int calls = 0;
  Status seen;
  std::thread::id where;
  ASSERT_TRUE(w.OnDone([&](const Status& s) {
    ++calls;
    seen = s;
    where = std::this_thread::get_id();
  }));
  EXPECT_EQ(calls, 0) << "not before completion";
  std::thread::id completer_id;
  std::thread completer([&] {
    completer_id = std::this_thread::get_id();
    w.Complete(Status::Mismatch("tensor 'grad': shapes differ"));
  });
  completer.join();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(where, completer_id);
  EXPECT_EQ(seen.code(), StatusCode::kMismatch);
  EXPECT_EQ(seen.message(), "tensor 'grad': shapes differ");
  w.Complete(Status::OK());  // a second completion is ignored, and so is its callback
  EXPECT_EQ(calls, 1);
}

TEST(WorkOnDoneTest, AlreadyDoneRunsAtOnceOnTheCaller) {
  Work w("done");
  w.Complete(Status::OK());
  int calls = 0;
  std::thread::id where;
  ASSERT_TRUE(w.OnDone([&](const Status& s) {
    ++calls;
    where = std::this_thread::get_id();
    EXPECT_TRUE(s.ok());
  }));
  EXPECT_EQ(calls, 1) << "before OnDone returns";
  EXPECT_EQ(where, std::this_thread::get_id());
}

TEST(WorkOnDoneTest, OneCallbackPerWork) {
  Work w("one");
  int first = 0, second = 0;
  EXPECT_TRUE(w.OnDone([&](const Status&) { ++first; }));
  EXPECT_FALSE(w.OnDone([&](const Status&) { ++second; }));
  w.Complete(Status::OK());
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 0);
  EXPECT_FALSE(w.OnDone([&](const Status&) { ++second; })) << "not after it ran either";
  EXPECT_EQ(second, 0);
}

TEST(WorkOnDoneTest, TheCallbackMayReadItsWorkAndWaitWithoutBlocking) {
  Work w("reads");
  Status waited = Status::Internal("not called");
  bool polled = false;
  w.OnDone([&](const Status&) {
    polled = w.Poll();
    waited = w.Wait(milliseconds(0));  // done: returns at once, on this thread
  });
  w.Complete(Status::Timeout("rank 1 did not answer"));
  EXPECT_TRUE(polled);
  EXPECT_EQ(waited.code(), StatusCode::kTimeout);
}

TEST(WorkOnDoneTest, ABatchRunsEachCallbackAsItsWorkCompletes) {
  Work a("a"), b("b");
  std::vector<std::string> order;
  a.OnDone([&](const Status&) { order.push_back("a:" + std::to_string(b.Poll())); });
  b.OnDone([&](const Status&) { order.push_back("b"); });
  {
    CompletionBatch batch;
    batch.Complete(&a, Status::OK());
    batch.Complete(&b, Status::OK());
  }
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "a:0") << "a's callback ran before b completed";
  EXPECT_EQ(order[1], "b");
}

TEST(WorkOnDoneTest, TheCapturedStateIsReleasedOnceItRan) {
  auto token = std::make_shared<int>(7);
  std::weak_ptr<int> watch = token;
  Work w("captures");
  w.OnDone([token](const Status&) {});
  token.reset();
  EXPECT_FALSE(watch.expired()) << "held until it runs";
  w.Complete(Status::OK());
  EXPECT_TRUE(watch.expired()) << "released after it ran";
}

TEST(WorkOnDoneTest, RegistrationRacingCompletionRunsExactlyOnce) {
  // Each round races OnDone on this thread against Complete on another, landing
  // anywhere around each other; a lost callback shows as 0 calls, a doubled one
  // as 2.
  constexpr int kRounds = 5000;
  int lost = 0, doubled = 0;
  for (int i = 0; i < kRounds; ++i) {
    Work w("race");
    std::atomic<int> calls{0};
    std::atomic<bool> go{false};
    std::thread completer([&] {
      while (!go.load(std::memory_order_acquire)) {
      }
      for (int k = 0; k < i % 13; ++k) std::this_thread::yield();
      w.Complete(Status::OK());
    });
    go.store(true, std::memory_order_release);
    for (int k = 0; k < i % 11; ++k) std::this_thread::yield();
    w.OnDone([&](const Status&) { calls.fetch_add(1); });
    completer.join();
    if (calls.load() == 0) ++lost;
    if (calls.load() > 1) ++doubled;
  }
  EXPECT_EQ(lost, 0);
  EXPECT_EQ(doubled, 0);
}

}  // namespace
}  // namespace hvd
