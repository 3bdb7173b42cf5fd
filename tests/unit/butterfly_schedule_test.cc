// Unit tests for runtime/transport/butterfly_schedule.h, without a transport: the
// plans of every rank are executed together in memory, messages delivered FIFO per
// ordered pair of ranks, over 1..40 ranks (powers of two and not) and element counts
// 0, 1, below, at and above the core size, odd and large. Values are symbolic: each
// records which ranks' inputs it adds up (a rank counted twice fails the reduction)
// and a commutative hash of how it was computed, so two ranks that end with the
// "same" element computed differently show.
//
// Checked for every plan: each message is the next receive its peer has from this
// rank, over the same range; no rank waits for ever and no message is left over;
// every rank ends with every element summed over every rank exactly once, computed
// the same way everywhere; the number of steps is ButterflySteps; halving-doubling
// sends each core rank's share of the vector once in each half (the ring's bytes),
// and the element ranges it names stay within the vector.
#include "runtime/transport/butterfly_schedule.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace hvd {
namespace {

struct Value {
  uint64_t ranks = 0;  // bit r: rank r's input is in it
  uint64_t how = 0;    // how it was computed (an input: its rank + 1)
};

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

// a op b for a commutative op: the same whichever side computes it.
Value Reduce(const Value& a, const Value& b, std::string* error) {
  if (a.ranks & b.ranks) *error = "a rank's input reduced twice into one element";
  const uint64_t lo = std::min(a.how, b.how), hi = std::max(a.how, b.how);
  return {a.ranks | b.ranks, Mix(lo * 0x9e3779b97f4a7c15ull + Mix(hi))};
}

struct Message {
  int64_t begin, end;
  std::vector<Value> data;
};

// Runs every rank's plan together; returns "" or what went wrong. `out` gets each
// rank's final vector.
std::string Simulate(int size, int64_t total, bool halving,
                     std::vector<std::vector<Value>>* out) {
  std::vector<ButterflyPlan> plans(size);
  std::vector<std::vector<Value>> v(size, std::vector<Value>(total));
  for (int r = 0; r < size; ++r) {
    if (halving)
      PlanHalvingDoubling(size, r, total, &plans[r]);
    else
      PlanDoubling(size, r, total, &plans[r]);
    for (auto& x : v[r]) x = {uint64_t{1} << r, static_cast<uint64_t>(r) + 1};
  }
  std::map<std::pair<int, int>, std::deque<Message>> wire;  // (from, to)
  std::vector<size_t> next(size, 0);
  std::vector<bool> sent(size, false);  // the current step's send is out
  std::string error;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < size; ++r) {
      if (next[r] >= plans[r].steps.size()) continue;
      const ButterflyStep& s = plans[r].steps[next[r]];
      if (s.peer < 0 || s.peer >= size || s.peer == r) return "bad peer";
      if (s.send_begin < 0 || s.send_end > total || s.send_begin > s.send_end ||
          s.recv_begin < 0 || s.recv_end > total || s.recv_begin > s.recv_end)
        return "range outside the vector";
      if (!sent[r]) {
        Message m{s.send_begin, s.send_end,
                  std::vector<Value>(v[r].begin() + s.send_begin, v[r].begin() + s.send_end)};
        if (s.send_count() > 0) wire[{r, s.peer}].push_back(std::move(m));
        sent[r] = true;
        progress = true;
      }
      if (s.recv_count() > 0) {
        auto& q = wire[{s.peer, r}];
        if (q.empty()) continue;  // blocked for now
        Message m = std::move(q.front());
        q.pop_front();
        if (m.begin != s.recv_begin || m.end != s.recv_end)
          return "rank " + std::to_string(r) + " step " + std::to_string(next[r]) +
                 " receives [" + std::to_string(s.recv_begin) + ", " +
                 std::to_string(s.recv_end) + ") but rank " + std::to_string(s.peer) + " sent [" +
                 std::to_string(m.begin) + ", " + std::to_string(m.end) + ")";
        for (int64_t i = s.recv_begin; i < s.recv_end; ++i) {
          const Value& in = m.data[i - s.recv_begin];
          v[r][i] = s.reduce ? Reduce(v[r][i], in, &error) : in;
        }
        if (!error.empty()) return error;
      }
      ++next[r];
      sent[r] = false;
      progress = true;
    }
  }
  for (int r = 0; r < size; ++r)
    if (next[r] < plans[r].steps.size())
      return "rank " + std::to_string(r) + " waits for ever at step " + std::to_string(next[r]);
  for (const auto& [pair, q] : wire)
    if (!q.empty())
      return "a message from rank " + std::to_string(pair.first) + " to " +
             std::to_string(pair.second) + " is never received";
  *out = std::move(v);
  return "";
}

