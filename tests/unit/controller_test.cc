// Unit tests for controller/controller.h over a fake in-process ControlChannel: N
// Controllers connected through shared queues, each rank's Cycle on its own thread.
//
// Time is passed to Cycle explicitly, so the stall inspector is tested with synthetic
// time points and no sleeping.
#include "controller/controller.h"

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/types.h"
#include "tests/unit/controller_fakes.h"

namespace hvd {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using std::chrono::milliseconds;

using fakes::Allreduce;
using fakes::At;
using fakes::FakeChannel;
using fakes::FakeJob;
using fakes::Hub;
using fakes::Join;
using fakes::Lists;
using fakes::NamesOf;
using fakes::Options;

// ---------------------------------------------------------------- negotiation

TEST(ControllerTest, TensorSubmittedInDifferentCyclesYieldsTheSameResponsesEverywhere) {
  FakeJob job(3, Options());
  proto::ResponseList out = job.Cycle(Lists(3).Add(0, Allreduce("a", 4)).Add(2, Allreduce("b", 2)).lists, At(0));
  EXPECT_EQ(out.responses_size(), 0) << "nothing is ready yet";
  EXPECT_FALSE(out.shutdown());

  out = job.Cycle(Lists(3).Add(1, Allreduce("a", 4)).Add(2, Allreduce("a", 4)).Add(0, Allreduce("b", 2)).lists,
                  At(1));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("a"));
  EXPECT_THAT(out.responses(0).counts(), ElementsAre(4));

  out = job.Cycle(Lists(3).lists, At(2));
  EXPECT_EQ(out.responses_size(), 0) << "'b' still waits on rank 1";

  out = job.Cycle(Lists(3).Add(1, Allreduce("b", 2)).lists, At(3));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("b"));
}

TEST(ControllerTest, WaitingOnOthersWhileSentRequestsAreNotReadyEverywhere) {
  FakeJob job(2, Options());
  job.Cycle(Lists(2).Add(0, Allreduce("a", 4)).lists, At(0));
  EXPECT_TRUE(job.controller(0).waiting_on_others()) << "rank 0 sent 'a', rank 1 did not";
  EXPECT_FALSE(job.controller(1).waiting_on_others());
  job.Cycle(Lists(2).Add(1, Allreduce("a", 4)).lists, At(1));
  EXPECT_FALSE(job.controller(0).waiting_on_others()) << "'a' ran";
  EXPECT_FALSE(job.controller(1).waiting_on_others());
  // The same once 'a' travels as a cache bit.
  job.Cycle(Lists(2).Add(1, Allreduce("a", 4)).lists, At(2));
  EXPECT_FALSE(job.controller(0).waiting_on_others());
  EXPECT_TRUE(job.controller(1).waiting_on_others()) << "rank 1 sent 'a' by bit";
  ASSERT_EQ(job.controller(1).stats().cache_bits, 1);
  job.Cycle(Lists(2).Add(0, Allreduce("a", 4)).lists, At(3));
  EXPECT_FALSE(job.controller(0).waiting_on_others());
  EXPECT_FALSE(job.controller(1).waiting_on_others());
}

TEST(ControllerTest, TensorsReadyInOneCycleAreFusedOnEveryRank) {
  FakeJob job(2, Options());
  Lists l(2);
  for (int r = 0; r < 2; ++r) l.Add(r, Allreduce("c", 3)).Add(r, Allreduce("d", 5));
  proto::ResponseList out = job.Cycle(l.lists, At(0));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("c", "d"));
  EXPECT_THAT(out.responses(0).counts(), ElementsAre(3, 5));
}

TEST(ControllerTest, FusionThresholdZeroKeepsResponsesApart) {
  ControllerOptions o = Options();
  o.fusion_threshold = 0;
  FakeJob job(2, o);
  Lists l(2);
  for (int r = 0; r < 2; ++r) l.Add(r, Allreduce("c", 3)).Add(r, Allreduce("d", 5));
  proto::ResponseList out = job.Cycle(l.lists, At(0));
  ASSERT_EQ(out.responses_size(), 2);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("c"));
  EXPECT_THAT(NamesOf(out.responses(1)), ElementsAre("d"));
}

TEST(ControllerTest, ReadyOrderFollowsCompletionNotSubmission) {
  FakeJob job(2, Options());
  job.Cycle(Lists(2).Add(0, Allreduce("first", 1)).Add(0, Allreduce("second", 1)).lists, At(0));
  proto::ResponseList out = job.Cycle(Lists(2).Add(1, Allreduce("second", 1)).lists, At(1));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("second"));
  out = job.Cycle(Lists(2).Add(1, Allreduce("first", 1)).lists, At(2));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("first"));
}

TEST(ControllerTest, SingleRank) {
  FakeJob job(1, Options());
  proto::ResponseList out = job.Cycle(Lists(1).Add(0, Allreduce("solo", 7)).lists, At(0));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("solo"));
}

