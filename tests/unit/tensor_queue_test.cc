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
  proto::Response r;
  r.add_names(name);
  TensorQueue::Taken taken;
  q.TakeAll(r.names(), &taken);
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
  proto::RequestList reqs;
  q.PopRequests(&reqs);
  std::vector<std::string> names;
  for (const auto& r : reqs.requests()) names.push_back(r.name());
  return names;
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

TEST(TensorEntryTest, ToRequestCarriesEveryField) {
  TensorEntry e;
  e.name = "layer/w";
  e.type = OpType::kAlltoall;
  e.dtype = DataType::kBFloat16;
  e.reduce_op = ReduceOp::kMax;
  e.shape = {6, 2};
  e.prescale_factor = 0.5;
  e.postscale_factor = 3.0;
  e.root_rank = 1;
  e.device = 2;
  e.splits = {4, 2};
  e.group_id = 77;
  e.group_size = 3;
  // Into a request that held another tensor's (as the queue's reused ones do):
  // nothing of the old one may survive.
  proto::Request r;
  r.set_name("old/longer/name");
  r.add_shape(9);
  r.add_shape(9);
  r.add_shape(9);
  r.add_splits(1);
  r.set_root_rank(7);
  e.ToRequest(5, &r);
  EXPECT_EQ(r.request_rank(), 5);
  EXPECT_EQ(r.type(), proto::ALLTOALL);
  EXPECT_EQ(r.name(), "layer/w");
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kBFloat16));
  EXPECT_EQ(r.reduce_op(), static_cast<int>(ReduceOp::kMax));
  EXPECT_THAT(r.shape(), ElementsAre(6, 2));
  EXPECT_EQ(r.prescale_factor(), 0.5);
  EXPECT_EQ(r.postscale_factor(), 3.0);
  EXPECT_EQ(r.root_rank(), 1);
  EXPECT_EQ(r.device(), 2);
  EXPECT_THAT(r.splits(), ElementsAre(4, 2));
  EXPECT_EQ(r.group_id(), 77);
  EXPECT_EQ(r.group_size(), 3);
}

// ---------------------------------------------------------------- TensorQueue

TEST(TensorQueueTest, EnqueuePopAndTake) {
  TensorQueue q;
  std::vector<TensorEntry> batch;
  batch.push_back(Entry("a", 3));
  batch.push_back(Entry("b", 5));
  auto work_a = batch[0].work;
  ASSERT_TRUE(q.Enqueue(std::move(batch), 2).ok());
  EXPECT_EQ(q.size(), 2u);

  proto::RequestList list;
  q.PopRequests(&list);
  const auto& reqs = list.requests();
  ASSERT_EQ(reqs.size(), 2);
  EXPECT_EQ(reqs[0].name(), "a");
  EXPECT_EQ(reqs[1].name(), "b");
  EXPECT_EQ(reqs[0].request_rank(), 2);
  EXPECT_THAT(reqs[1].shape(), ElementsAre(5));
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
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(q.Enqueue(One(Entry(n, 2)), 0).ok());
  proto::Response r;
  for (const char* n : {"c", "never", "a"}) r.add_names(n);
  TensorQueue::Taken out;
  q.TakeAll(r.names(), &out);
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
  q.TakeAll(r.names(), &out);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out.get(i), nullptr) << "each entry is taken once";
  TensorEntry b;
  EXPECT_TRUE(Take(q, "b", &b));
}

TEST(TensorQueueTest, RequestsComeOutInEnqueueOrderAcrossCalls) {
  TensorQueue q;
  for (const char* n : {"z", "y", "x"}) ASSERT_TRUE(q.Enqueue(One(Entry(n)), 0).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("z", "y", "x"));
  ASSERT_TRUE(q.Enqueue(One(Entry("w")), 0).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("w"));
}

