// Unit tests of the Controller's tree cycle (controller.h, Cycle): at
// tree_cycle_ranks ranks or more over a channel with a word all-reduce, a cycle of
// cached tensors is settled by every rank alone from one all-reduce of the cache
// bits. Checked against the coordinator's own answers: the same sequence of request
// lists run by a job that gathers every cycle gives the same response lists, cycle
// by cycle; what the coordinator records (the last rank and its lag, entries some
// ranks set for over a second) survives; and a shutdown, a new tensor or a changed
// one still take the full path.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "controller/controller.h"
#include "tests/unit/controller_fakes.h"

namespace hvd {
namespace {

using fakes::Allreduce;
using fakes::At;
using fakes::FakeJob;
using fakes::Lists;
using fakes::Options;
using ::testing::HasSubstr;

constexpr int kRanks = 8;

ControllerOptions TreeOptions() {
  ControllerOptions o = Options();
  o.cache_capacity = 100;  // two words of bits
  o.tree_cycle_ranks = kRanks;
  return o;
}

// Every rank's list holding `names` (each an all-reduce of 4 elements), for the
// ranks in [from, to).
Lists Step(const std::vector<std::string>& names, int from = 0, int to = kRanks,
           int64_t count = 4) {
  Lists l(kRanks);
  for (int r = from; r < to; ++r)
    for (const auto& n : names) l.Add(r, Allreduce(n, count));
  return l;
}

std::vector<std::string> Names(int n, const std::string& prefix = "g") {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

// The same lists, cycle by cycle, through a tree job and a gathering job: the same
// response lists (hits, fusion, new tensors, partial steps, a changed shape).
TEST(ControllerTreeTest, TreeCyclesAnswerAsTheCoordinator) {
  FakeJob tree(kRanks, TreeOptions(), /*exchange=*/false, /*words=*/true);
  ControllerOptions gather_options = TreeOptions();
  gather_options.tree_cycle_ranks = 0;
  FakeJob gather(kRanks, gather_options);
  const auto step = Names(70);
  std::vector<Lists> cycles = {
      Step(step),                   // full: every tensor enters the cache
      Step(step),                   // all cached, every rank at once
      Step(step, 0, 3),             // partial: ranks 0..2 first
      Step(step, 3, kRanks),        // the rest: now complete
      Step({"new"}),                // a tensor never seen: the full path
      Step(step),                   // cached again
      Step({"g5"}, 0, kRanks, 9),   // a changed shape: invalid bits, the full path
      Step({}),                     // nothing at all
      Step(step),                   // g5 changed back: the full path again
  };
  int t = 0;
  for (const Lists& l : cycles) {
    const proto::ResponseList a = tree.Cycle(l.lists, At(t));
    const proto::ResponseList b = gather.Cycle(l.lists, At(t));
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString())
        << "cycle at " << t << " ms:\ntree:\n" << a.DebugString() << "gather:\n" << b.DebugString();
    t += 10;
  }
  const Controller::Stats& st = tree.controller(0).stats();
  EXPECT_EQ(st.tree_cycles, static_cast<int64_t>(cycles.size()));
  // Settled alone: the cached step, the partial one's two cycles, the step after
  // the new tensor, and the empty cycle.
  EXPECT_EQ(st.settled_alone, 5);
  EXPECT_EQ(gather.controller(0).stats().settled_alone, 0);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(tree.channel(r).word_allreduces(), 9) << r;
}

// Below tree_cycle_ranks, or over a channel without a word all-reduce: gathered.
TEST(ControllerTreeTest, FewerRanksGather) {
  ControllerOptions o = TreeOptions();
  o.tree_cycle_ranks = kRanks + 1;
  FakeJob job(kRanks, o, false, true);
  for (int i = 0; i < 3; ++i) job.Cycle(Step(Names(3)).lists, At(i));
  EXPECT_EQ(job.controller(0).stats().tree_cycles, 0);
  EXPECT_EQ(job.channel(1).word_allreduces(), 0);
}

// The coordinator learns, from the straggler word, which rank held a cached tensor
// back and for how long (from the cycle some rank first set it).
TEST(ControllerTreeTest, TheCoordinatorNamesTheLastRankOfACachedTensor) {
  struct Seen {
    std::string name;
    Arrivals a;
    bool cached;
  };
  std::vector<Seen> seen;
  ControllerOptions o = TreeOptions();
  o.on_arrivals = [&](const std::string& name, OpType, const Arrivals& a, Clock::time_point,
                      bool cached) { seen.push_back({name, a, cached}); };
  FakeJob job(kRanks, o, false, true);
  job.Cycle(Step({"x"}).lists, At(0));  // full path
  ASSERT_EQ(seen.size(), 1u);
  job.Cycle(Step({"x"}).lists, At(10));  // cached, together
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[1].cached);
  EXPECT_EQ(seen[1].a.last_rank, -1);
  EXPECT_EQ(seen[1].a.each, nullptr);

