// Unit tests for runtime/data/tensor_queue.h and runtime/data/work.h: enqueue/pop/take, name
// reservation while in flight, FailAll, Work's wait/poll/complete contract, and
// concurrent enqueues.
#include "runtime/data/tensor_queue.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/data/work.h"

namespace hvd {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using std::chrono::milliseconds;

TensorEntry Entry(const std::string& name, int64_t count = 4) {
  TensorEntry e;
  e.name = name;
  e.shape = {count};
  e.work = std::make_shared<Work>(name);
  return e;
}

// Takes one name's entry, as the loop does for a response (TakeAll).
bool Take(TensorQueue& q, const std::string& name, TensorEntry* out) {
  TensorQueue::Taken taken;
  q.TakeAll({name}, &taken);
  const bool found = taken.get(0) != nullptr;
  if (found) *out = std::move(*taken.get(0));
  q.Recycle(&taken);
  return found;
}

std::vector<TensorEntry> One(TensorEntry e) {
  std::vector<TensorEntry> v;
  v.push_back(std::move(e));
  return v;
}

std::vector<std::string> PoppedNames(TensorQueue& q) {
  std::vector<std::string> names;
  q.PopNew([&](const TensorEntry& e) { names.push_back(e.name); });
  return names;
}

// The new entries' names and shapes, as PopNew shows them.
std::vector<std::pair<std::string, std::vector<int64_t>>> Popped(TensorQueue& q) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  q.PopNew([&](const TensorEntry& e) { out.emplace_back(e.name, e.shape); });
  return out;
}

// ---------------------------------------------------------------- TensorEntry

TEST(TensorEntryTest, NumElements) {
  TensorEntry e;
  EXPECT_EQ(e.NumElements(), 0) << "no shape: nothing to send";
  e.shape = {7};
  EXPECT_EQ(e.NumElements(), 7);
  e.shape = {3, 4, 5};
  EXPECT_EQ(e.NumElements(), 60);
  e.shape = {3, 0, 5};
  EXPECT_EQ(e.NumElements(), 0);
}

// ---------------------------------------------------------------- TensorQueue

TEST(TensorQueueTest, EnqueuePopAndTake) {
  TensorQueue q;
  std::vector<TensorEntry> batch;
  batch.push_back(Entry("a", 3));
  batch.push_back(Entry("b", 5));
  auto work_a = batch[0].work;
  ASSERT_TRUE(q.Enqueue(std::move(batch)).ok());
  EXPECT_EQ(q.size(), 2u);

  const auto popped = Popped(q);
  ASSERT_EQ(popped.size(), 2u);
  EXPECT_EQ(popped[0].first, "a");
  EXPECT_EQ(popped[1].first, "b");
  EXPECT_THAT(popped[1].second, ElementsAre(5));
  EXPECT_TRUE(PoppedNames(q).empty()) << "each request is popped once";
  EXPECT_EQ(q.size(), 2u) << "popping the requests keeps the entries";

  TensorEntry out;
  ASSERT_TRUE(Take(q, "a", &out));
  EXPECT_EQ(out.name, "a");
  EXPECT_THAT(out.shape, ElementsAre(3));
  EXPECT_EQ(out.work, work_a);
  EXPECT_EQ(q.size(), 1u);
  EXPECT_FALSE(Take(q, "a", &out));
  EXPECT_FALSE(Take(q, "never", &out));
  ASSERT_TRUE(Take(q, "b", &out));
  EXPECT_EQ(q.size(), 0u);
}

TEST(TensorQueueTest, TakeAllTakesWhatThisRankHasInResponseOrder) {
  TensorQueue q;
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(q.Enqueue(One(Entry(n, 2))).ok());
  const std::vector<std::string> names = {"c", "never", "a"};
  TensorQueue::Taken out;
  q.TakeAll(names, &out);
  ASSERT_EQ(out.size(), 3);
  ASSERT_NE(out.get(0), nullptr);
  EXPECT_EQ(out.get(1), nullptr);
  ASSERT_NE(out.get(2), nullptr);
  EXPECT_EQ(out.get(0)->name, "c");
  EXPECT_EQ(out.get(2)->name, "a");
  EXPECT_NE(out.get(0)->work, nullptr);
  EXPECT_EQ(q.size(), 1u) << "only b is left";
  std::weak_ptr<Work> c_work = out.get(0)->work;
  q.Recycle(&out);
  EXPECT_EQ(out.size(), 0);
  EXPECT_TRUE(c_work.expired()) << "a recycled node lets go of its Work";
  q.TakeAll(names, &out);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out.get(i), nullptr) << "each entry is taken once";
  TensorEntry b;
  EXPECT_TRUE(Take(q, "b", &b));
}