TEST(TensorQueueTest, DuplicateNameInFlightIsRefusedAndNoneOfTheGroupIsAdded) {
  TensorQueue q;
  ASSERT_TRUE(q.Enqueue(One(Entry("a")), 0).ok());
  std::vector<TensorEntry> group;
  group.push_back(Entry("b"));
  group.push_back(Entry("a"));
  group.push_back(Entry("c"));
  Status s = q.Enqueue(std::move(group), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'a'"), HasSubstr("in flight")));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_THAT(PoppedNames(q), ElementsAre("a"));
  TensorEntry out;
  EXPECT_FALSE(Take(q, "b", &out));
  EXPECT_FALSE(Take(q, "c", &out));
  // Still refused after its request was popped: the name is reserved until Take.
  s = q.Enqueue(One(Entry("a")), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
}

TEST(TensorQueueTest, NameRepeatedWithinOneGroupIsRefused) {
  TensorQueue q;
  std::vector<TensorEntry> group;
  group.push_back(Entry("x"));
  group.push_back(Entry("y"));
  group.push_back(Entry("x"));
  Status s = q.Enqueue(std::move(group), 0);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
  EXPECT_EQ(q.size(), 0u);
  EXPECT_TRUE(PoppedNames(q).empty());
}

TEST(TensorQueueTest, NameIsReusableAfterTake) {
  TensorQueue q;
  TensorEntry out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(q.Enqueue(One(Entry("step")), 0).ok()) << "round " << i;
    ASSERT_TRUE(Take(q, "step", &out));
  }
  EXPECT_THAT(PoppedNames(q), ElementsAre("step", "step", "step"));
}

// Taken entries leave their map nodes for later enqueues: a reused node must
// carry only the new entry, and a refused name must not use one up or leave one
// half-filled.
TEST(TensorQueueTest, ReusedNodesHoldOnlyTheNewEntry) {
  TensorQueue q;
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(q.Enqueue(One(Entry(n, 7)), 0).ok());
  TensorEntry out;
  for (const char* n : {"a", "b", "c"}) ASSERT_TRUE(Take(q, n, &out));
  PoppedNames(q);
  ASSERT_TRUE(q.Enqueue(One(Entry("a longer name than the short-string buffer", 3)), 1).ok());
  Status dup = q.Enqueue(One(Entry("a longer name than the short-string buffer", 9)), 1);
  EXPECT_EQ(dup.code(), StatusCode::kInvalidUsage);
  std::vector<TensorEntry> group;
  group.push_back(Entry("g1", 5));
  group.push_back(Entry("g2", 6));
  ASSERT_TRUE(q.Enqueue(std::move(group), 1).ok());
  EXPECT_EQ(q.size(), 3u);
  proto::RequestList reqs;
  q.PopRequests(&reqs);
  ASSERT_EQ(reqs.requests_size(), 3);
  EXPECT_EQ(reqs.requests(0).name(), "a longer name than the short-string buffer");
  EXPECT_THAT(reqs.requests(0).shape(), ElementsAre(3));
  EXPECT_EQ(reqs.requests(0).request_rank(), 1);
  EXPECT_THAT(reqs.requests(2).shape(), ElementsAre(6));
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
  EXPECT_TRUE(q.Enqueue({}, 0).ok());
  EXPECT_EQ(q.size(), 0u);
}

TEST(TensorQueueTest, FailAllCompletesEveryWorkAndEmptiesTheQueue) {
  TensorQueue q;
  std::vector<std::shared_ptr<Work>> works;
  for (const char* n : {"a", "b", "c"}) {
    TensorEntry e = Entry(n);
    works.push_back(e.work);
    ASSERT_TRUE(q.Enqueue(One(std::move(e)), 0).ok());
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
  EXPECT_TRUE(q.Enqueue(One(Entry("a")), 0).ok());
  EXPECT_THAT(PoppedNames(q), ElementsAre("a"));
}

TEST(TensorQueueTest, FailAllCanRefuseNewWork) {
  TensorQueue q;
  ASSERT_TRUE(q.Enqueue(One(Entry("a")), 0).ok());
  q.FailAll(Status::ShutDown("the runtime has shut down"), /*refuse_new=*/true);
  Status s = q.Enqueue(One(Entry("fresh")), 0);
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
  std::vector<proto::Request> popped;
  // A consumer pops while the producers run, as the background thread does.
  std::thread consumer([&] {
    while (true) {
      const bool last = done.load();
      proto::RequestList batch;
      q.PopRequests(&batch);
      popped.insert(popped.end(), batch.requests().begin(), batch.requests().end());
      if (last) break;
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!q.Enqueue(One(Entry("t" + std::to_string(t) + "." + std::to_string(i))), t).ok())
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
  for (const auto& r : popped) {
    names.insert(r.name());
    // Each producer's requests keep their order.
    const int t = r.request_rank();
    const int i = std::stoi(r.name().substr(r.name().find('.') + 1));
    EXPECT_GT(i, last_index[t]) << r.name();
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
        Status s = q.Enqueue(One(Entry("shared." + std::to_string(i))), 0);
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

}  // namespace
}  // namespace hvd