  Lists early = Step({"x"}, 0, 5);
  early.Add(6, Allreduce("x", 4)).Add(7, Allreduce("x", 4));
  proto::ResponseList out = job.Cycle(early.lists, At(20));  // rank 5 late
  EXPECT_EQ(out.responses_size(), 0);
  out = job.Cycle(Step({"x"}, 5, 6).lists, At(45));
  ASSERT_EQ(out.responses_size(), 1);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].name, "x");
  EXPECT_TRUE(seen[2].cached);
  EXPECT_EQ(seen[2].a.last_rank, 5);
  EXPECT_EQ(seen[2].a.first, At(20));
  EXPECT_EQ(seen[2].a.last, At(45));
  EXPECT_EQ(job.controller(0).stats().settled_alone, 3);
}

// An entry some ranks set and one never does goes the full path once it has waited
// over a second, where the stall inspector names the missing rank.
TEST(ControllerTreeTest, AnEntryWaitingOverASecondTakesTheFullPath) {
  std::vector<std::string> logged;
  ControllerOptions o = TreeOptions();
  o.stall_check = std::chrono::milliseconds(1500);
  FakeJob job(kRanks, o, false, true);
  job.Cycle(Step({"x"}).lists, At(0));
  job.Cycle(Step({"x"}, 0, kRanks - 1).lists, At(10));  // rank 7 never sends it
  job.Cycle(Step({}).lists, At(500));
  EXPECT_EQ(job.controller(0).stats().settled_alone, 2);
  job.Cycle(Step({}).lists, At(1200));  // over a second: the coordinator drops it
  EXPECT_EQ(job.controller(0).stats().settled_alone, 2);
  // Every rank resent x in full; rank 7's comes, and it completes on the full path.
  const proto::ResponseList out = job.Cycle(Step({"x"}, kRanks - 1, kRanks).lists, At(1300));
  ASSERT_EQ(out.responses_size(), 1);
  EXPECT_EQ(out.responses(0).names(0), "x");
  EXPECT_EQ(out.responses(0).type(), proto::RESPONSE_ALLREDUCE);
}

// A shutdown is a flag like any full request: the list says shutdown everywhere.
TEST(ControllerTreeTest, ShutdownTakesTheFullPath) {
  FakeJob job(kRanks, TreeOptions(), false, true);
  job.Cycle(Step({"x"}).lists, At(0));
  Lists l = Step({});
  for (auto& list : l.lists) list.set_shutdown(true);
  const proto::ResponseList out = job.Cycle(l.lists, At(10));
  EXPECT_TRUE(out.shutdown());
  EXPECT_EQ(job.controller(0).stats().settled_alone, 0);
}

// A rank's own failure reaches everyone, named, through the full path.
TEST(ControllerTreeTest, ARanksErrorAbortsEverywhere) {
  FakeJob job(kRanks, TreeOptions(), false, true);
  job.Cycle(Step({"x"}).lists, At(0));
  Lists l = Step({"x"});
  l.lists[3].set_error_code(static_cast<int>(StatusCode::kInternal));
  l.lists[3].set_error_message("disk on fire");
  const proto::ResponseList out = job.Cycle(l.lists, At(10));
  EXPECT_NE(out.abort_code(), 0);
  EXPECT_THAT(out.abort_message(), HasSubstr("rank 3 failed: disk on fire"));
}

}  // namespace
}  // namespace hvd