TEST(TensorQueueTest, RequestsComeOutInEnqueueOrderAcrossCalls) {
  TensorQueue q;
  for (const char* n : {"z", "y", "x"}) ASSERT_TRUE(q.Enqueue(One(Entry(n))).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("z", "y", "x"));
  ASSERT_TRUE(q.Enqueue(One(Entry("w"))).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("w"));
}

TEST(TensorQueueTest, DuplicateNameInFlightIsRefusedAndNoneOfTheGroupIsAdded) {
  TensorQueue q;
  ASSERT_TRUE(q.Enqueue(One(Entry("a"))).ok());
  std::vector<TensorEntry> group;
  group.push_back(Entry("b"));
  group.push_back(Entry("a"));
  group.push_back(Entry("c"));
  Status s = q.Enqueue(std::move(group));
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'a'"), HasSubstr("in flight")));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_THAT(PoppedNames(q), ElementsAre("a"));
  TensorEntry out;
  EXPECT_FALSE(Take(q, "b", &out));
  EXPECT_FALSE(Take(q, "c", &out));
  // Still refused after its request was popped: the name is reserved until Take.
  s = q.Enqueue(One(Entry("a")));
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
}

TEST(TensorQueueTest, NameRepeatedWithinOneGroupIsRefused) {
  TensorQueue q;
  std::vector<TensorEntry> group;
  group.push_back(Entry("x"));
  group.push_back(Entry("y"));
  group.push_back(Entry("x"));
  Status s = q.Enqueue(std::move(group));
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(PoppedNames(q).empty());
}

// A name is free again once taken; an entry taken before it was popped (an error
// response for a tensor enqueued after the cycle began) is never popped, and the
// node it leaves behind is not visited.
TEST(TensorQueueTest, NameIsReusableAfterTakeAndATakenEntryIsNotPopped) {
  TensorQueue q;
  TensorEntry out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(q.Enqueue(One(Entry("step", 10 + i))).ok()) << "round " << i;
    ASSERT_TRUE(Take(q, "step", &out));
  }
  ASSERT_TRUE(q.Enqueue(One(Entry("before", 1))).ok());
  ASSERT_TRUE(q.Enqueue(One(Entry("step", 20))).ok());
  ASSERT_TRUE(q.Enqueue(One(Entry("gone", 2))).ok());
  ASSERT_TRUE(Take(q, "gone", &out));
  ASSERT_TRUE(q.Enqueue(One(Entry("after", 3))).ok());
  const auto popped = Popped(q);
  ASSERT_EQ(popped.size(), 3u);
  EXPECT_EQ(popped[0].first, "before");
  EXPECT_EQ(popped[1].first, "step");
  EXPECT_THAT(popped[1].second, ElementsAre(20));
  EXPECT_EQ(popped[2].first, "after");
  ASSERT_TRUE(Take(q, "step", &out));  // after it was popped: nothing to unlink
  EXPECT_TRUE(PoppedNames(q).empty());
}

// Taken entries leave their map nodes for later enqueues: a reused node must
// carry only the new entry, and a refused name must not use one up or leave one
// half-filled.
TEST(TensorQueueTest, ReusedNodesHoldOnlyTheNewEntry) {
  TensorQueue q;
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(q.Enqueue(One(Entry(n, 7))).ok());
  TensorEntry out;
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(Take(q, n, &out));
  PoppedNames(q);
  ASSERT_TRUE(q.Enqueue(One(Entry("a longer name than the short-string buffer", 3))).ok());
  Status dup = q.Enqueue(One(Entry("a longer name than the short-string buffer", 9)));
  EXPECT_EQ(dup.code(), StatusCode::kInvalidUsage);
  std::vector<TensorEntry> group;
  group.push_back(Entry("g1", 5));
  group.push_back(Entry("g2", 6));
  ASSERT_TRUE(q.Enqueue(std::move(group)).ok());
  EXPECT_EQ(q.size(), 3u);
  const auto popped = Popped(q);
  ASSERT_EQ(popped.size(), 3u);
  EXPECT_EQ(popped[0].first, "a longer name than the short-string buffer");
  EXPECT_THAT(popped[0].second, ElementsAre(3));
  EXPECT_THAT(popped[2].second, ElementsAre(6));
  ASSERT_TRUE(Take(q, "a longer name than the short-string buffer", &out));
  EXPECT_EQ(out.name, "a longer name than the short-string buffer");
  EXPECT_THAT(out.shape, ElementsAre(3));
  ASSERT_TRUE(Take(q, "g1", &out));
  EXPECT_THAT(out.shape, ElementsAre(5));
  EXPECT_FALSE(Take(q, "a", &out)) << "the old entry went with its node's reuse";
  EXPECT_EQ(q.size(), 1u);
}