TEST(ControllerTest, MismatchYieldsAnErrorResponseOnEveryRank) {
  FakeJob job(3, Options());
  proto::ResponseList out = job.Cycle(
      Lists(3).Add(0, Allreduce("w", 100)).Add(1, Allreduce("w", 99)).Add(2, Allreduce("w", 100)).lists, At(0));
  ASSERT_EQ(out.responses_size(), 1);
  const proto::Response& r = out.responses(0);
  EXPECT_EQ(r.type(), proto::RESPONSE_ERROR);
  EXPECT_EQ(r.error_code(), static_cast<int>(StatusCode::kMismatch));
  EXPECT_THAT(NamesOf(r), ElementsAre("w"));
  EXPECT_THAT(r.error_message(),
              AllOf(HasSubstr("'w'"), HasSubstr("element count"), HasSubstr("ranks 0, 2 have 100; rank 1 has 99")));
  EXPECT_EQ(out.abort_code(), 0) << "a mismatch fails the tensor, not the job";
  // The job keeps serving.
  Lists next(3);
  for (int rk = 0; rk < 3; ++rk) next.Add(rk, Allreduce("w", 5));
  out = job.Cycle(next.lists, At(1));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_ALLREDUCE);
}

TEST(ControllerTest, OnReadyReportsTheLastRankAndItsLag) {
  std::vector<std::tuple<std::string, int, Clock::duration>> seen;
  ControllerOptions o = Options();
  o.on_ready = [&](const std::string& name, int last_rank, Clock::duration lag) {
    seen.emplace_back(name, last_rank, lag);
  };
  FakeJob job(3, o);
  job.Cycle(Lists(3).Add(0, Allreduce("x", 1)).Add(2, Allreduce("x", 1)).lists, At(0));
  EXPECT_TRUE(seen.empty());
  job.Cycle(Lists(3).Add(1, Allreduce("x", 1)).lists, At(40));
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(std::get<0>(seen[0]), "x");
  EXPECT_EQ(std::get<1>(seen[0]), 1);
  EXPECT_EQ(std::get<2>(seen[0]), milliseconds(40));
}

// The coordinator reports, for a cached tensor too, when each rank first sent it,
// across cycles, and starts afresh for the tensor's next step.
TEST(ControllerTest, OnArrivalsGivesEachRanksFirstCycleForCachedTensors) {
  struct Seen {
    std::string name;
    std::vector<Clock::time_point> arrivals;  // each rank's, when given
    Clock::time_point first, last;
    int last_rank;
    Clock::time_point ready;
    bool cached;
  };
  std::vector<Seen> seen;
  ControllerOptions o = Options();
  o.cache_capacity = 16;
  o.on_arrivals = [&](const std::string& name, OpType, const Arrivals& a, Clock::time_point ready,
                      bool cached) {
    seen.push_back({name, a.each ? *a.each : std::vector<Clock::time_point>{}, a.first, a.last,
                    a.last_rank, ready, cached});
  };
  FakeJob job(3, o);
  Lists all = Lists(3).Add(0, Allreduce("x", 4)).Add(1, Allreduce("x", 4)).Add(2, Allreduce("x", 4));
  job.Cycle(all.lists, At(0));  // full path; x enters the cache
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].cached);

  // Next step: ranks 0 and 2 send x at 10 ms, rank 1 only at 30 ms.
  proto::ResponseList out =
      job.Cycle(Lists(3).Add(0, Allreduce("x", 4)).Add(2, Allreduce("x", 4)).lists, At(10));
  EXPECT_EQ(out.responses_size(), 0);
  EXPECT_EQ(seen.size(), 1u);
  out = job.Cycle(Lists(3).Add(1, Allreduce("x", 4)).lists, At(30));
  ASSERT_EQ(out.responses_size(), 1);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].name, "x");
  EXPECT_TRUE(seen[1].cached);
  EXPECT_EQ(seen[1].arrivals, (std::vector<Clock::time_point>{At(10), At(30), At(10)}));
  EXPECT_EQ(seen[1].ready, At(30));

  // The step after: every rank at 50 ms, with nothing left over from the last one
  // (the summary alone: nobody held it back).
  out = job.Cycle(all.lists, At(50));
  ASSERT_EQ(out.responses_size(), 1);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[2].cached);
  EXPECT_TRUE(seen[2].arrivals.empty());
  EXPECT_EQ(seen[2].first, At(50));
  EXPECT_EQ(seen[2].last, At(50));
  EXPECT_EQ(seen[2].last_rank, -1);
}