void ExpectAllReduced(int size, int64_t total, bool halving) {
  SCOPED_TRACE("size " + std::to_string(size) + ", total " + std::to_string(total) +
               (halving ? ", halving-doubling" : ", doubling"));
  std::vector<std::vector<Value>> v;
  const std::string error = Simulate(size, total, halving, &v);
  ASSERT_EQ(error, "");
  const uint64_t all = size == 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
  for (int64_t i = 0; i < total; ++i) {
    ASSERT_EQ(v[0][i].ranks, all) << "element " << i;
    for (int r = 1; r < size; ++r)
      ASSERT_EQ(v[r][i].how, v[0][i].how) << "element " << i << " differs on rank " << r;
  }
}

const int kSizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 31, 32, 33, 40};

TEST(ButterflySchedule, DoublingReducesEveryElementOnceEverywhere) {
  for (int size : kSizes)
    for (int64_t total : {0, 1, 2, 7, 64, 1000}) ExpectAllReduced(size, total, false);
}

TEST(ButterflySchedule, HalvingDoublingReducesEveryElementOnceEverywhere) {
  for (int size : kSizes)
    for (int64_t total : {int64_t{0}, int64_t{1}, int64_t{size} - 1, int64_t{size},
                          int64_t{size} + 1, int64_t{2 * size + 3}, int64_t{1000}})
      if (total >= 0) ExpectAllReduced(size, total, true);
}

TEST(ButterflySchedule, StepCountsAreLogarithmic) {
  EXPECT_EQ(ButterflyCore(1), 1);
  EXPECT_EQ(ButterflyCore(7), 4);
  EXPECT_EQ(ButterflyCore(8), 8);
  EXPECT_EQ(ButterflyCore(4096), 4096);
  EXPECT_EQ(ButterflySteps(128, true), 14);
  EXPECT_EQ(ButterflySteps(128, false), 7);
  EXPECT_EQ(ButterflySteps(100, true), 14);  // 64 in the core, and the fold
  for (int size : kSizes) {
    for (bool halving : {false, true}) {
      int most = 0;
      for (int r = 0; r < size; ++r) {
        ButterflyPlan plan;
        if (halving)
          PlanHalvingDoubling(size, r, 100, &plan);
        else
          PlanDoubling(size, r, 100, &plan);
        most = std::max(most, static_cast<int>(plan.steps.size()));
      }
      EXPECT_EQ(most, ButterflySteps(size, halving)) << size << (halving ? " halving" : "");
    }
  }
}

// Each core rank sends, in the reduce-scatter, everything but its own block once,
// and receives the same in the allgather: the ring's 2 (p - 1) / p of the vector.
TEST(ButterflySchedule, HalvingDoublingMovesTheRingsBytes) {
  for (int size : {2, 4, 8, 16, 32, 6, 13}) {
    const int64_t total = 1000;
    const int p = ButterflyCore(size);
    for (int r = 0; r < p; ++r) {
      ButterflyPlan plan;
      PlanHalvingDoubling(size, r, total, &plan);
      int64_t rs_sent = 0, ag_received = 0;
      for (const auto& s : plan.steps) {
        if (s.kind == ButterflyStep::Kind::kReduceScatter) rs_sent += s.send_count();
        if (s.kind == ButterflyStep::Kind::kAllgather) ag_received += s.recv_count();
      }
      const int64_t own = total * (r + 1) / p - total * r / p;
      EXPECT_EQ(rs_sent, total - own) << "size " << size << " rank " << r;
      EXPECT_EQ(ag_received, total - own) << "size " << size << " rank " << r;
    }
  }
}

TEST(ButterflySchedule, ExtraRanksOnlyFold) {
  ButterflyPlan plan;
  PlanHalvingDoubling(6, 5, 10, &plan);  // core 0..3; rank 5's proxy is rank 1
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].kind, ButterflyStep::Kind::kFoldIn);
  EXPECT_EQ(plan.steps[0].peer, 1);
  EXPECT_EQ(plan.steps[0].send_count(), 10);
  EXPECT_EQ(plan.steps[1].kind, ButterflyStep::Kind::kFoldOut);
  EXPECT_EQ(plan.steps[1].recv_count(), 10);
  EXPECT_FALSE(plan.steps[1].reduce);
  PlanDoubling(6, 1, 10, &plan);
  EXPECT_EQ(plan.steps.front().kind, ButterflyStep::Kind::kFoldIn);
  EXPECT_TRUE(plan.steps.front().reduce);
  EXPECT_EQ(plan.steps.back().kind, ButterflyStep::Kind::kFoldOut);
  EXPECT_EQ(plan.steps.back().send_count(), 10);
  PlanDoubling(6, 3, 10, &plan);  // a core rank without an extra one
  EXPECT_EQ(plan.steps.size(), 2u);
}

}  // namespace
}  // namespace hvd