TEST(TensorQueueTest, EmptyGroupIsFine) {
  TensorQueue q;
  EXPECT_TRUE(q.Enqueue({}).ok());
  EXPECT_EQ(q.size(), 0u);
}

TEST(TensorQueueTest, FailAllCompletesEveryWorkAndEmptiesTheQueue) {
  TensorQueue q;
  std::vector<std::shared_ptr<Work>> works;
  for (const char* n : {"a", "b", "c"}) {
    TensorEntry e = Entry(n);
    works.push_back(e.work);
    ASSERT_TRUE(q.Enqueue(One(std::move(e))).ok());
  }
  TensorEntry taken;
  ASSERT_TRUE(Take(q, "b", &taken));  // already handed to the background thread
  q.FailAll(Status::RemoteError("rank 3 died"), /*refuse_new=*/false);
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(PoppedNames(q).empty()) << "unsent requests are dropped";
  for (int i : {0, 2}) {
    ASSERT_TRUE(works[i]->Poll()) << works[i]->name();
    Status s = works[i]->Wait(milliseconds(0));
    EXPECT_EQ(s.code(), StatusCode::kRemoteError);
    EXPECT_EQ(s.message(), "rank 3 died");
  }
  EXPECT_FALSE(works[1]->Poll()) << "a taken entry is no longer the queue's to fail";
  // Not refusing: new work is accepted, including the failed names.
  EXPECT_TRUE(q.Enqueue(One(Entry("a"))).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("a"));
}

TEST(TensorQueueTest, FailAllCanRefuseNewWork) {
  TensorQueue q;
  ASSERT_TRUE(q.Enqueue(One(Entry("a"))).ok());
  q.FailAll(Status::ShutDown("the runtime has shut down"), /*refuse_new=*/true);
  Status s = q.Enqueue(One(Entry("fresh")));
  EXPECT_EQ(s.code(), StatusCode::kShutDown);
  EXPECT_EQ(s.message(), "the runtime has shut down");
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(PoppedNames(q).empty());
}

TEST(TensorQueueTest, ConcurrentEnqueuesOfDistinctNamesLoseNothing) {
  constexpr int kThreads = 8, kPerThread = 500;
  TensorQueue q;
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};
  std::vector<std::string> popped;
  // A consumer pops while the producers run, as the background thread does.
  std::thread consumer([&] {
    while (true) {
      const bool last = done.load();
      q.PopNew([&](const TensorEntry& e) { popped.push_back(e.name); });
      if (last) break;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!q.Enqueue(One(Entry("t" + std::to_string(t) + "." + std::to_string(i)))).ok())
          ++failures;
      }
    });
  }
  for (auto& p : producers) p.join();
  done = true;
  consumer.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(q.size(), static_cast<size_t>(kThreads * kPerThread));
  ASSERT_EQ(popped.size(), static_cast<size_t>(kThreads * kPerThread));
  std::set<std::string> names;
  std::vector<int> last_index(kThreads, -1);
  for (const auto& name : popped) {
    names.insert(name);
    // Each producer's entries keep their order ("t<producer>.<i>").
    const int t = std::stoi(name.substr(1, name.find('.') - 1));
    const int i = std::stoi(name.substr(name.find('.') + 1));
    EXPECT_GT(i, last_index[t]) << name;
    last_index[t] = i;
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreads * kPerThread));
  TensorEntry out;
  for (const auto& n : names) ASSERT_TRUE(Take(q, n, &out)) << n;
  EXPECT_EQ(q.size(), 0u);
}