// The timeline names the negotiation after the collective (NEGOTIATE_ALLGATHER), on
// the full path and from the cache alike.
TEST(ControllerTest, OnArrivalsNamesTheCollective) {
  std::vector<std::pair<OpType, bool>> seen;
  ControllerOptions o = Options();
  o.cache_capacity = 16;
  o.on_arrivals = [&](const std::string&, OpType op, const Arrivals&, Clock::time_point,
                      bool cached) { seen.push_back({op, cached}); };
  FakeJob job(2, o);
  proto::Request gather = Allreduce("g", 4);
  gather.set_type(proto::ALLGATHER);
  for (int step = 0; step < 2; ++step) {
    const proto::ResponseList out =
        job.Cycle(Lists(2).Add(0, gather).Add(1, gather).lists, At(10 * step));
    ASSERT_EQ(out.responses_size(), 1);
  }
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], std::make_pair(OpType::kAllgather, false));
  EXPECT_EQ(seen[1], std::make_pair(OpType::kAllgather, true));
}

// ---------------------------------------------------------------- errors and abort

TEST(ControllerTest, ARanksOwnErrorAbortsTheJobNamingThatRank) {
  FakeJob job(3, Options());
  std::vector<proto::RequestList> lists = Lists(3).Add(0, Allreduce("a", 1)).lists;
  lists[2].set_error_code(static_cast<int>(StatusCode::kRemoteError));
  lists[2].set_error_message("gloo: connection reset by peer 10.0.0.3");
  proto::ResponseList out = job.Cycle(lists, At(0));
  EXPECT_EQ(out.abort_code(), static_cast<int>(StatusCode::kRemoteError));
  EXPECT_THAT(out.abort_message(), AllOf(HasSubstr("rank 2"), HasSubstr("connection reset by peer 10.0.0.3")));
  EXPECT_EQ(out.responses_size(), 0);
}

TEST(ControllerTest, WhenSeveralRanksReportErrorsTheLowestRankWins) {
  FakeJob job(4, Options());
  std::vector<proto::RequestList> lists = Lists(4).lists;
  lists[3].set_error_code(static_cast<int>(StatusCode::kTimeout));
  lists[3].set_error_message("three");
  lists[1].set_error_code(static_cast<int>(StatusCode::kInternal));
  lists[1].set_error_message("one");
  proto::ResponseList out = job.Cycle(lists, At(0));
  EXPECT_EQ(out.abort_code(), static_cast<int>(StatusCode::kInternal));
  EXPECT_THAT(out.abort_message(), AllOf(HasSubstr("rank 1"), HasSubstr("one")));
}

TEST(ControllerTest, CoordinatorReportsAMalformedRequestListNamingTheRank) {
  FakeJob job(3, Options());
  job.channel(2).corrupt = [](const std::string&) { return std::string("\x0a\xff\xff\xff\x0f", 5); };
  std::vector<proto::ResponseList> out;
  std::vector<Status> status = job.TryCycle(Lists(3).lists, At(0), &out);
  EXPECT_EQ(status[0].code(), StatusCode::kInternal);
  EXPECT_THAT(status[0].message(), AllOf(HasSubstr("malformed"), HasSubstr("rank 2")));
}

TEST(ControllerTest, CoordinatorThatLosesARankBroadcastsAnAbortToTheOthers) {
  FakeJob job(3, Options());
  job.hub().Lose(2);
  std::vector<proto::ResponseList> out;
  std::vector<Status> status = job.TryCycle(Lists(3).Add(1, Allreduce("a", 1)).lists, At(0), &out, {2});
  EXPECT_EQ(status[0].code(), StatusCode::kRemoteError);
  EXPECT_THAT(status[0].message(), HasSubstr("rank 2"));
  ASSERT_TRUE(status[1].ok()) << status[1].ToString();
  EXPECT_EQ(out[1].abort_code(), static_cast<int>(StatusCode::kRemoteError));
  EXPECT_THAT(out[1].abort_message(), HasSubstr("rank 2"));
}

// Regression (fixed in 58652da): a non-UTF-8 tensor name made the coordinator's parse
// fail, so rank 0's Cycle returned "malformed request list" and the job stopped.
TEST(ControllerTest, NonUtf8TensorNameIsNegotiated) {
  FakeJob job(2, Options());
  Lists l(2);
  for (int r = 0; r < 2; ++r) l.Add(r, Allreduce("caf\xe9", 1));
  std::vector<proto::ResponseList> out;
  std::vector<Status> status = job.TryCycle(l.lists, At(0), &out);
  for (int r = 0; r < 2; ++r) {
    EXPECT_TRUE(status[r].ok()) << "rank " << r << ": " << status[r].ToString();
    ASSERT_EQ(out[r].responses_size(), 1);
    EXPECT_THAT(NamesOf(out[r].responses(0)), ElementsAre("caf\xe9"));
  }
}

// ---------------------------------------------------------------- shutdown

TEST(ControllerTest, ShutdownOnlyWhenEveryRankHasAsked) {
  FakeJob job(3, Options());
  std::vector<proto::RequestList> lists = Lists(3).lists;
  lists[0].set_shutdown(true);
  EXPECT_FALSE(job.Cycle(lists, At(0)).shutdown());
  lists = Lists(3).lists;
  lists[1].set_shutdown(true);  // rank 0 asked last cycle; that is remembered
  EXPECT_FALSE(job.Cycle(lists, At(1)).shutdown());
  EXPECT_FALSE(job.Cycle(Lists(3).lists, At(2)).shutdown());
  lists = Lists(3).lists;
  lists[2].set_shutdown(true);
  EXPECT_TRUE(job.Cycle(lists, At(3)).shutdown());
}