TEST(TensorQueueTest, ConcurrentEnqueuesOfOneNameAdmitExactlyOne) {
  TensorQueue q;
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        Status s = q.Enqueue(One(Entry("shared." + std::to_string(i))));
        if (s.ok()) {
          ++admitted;
        } else {
          EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
          ++refused;
        }
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(admitted.load(), 50);
  EXPECT_EQ(refused.load(), 7 * 50);
  EXPECT_EQ(PoppedNames(q).size(), 50u);
}

// ---------------------------------------------------------------- Work

TEST(WorkTest, WaitTimesOutWithInProgress) {
  Work w("grad/7");
  EXPECT_EQ(w.name(), "grad/7");
  EXPECT_FALSE(w.Poll());
  Status s = w.Wait(milliseconds(0));
  EXPECT_EQ(s.code(), StatusCode::kInProgress);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'grad/7'"), HasSubstr("0 ms")));
  const auto start = std::chrono::steady_clock::now();
  s = w.Wait(milliseconds(30));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(30));
  EXPECT_EQ(s.code(), StatusCode::kInProgress);
  EXPECT_THAT(s.message(), HasSubstr("30 ms"));
  EXPECT_FALSE(w.Poll());
}

TEST(WorkTest, CompleteThenWaitReturnsTheStatus) {
  Work ok("a");
  ok.Complete(Status::OK());
  EXPECT_TRUE(ok.Poll());
  EXPECT_TRUE(ok.Wait(milliseconds(0)).ok());
  EXPECT_TRUE(ok.Wait(milliseconds(-1)).ok()) << "negative: wait until done (already done)";
  Work bad("b");
  bad.Complete(Status::Mismatch("tensor 'b': dtype differs"));
  Status s = bad.Wait(milliseconds(10));
  EXPECT_EQ(s.code(), StatusCode::kMismatch);
  EXPECT_EQ(s.message(), "tensor 'b': dtype differs");
}

TEST(WorkTest, FirstCompletionWins) {
  Work w("x");
  w.Complete(Status::Timeout("stalled"));
  w.Complete(Status::OK());
  w.Complete(Status::Internal("late"));
  Status s = w.Wait(milliseconds(0));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(), "stalled");
}

TEST(WorkTest, WaitWakesWhenAnotherThreadCompletes) {
  for (int64_t timeout_ms : {int64_t{10000}, int64_t{-1}}) {
    SCOPED_TRACE(timeout_ms);
    auto w = std::make_shared<Work>("y");
    auto result = std::make_shared<std::promise<Status>>();
    auto future = result->get_future();
    // The waiter owns a reference, so a waiter that never wakes can be left behind
    // (detached) and the test fails instead of hanging.
    std::thread waiter([w, timeout_ms, result] { result->set_value(w->Wait(milliseconds(timeout_ms))); });
    std::this_thread::sleep_for(milliseconds(20));
    const auto start = std::chrono::steady_clock::now();
    w->Complete(Status::OK());
    if (future.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
      ADD_FAILURE() << "Wait was not woken by Complete";
      waiter.detach();
      continue;
    }
    EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
    EXPECT_TRUE(future.get().ok());
    waiter.join();
  }
}

TEST(WorkTest, ManyWaitersAllWake) {
  Work w("z");
  std::atomic<int> woke{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < 6; ++i)
    waiters.emplace_back([&] {
      if (w.Wait(milliseconds(5000)).code() == StatusCode::kShutDown) ++woke;
    });
  std::this_thread::sleep_for(milliseconds(10));
  const auto start = std::chrono::steady_clock::now();
  w.Complete(Status::ShutDown("bye"));
  for (auto& t : waiters) t.join();
  EXPECT_EQ(woke.load(), 6);
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000))
      << "every waiter is woken by Complete, not by its timeout";
}

TEST(WorkTest, CompletionRacingTheWaitersSleepIsNeverLost) {
  // Complete takes no lock when nobody sleeps; a waiter that is just going to
  // sleep must still be woken. Each round races one Complete against a waiter
  // past its spin; a lost wake-up shows as the 10 s timeout, not a hang.
  constexpr int kRounds = 2000;
  int lost = 0;
  for (int i = 0; i < kRounds && lost == 0; ++i) {
    Work w("race");
    std::thread completer([&] {
      // Land anywhere around the end of the waiter's 20 us spin.
      const auto at = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 40);
      while (std::chrono::steady_clock::now() < at) {
      }
      w.Complete(Status::OK());
    });
    if (!w.Wait(milliseconds(10000)).ok()) ++lost;
    completer.join();
  }
  EXPECT_EQ(lost, 0);
}