TEST(ControllerTest, TensorsWaitingOnARankThatShutDownFailEverywhere) {
  FakeJob job(3, Options());
  job.Cycle(Lists(3).Add(1, Allreduce("x", 1)).Add(2, Allreduce("x", 1)).Add(0, Allreduce("y", 1)).lists, At(0));
  std::vector<proto::RequestList> lists = Lists(3).lists;
  lists[0].set_shutdown(true);
  proto::ResponseList out = job.Cycle(lists, At(1));
  EXPECT_FALSE(out.shutdown());
  ASSERT_EQ(out.responses_size(), 1) << out.DebugString();
  const proto::Response& r = out.responses(0);
  EXPECT_EQ(r.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(NamesOf(r), ElementsAre("x")) << "'y' has rank 0 and may still complete";
  EXPECT_EQ(r.error_code(), static_cast<int>(StatusCode::kShutDown));
  EXPECT_THAT(r.error_message(), AllOf(HasSubstr("'x'"), HasSubstr("rank 0 has shut down")));
  // A tensor submitted later without rank 0 fails in the cycle it appears.
  out = job.Cycle(Lists(3).Add(1, Allreduce("z", 1)).lists, At(2));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("z"));
  EXPECT_EQ(out.responses(0).error_code(), static_cast<int>(StatusCode::kShutDown));
}

// ---------------------------------------------------------------- join

TEST(ControllerTest, JoinedRankStandsInForAllreduceAndJoinCompletesLast) {
  FakeJob job(2, Options());
  proto::ResponseList out = job.Cycle(Lists(2).Add(0, Allreduce("x", 4)).Add(1, Join()).lists, At(0));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_THAT(out.responses(0).joined_ranks(), ElementsAre(1));
  out = job.Cycle(Lists(2).Add(0, Allreduce("y", 4)).Add(0, Join()).lists, At(1));
  ASSERT_EQ(out.responses_size(), 2);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("y"));
  EXPECT_EQ(out.responses(1).type(), proto::RESPONSE_JOIN);
  EXPECT_EQ(out.responses(1).root_rank(), 0) << "the last rank to join";
  // After the join completes, an allreduce needs every rank again.
  out = job.Cycle(Lists(2).Add(0, Allreduce("x", 4)).lists, At(2));
  EXPECT_EQ(out.responses_size(), 0);
}

// ---------------------------------------------------------------- stall inspector

// Captures what the controllers log (only the coordinator does).
struct LogCapture {
  std::mutex mu;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(m);
    };
  }
  std::vector<std::string> Take() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<std::string> out;
    out.swap(lines);
    return out;
  }
};

// Every rank submits `prefix`0 .. `prefix`(n-1), 4 elements each.
Lists Everyone(int size, const std::string& prefix, int n) {
  Lists l(size);
  for (int r = 0; r < size; ++r)
    for (int i = 0; i < n; ++i) l.Add(r, Allreduce(prefix + std::to_string(i), 4));
  return l;
}

// Options with a response cache of `capacity` entries whose warnings go to `log`.
ControllerOptions CacheOptions(int64_t capacity, LogCapture& log) {
  ControllerOptions o = Options();
  o.cache_capacity = capacity;
  o.log = log.Sink();
  return o;
}

// The fused plan of a step's cache hits is kept while the same slots hit; a slot
// that another tensor took over in between must not run with the old plan.
TEST(ControllerTest, CachedStepsKeepTheirPlanOnlyWhileTheSlotsHoldTheSameTensors) {
  ControllerOptions o = Options();
  o.cache_capacity = 2;
  FakeJob job(2, o);
  auto both = [](std::vector<proto::Request> reqs) {
    Lists l(2);
    for (int r = 0; r < 2; ++r)
      for (const auto& q : reqs) l.Add(r, q);
    return l.lists;
  };
  job.Cycle(both({Allreduce("a", 4), Allreduce("b", 2)}), At(0));  // a in slot 0, b in 1
  proto::ResponseList out = job.Cycle(both({Allreduce("a", 4), Allreduce("b", 2)}), At(1));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(NamesOf(out.responses(0)), (std::vector<std::string>{"a", "b"}));
  // Slots 0 and 1 hit again, and c, new, evicts a (touched before b) from slot 0.
  out = job.Cycle(both({Allreduce("a", 4), Allreduce("b", 2), Allreduce("c", 8)}), At(2));
  ASSERT_EQ(out.responses_size(), 2);
  EXPECT_EQ(NamesOf(out.responses(0)), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(NamesOf(out.responses(1)), (std::vector<std::string>{"c"}));
  // The same two slots hit, now holding c and b.
  for (int i = 0; i < 2; ++i) {
    out = job.Cycle(both({Allreduce("b", 2), Allreduce("c", 8)}), At(3 + i));
    ASSERT_EQ(out.responses_size(), 1) << i;
    EXPECT_EQ(NamesOf(out.responses(0)), (std::vector<std::string>{"c", "b"})) << i;
    EXPECT_THAT(out.responses(0).counts(), ElementsAre(8, 2)) << i;
  }
  EXPECT_EQ(job.controller(1).stats().cache_hits, 8);
}

// Between two steps come cycles without hits (idle ones, a barrier's) and other
// cached tensors (a metric's all-reduce): the plan of the step's hits survives
// them instead of being rebuilt tensor by tensor every step.
TEST(ControllerTest, AStepsPlanSurvivesTheCyclesBetweenSteps) {
  FakeJob job(2, Options());
  const Lists step = Everyone(2, "t", 50);
  const Lists metric = Everyone(2, "loss", 1);
  Lists barrier(2);
  for (int r = 0; r < 2; ++r) {
    proto::Request b;
    b.set_type(proto::BARRIER);
    b.set_name("barrier");
    b.set_device(-1);
    barrier.Add(r, b);
  }
  job.Cycle(step.lists, At(0));    // negotiated in full, cached
  job.Cycle(metric.lists, At(1));  // the same
  for (int i = 0; i < 4; ++i) {
    const int t = 2 + 4 * i;
    proto::ResponseList out = job.Cycle(step.lists, At(t));
    ASSERT_EQ(out.responses_size(), 1) << i;
    EXPECT_EQ(out.responses(0).names_size(), 50) << i;
    EXPECT_EQ(out.responses(0).names(49), "t49") << i;
    out = job.Cycle(metric.lists, At(t + 1));
    ASSERT_EQ(out.responses_size(), 1) << i;
    EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("loss0")) << i;
    EXPECT_EQ(job.Cycle(Lists(2).lists, At(t + 2)).responses_size(), 0) << i;
    out = job.Cycle(barrier.lists, At(t + 3));
    ASSERT_EQ(out.responses_size(), 1) << i;
    EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_BARRIER) << i;
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(job.controller(r).stats().cache_hits, 4 * 51) << "rank " << r;
    EXPECT_EQ(job.controller(r).stats().hit_plans, 2) << "rank " << r << ": one per set of hits";
  }
}

// The runtime's fast path: a request the cache holds, sent as its bit before the
// cycle (CachedRequest, then SendAsCacheBit) instead of in the list, runs exactly as
// if it had been in the list; while its bit is pending the fast path is closed to
// it, and a name the cache does not hold never has it.
TEST(ControllerTest, ARequestSentAsItsCacheBitBeforeTheCycleRunsAsIfItWereListed) {
  FakeJob job(2, Options());
  job.Cycle(Everyone(2, "t", 3).lists, At(0));  // negotiated in full, cached
  uint32_t index = 0;
  EXPECT_EQ(job.controller(0).CachedRequest("new", &index), nullptr);
  for (int step = 0; step < 3; ++step) {
    // Rank 0 sends t0 and t2 by the fast path, t1 in its list; rank 1 lists all three.
    Lists lists(2);
    lists.Add(0, Allreduce("t1", 4));
    for (const char* name : {"t0", "t2"}) {
      const proto::Request* cached = job.controller(0).CachedRequest(name, &index);
      ASSERT_NE(cached, nullptr) << name;
      EXPECT_EQ(cached->name(), name);
      EXPECT_TRUE(ResponseCache::SameParameters(*cached, Allreduce(name, 4))) << name;
      job.controller(0).SendAsCacheBit(index);
      EXPECT_EQ(job.controller(0).CachedRequest(name, &index), nullptr) << name << " is pending";
    }
    for (int i = 0; i < 3; ++i) lists.Add(1, Allreduce("t" + std::to_string(i), 4));
    proto::ResponseList out = job.Cycle(lists.lists, At(1 + step));
    ASSERT_EQ(out.responses_size(), 1) << step;
    EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("t0", "t1", "t2")) << step;
    EXPECT_NE(job.controller(0).CachedRequest("t0", &index), nullptr) << "t0 ran";
    EXPECT_FALSE(job.controller(0).waiting_on_others());
  }
  // Sent by the fast path only on rank 0: it waits for rank 1, then runs.
  ASSERT_NE(job.controller(0).CachedRequest("t0", &index), nullptr);
  job.controller(0).SendAsCacheBit(index);
  EXPECT_EQ(job.Cycle(Lists(2).lists, At(10)).responses_size(), 0);
  EXPECT_TRUE(job.controller(0).waiting_on_others());
  proto::ResponseList out = job.Cycle(Lists(2).Add(1, Allreduce("t0", 4)).lists, At(11));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_THAT(NamesOf(out.responses(0)), ElementsAre("t0"));
  EXPECT_EQ(job.controller(0).stats().cache_bits, 3 * 3 + 1);
  EXPECT_EQ(job.controller(0).stats().full_requests, 3);
}