TEST(WorkTest, WaiterAndCompleterOnOneCpuNeverLoseTheWakeUp) {
  // Bound to one CPU, Wait sleeps without spinning (its completer shares the CPU);
  // the same race against Complete, now with both threads on that CPU.
  cpu_set_t one;
  CPU_ZERO(&one);
  ASSERT_EQ(sched_getaffinity(0, sizeof(one), &one), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &one)) ++cpu;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  int lost = -1;
  std::thread([&] {
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) != 0) return;
    lost = 0;
    for (int i = 0; i < 500 && lost == 0; ++i) {
      Work w("pinned");
      std::thread completer([&] {  // inherits the one CPU
        for (int k = 0; k < i % 7; ++k) std::this_thread::yield();
        w.Complete(Status::OK());
      });
      if (!w.Wait(milliseconds(10000)).ok()) ++lost;
      completer.join();
    }
  }).join();
  EXPECT_EQ(lost, 0) << "-1: could not pin the thread";
}

TEST(WorkTest, ResultsDefaults) {
  Work w("r");
  EXPECT_TRUE(w.result().empty());
  EXPECT_TRUE(w.result_shape().empty());
  EXPECT_TRUE(w.received_splits().empty());
  EXPECT_EQ(w.scalar_result(), -1);
  w.result().push_back(3);
  w.scalar_result() = 2;
  EXPECT_THAT(w.result(), ElementsAre(3));
  EXPECT_EQ(w.scalar_result(), 2);
}

TEST(WorkTest, ResultsAreAlignedForFrameworkTensors) {
  // Small (heap) and large (mmap) sizes alike: a framework wraps them as its own
  // tensors, which assume kResultAlignment.
  for (size_t bytes : {1, 17, 4096, 1 << 20, (1 << 20) + 3}) {
    Work w("aligned");
    w.result().resize(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.result().data()) % kResultAlignment, 0u) << bytes;
    w.result().resize(bytes * 3);  // a reallocation keeps it
    EXPECT_EQ(reinterpret_cast<uintptr_t>(w.result().data()) % kResultAlignment, 0u) << bytes;
  }
}

// A batch's Works are done as soon as it completes them; a caller asleep on the
// first is woken only when the batch wakes, and then finds every one done, so a
// loop over a step's handles sleeps once, not once per tensor.
TEST(CompletionBatchTest, ASleeperWokenByTheBatchFindsEveryWorkDone) {
  constexpr int kWorks = 50;
  std::vector<std::shared_ptr<Work>> works;
  for (int i = 0; i < kWorks; ++i) works.push_back(std::make_shared<Work>("t" + std::to_string(i)));
  std::atomic<int> done_when_woken{-1};
  std::thread waiter([&] {
    EXPECT_TRUE(works[0]->Wait(milliseconds(-1)).ok());
    int done = 0;
    for (const auto& w : works) done += w->Poll() ? 1 : 0;
    done_when_woken = done;
  });
  std::this_thread::sleep_for(milliseconds(50));  // the waiter is asleep by now
  {
    CompletionBatch batch;
    batch.Complete(works[0].get(), Status::OK());
    EXPECT_TRUE(works[0]->Poll());
    std::this_thread::sleep_for(milliseconds(20));  // a woken waiter would look now
    for (int i = 1; i < kWorks; ++i) batch.Complete(works[i].get(), Status::OK());
  }  // wakes the waiter
  waiter.join();
  EXPECT_EQ(done_when_woken.load(), kWorks);
}

TEST(CompletionBatchTest, StatusesAreKeptAndTheFirstCompletionWins) {
  Work a("a"), b("b");
  b.Complete(Status::Timeout("earlier"));
  {
    CompletionBatch batch;
    batch.Complete(&a, Status::Mismatch("shapes differ"));
    batch.Complete(&b, Status::OK());
    batch.Wake();
    batch.Wake();  // nothing left to wake
  }
  EXPECT_EQ(a.Wait(milliseconds(0)).code(), StatusCode::kMismatch);
  EXPECT_EQ(a.Wait(milliseconds(0)).message(), "shapes differ");
  EXPECT_EQ(b.Wait(milliseconds(0)).code(), StatusCode::kTimeout);
}

}  // namespace
}  // namespace hvd