TEST(ControllerTest, ACacheSmallerThanTheStepWarnsOnceFromTheCoordinatorWithASize) {
  LogCapture log;
  const ControllerOptions o = CacheOptions(8, log);
  FakeJob job(2, o);
  const Lists step = Everyone(2, "t", 12);
  job.Cycle(step.lists, At(0));  // all 12 in full; t0..t3 are evicted
  EXPECT_THAT(log.Take(), IsEmpty()) << "no entry has come back yet";
  job.Cycle(step.lists, At(10));  // t0..t3 come back (4 refills) and evict others
  std::vector<std::string> lines = log.Take();
  ASSERT_EQ(lines.size(), 1u) << "one warning, from rank 0 only";
  EXPECT_THAT(lines[0], AllOf(HasSubstr("holds 8 tensors (HVD_CACHE_CAPACITY)"),
                              HasSubstr("uses about 12"), HasSubstr("4 tensors were negotiated in full again"),
                              HasSubstr("Set HVD_CACHE_CAPACITY=16 or more")));
  for (int i = 0; i < 3; ++i) job.Cycle(step.lists, At(20 + 10 * i));
  EXPECT_THAT(log.Take(), IsEmpty()) << "said once";
  EXPECT_GE(job.controller(0).stats().cache_refills, 4 * 4);
  EXPECT_EQ(job.controller(1).stats().cache_refills, job.controller(0).stats().cache_refills)
      << "every rank's cache makes the same puts";
}

TEST(ControllerTest, NoCacheWarningWhenTheStepFitsOrItsNamesNeverComeBack) {
  LogCapture log;
  const ControllerOptions o = CacheOptions(8, log);
  {
    FakeJob job(2, o);
    for (int i = 0; i < 5; ++i) job.Cycle(Everyone(2, "t", 8).lists, At(10 * i));  // fits exactly
    EXPECT_EQ(job.controller(0).stats().cache_refills, 0);
    EXPECT_EQ(job.controller(0).stats().cache_hits, 4 * 8);
  }
  {
    FakeJob job(2, o);  // new names every step: evictions, but nothing to gain from a bigger cache
    for (int i = 0; i < 5; ++i) job.Cycle(Everyone(2, "step" + std::to_string(i) + ".", 6).lists, At(10 * i));
    EXPECT_EQ(job.controller(0).stats().cache_refills, 0);
  }
  EXPECT_THAT(log.Take(), IsEmpty());
}

TEST(ControllerTest, AFewEntriesComingBackAreBelowTheCacheWarning) {
  LogCapture log;
  const ControllerOptions o = CacheOptions(64, log);  // the warning needs a sixteenth of the cache (4) in one cycle
  FakeJob job(2, o);
  job.Cycle(Everyone(2, "s", 64).lists, At(0));
  job.Cycle(Everyone(2, "x", 3).lists, At(10));  // evicts s0..s2
  job.Cycle(Everyone(2, "s", 3).lists, At(20));  // a rarely used s0..s2 come back
  EXPECT_EQ(job.controller(0).stats().cache_refills, 3);
  EXPECT_THAT(log.Take(), IsEmpty());
  Lists back(2);  // s3..s5, which s0..s2 evicted, come back too
  for (int r = 0; r < 2; ++r)
    for (const char* n : {"s3", "s4", "s5"}) back.Add(r, Allreduce(n, 4));
  job.Cycle(back.lists, At(30));
  EXPECT_EQ(job.controller(0).stats().cache_refills, 6);
  EXPECT_THAT(log.Take(), IsEmpty()) << "3 refills again, still below 4";
}

TEST(ControllerTest, StallInspectorLogsPartiallySubmittedTensors) {
  LogCapture log;
  ControllerOptions o = Options();
  o.stall_check = milliseconds(50);
  o.log = log.Sink();
  FakeJob job(3, o);
  job.Cycle(Lists(3).Add(0, Allreduce("s", 1)).Add(2, Allreduce("s", 1)).lists, At(0));
  job.Cycle(Lists(3).lists, At(20));
  EXPECT_THAT(log.Take(), IsEmpty()) << "not stalled yet";
  proto::ResponseList out = job.Cycle(Lists(3).lists, At(70));
  EXPECT_EQ(out.responses_size(), 0) << "stall_check only warns";
  std::vector<std::string> lines = log.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], AllOf(HasSubstr("'s'"), HasSubstr("submitted by ranks [0, 2]"), HasSubstr("missing ranks [1]"),
                              HasSubstr("(HVD_STALL_SHUTDOWN_TIME is 0: they wait for ever; set it "
                                        "to fail them)")));
  // Once the straggler arrives the tensor completes normally and the warnings stop.
  out = job.Cycle(Lists(3).Add(1, Allreduce("s", 1)).lists, At(80));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_ALLREDUCE);
  job.Cycle(Lists(3).lists, At(200));
  EXPECT_THAT(log.Take(), IsEmpty());
}

TEST(ControllerTest, StallInspectorListsEveryStalledTensorWithItsMissingRanks) {
  LogCapture log;
  ControllerOptions o = Options();
  o.stall_check = milliseconds(50);
  o.log = log.Sink();
  FakeJob job(4, o);
  job.Cycle(Lists(4).Add(3, Allreduce("p", 1)).Add(0, Allreduce("q", 1)).Add(1, Allreduce("q", 1)).lists, At(0));
  job.Cycle(Lists(4).Add(2, Allreduce("fresh", 1)).lists, At(40));
  log.Take();
  job.Cycle(Lists(4).lists, At(60));
  std::vector<std::string> lines = log.Take();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], AllOf(HasSubstr("'p'"), HasSubstr("missing ranks [0, 1, 2]"), HasSubstr("'q'"),
                              HasSubstr("missing ranks [2, 3]")));
  EXPECT_THAT(lines[0], ::testing::Not(HasSubstr("'fresh'"))) << "'fresh' has waited only 20 ms";
}

TEST(ControllerTest, StallShutdownFailsTheTensorWithTimeoutOnEveryRank) {
  LogCapture log;
  ControllerOptions o = Options();
  o.stall_check = milliseconds(50);
  o.stall_shutdown = milliseconds(100);
  o.log = log.Sink();
  FakeJob job(3, o);
  job.Cycle(Lists(3).Add(0, Allreduce("late", 1)).lists, At(0));
  proto::ResponseList out = job.Cycle(Lists(3).lists, At(60));
  EXPECT_EQ(out.responses_size(), 0) << "past stall_check but not stall_shutdown: only a warning";
  std::vector<std::string> warned = log.Take();
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_THAT(warned[0], HasSubstr("(each fails on every rank once it has waited 100 ms: "
                                   "HVD_STALL_SHUTDOWN_TIME)"));
  out = job.Cycle(Lists(3).lists, At(120));
  ASSERT_EQ(out.responses_size(), 1);
  const proto::Response& r = out.responses(0);
  EXPECT_EQ(r.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(NamesOf(r), ElementsAre("late"));
  EXPECT_EQ(r.error_code(), static_cast<int>(StatusCode::kTimeout));
  EXPECT_THAT(r.error_message(), AllOf(HasSubstr("'late'"), HasSubstr("missing ranks [1, 2]")));
  EXPECT_EQ(out.abort_code(), 0);
  EXPECT_EQ(log.Take().size(), 1u) << "the failure is logged too";
  // The name is forgotten: a straggler's later request starts a new negotiation.
  out = job.Cycle(Lists(3).Add(1, Allreduce("late", 1)).lists, At(130));
  EXPECT_EQ(out.responses_size(), 0);
}

TEST(ControllerTest, StallShutdownWorksWithoutStallCheck) {
  ControllerOptions o = Options();
  o.stall_check = milliseconds(0);
  o.stall_shutdown = milliseconds(50);
  FakeJob job(2, o);
  job.Cycle(Lists(2).Add(1, Allreduce("t", 1)).lists, At(0));
  proto::ResponseList out = job.Cycle(Lists(2).lists, At(60));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).error_code(), static_cast<int>(StatusCode::kTimeout));
  EXPECT_THAT(out.responses(0).error_message(), AllOf(HasSubstr("'t'"), HasSubstr("missing ranks [0]")));
}

TEST(ControllerTest, StallInspectorDisabledWhenBothAreZero) {
  LogCapture log;
  ControllerOptions o = Options();
  o.stall_check = milliseconds(0);
  o.stall_shutdown = milliseconds(0);
  o.log = log.Sink();
  FakeJob job(2, o);
  job.Cycle(Lists(2).Add(1, Allreduce("t", 1)).lists, At(0));
  proto::ResponseList out = job.Cycle(Lists(2).lists, At(100000));
  EXPECT_EQ(out.responses_size(), 0);
  EXPECT_THAT(log.Take(), IsEmpty());
}


// Two ranks over a channel with Exchange (the Gloo channel at 2 ranks) run every
// cycle as the coordinator would: the same script of cycles on both kinds of
// channel gives the same response lists on every rank, cycle by cycle. The
// script: 12 tensors submitted in steps, each rank at random cycles (so cache
// bits are often set on one rank only), some steps with a tensor whose count
// differs on rank 1 (an error, and the cache entry dropped), a time jump past the
// second after which an entry set on one rank goes the full path, a tensor rank 1
// sends too late (it fails as stalled), and the shutdown at the end. The cached
// steps are settled alone.
TEST(ControllerTest, TwoRanksThatExchangeTheirListsGetTheCoordinatorsResponses) {
  struct Run {
    std::vector<std::string> cycles;  // rank 0's response list, each cycle
    Controller::Stats stats;
    int stalled = 0, mismatched = 0;  // error responses of each kind
  };
  auto run = [](bool exchange) {
    ControllerOptions options;
    options.fusion_threshold = 3 * 64 * 4;  // fuses some of each step's tensors
    options.stall_check = milliseconds(1500);
    options.stall_shutdown = milliseconds(1200);
    options.log = [](const std::string&) {};
    FakeJob job(2, options, exchange);
    constexpr int kTensors = 12, kCycles = 3300;
    constexpr int kJump = 700, kLate = 800;  // the cycles of the time jump and the late tensor
    std::mt19937 rng(7);
    std::set<int> in_flight[2];   // submitted, not yet answered
    std::set<int> done_step[2];   // answered in this step
    int mismatch = -1;            // this step's tensor whose count rank 1 changes
    int64_t ms = 0;
    Run out;
    for (int c = 0; c < kCycles; ++c) {
      std::vector<proto::RequestList> lists(2);
      for (int r = 0; r < 2; ++r) {
        for (int t = 0; t < kTensors && c > 0; ++t) {  // the first cycle is idle
          if (in_flight[r].count(t) || done_step[r].count(t) || rng() % 3 != 0) continue;
          if (r == 1 && t == 0 && c > kJump - 30 && c <= kJump) continue;  // partial at the jump
          const int64_t count = 64 + ((r == 1 && t == mismatch) ? 1 : 0);
          *lists[r].add_requests() = Allreduce("t" + std::to_string(t), count);
          in_flight[r].insert(t);
        }
        // Rank 1 sends this one past the stall shutdown and the stall check's
        // period (so it fails), then rank 0 sends it again, which completes rank 1's.
        if (c == (r == 0 ? kLate : kLate + 2300) || (r == 0 && c == kLate + 2310))
          *lists[r].add_requests() = Allreduce("late", 64);
        if (c == kCycles - 1) lists[r].set_shutdown(true);
      }
      ms += c == kJump ? 1100 : 1;  // entries set on one rank only go the full path
      std::vector<proto::ResponseList> got;
      std::vector<Status> status = job.TryCycle(lists, At(static_cast<int>(ms)), &got);
      for (int r = 0; r < 2; ++r) EXPECT_TRUE(status[r].ok()) << "cycle " << c << ": " << status[r].ToString();
      EXPECT_EQ(got[1].SerializeAsString(), got[0].SerializeAsString()) << "cycle " << c;
      out.cycles.push_back(got[0].SerializeAsString());
      for (const auto& resp : got[0].responses()) {
        if (resp.type() != proto::RESPONSE_ERROR) continue;

        ++(resp.error_code() == static_cast<int>(StatusCode::kTimeout) ? out.stalled : out.mismatched);
      }
      for (int r = 0; r < 2; ++r)
        for (const auto& resp : got[r].responses())
          for (const auto& name : resp.names()) {
            if (name[0] != 't') continue;
            const int t = std::stoi(name.substr(1));
            in_flight[r].erase(t);
            done_step[r].insert(t);
          }
      if (done_step[0].size() == kTensors && done_step[1].size() == kTensors) {
        done_step[0].clear();
        done_step[1].clear();
        // Not near the jump: an entry dropped there is sent in full for a few
        // cycles, which would hide what the jump is for.
        const bool near = c > kJump - 100 && c < kJump + 20;
        mismatch = (rng() % 4 == 0 && !near) ? static_cast<int>(rng() % kTensors) : -1;
      }
    }
    out.stats = job.controller(1).stats();
    return out;
  };
  const Run coordinated = run(false), exchanged = run(true);
  ASSERT_EQ(exchanged.cycles.size(), coordinated.cycles.size());
  for (size_t c = 0; c < coordinated.cycles.size(); ++c) {
    proto::ResponseList a, b;
    a.ParseFromString(coordinated.cycles[c]);
    b.ParseFromString(exchanged.cycles[c]);
    ASSERT_EQ(b.SerializeAsString(), a.SerializeAsString())
        << "cycle " << c << ", over Exchange:\n" << b.DebugString() << "as coordinated:\n" << a.DebugString();
  }
  proto::ResponseList last;
  last.ParseFromString(exchanged.cycles.back());
  EXPECT_TRUE(last.shutdown());
  EXPECT_EQ(coordinated.stats.settled_alone, 0);
  // The script must reach what it is there for: cached steps settled alone, and
  // cycles that needed the coordinator.
  EXPECT_GT(exchanged.stats.cache_hits, 1000);
  EXPECT_GT(exchanged.stats.settled_alone, 500);
  EXPECT_LT(exchanged.stats.settled_alone, exchanged.stats.cycles - 100);
  EXPECT_EQ(exchanged.stats.cache_hits, coordinated.stats.cache_hits);
  EXPECT_GT(exchanged.stalled, 0);
  EXPECT_GT(exchanged.mismatched, 0);
}

}  // namespace
}  // namespace hvd
