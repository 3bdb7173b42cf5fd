#include "runtime/transport/butterfly_schedule.h"

#include "runtime/common/status.h"

namespace hvd {
namespace {

using Kind = ButterflyStep::Kind;

ButterflyStep Step(Kind kind, int peer, int64_t send_begin, int64_t send_end, int64_t recv_begin,
                   int64_t recv_end, bool reduce) {
  ButterflyStep s{kind, peer};
  s.send_begin = send_begin;
  s.send_end = send_end;
  s.recv_begin = recv_begin;
  s.recv_end = recv_end;
  s.reduce = reduce;
  return s;
}

void CheckArgs(int size, int rank, int64_t total) {
  HVD_CHECK(size >= 1);
  HVD_CHECK(rank >= 0 && rank < size);
  HVD_CHECK(total >= 0);
}

// Appends this rank's fold-in; returns whether it is a core rank.
bool FoldIn(int size, int rank, int64_t total, std::vector<ButterflyStep>* steps) {
  const int p = ButterflyCore(size);
  if (rank >= p) {
    steps->push_back(Step(Kind::kFoldIn, rank - p, 0, total, 0, 0, false));
    return false;
  }
  if (rank + p < size) steps->push_back(Step(Kind::kFoldIn, rank + p, 0, 0, 0, total, true));
  return true;
}

void FoldOut(int size, int rank, int64_t total, std::vector<ButterflyStep>* steps) {
  const int p = ButterflyCore(size);
  if (rank >= p)
    steps->push_back(Step(Kind::kFoldOut, rank - p, 0, 0, 0, total, false));
  else if (rank + p < size)
    steps->push_back(Step(Kind::kFoldOut, rank + p, 0, total, 0, 0, false));
}

}  // namespace

int ButterflyCore(int size) {
  int p = 1;
  while (p <= size / 2) p *= 2;
  return p;
}

int ButterflySteps(int size, bool halving) {
  const int p = ButterflyCore(size);
  int rounds = 0;
  for (int d = 1; d < p; d *= 2) ++rounds;
  return rounds * (halving ? 2 : 1) + (p < size ? 2 : 0);
}

void PlanDoubling(int size, int rank, int64_t total, ButterflyPlan* plan) {
  CheckArgs(size, rank, total);
  plan->steps.clear();
  if (size == 1 || total == 0) return;
  if (FoldIn(size, rank, total, &plan->steps)) {
    const int p = ButterflyCore(size);
    for (int d = 1; d < p; d *= 2)
      plan->steps.push_back(Step(Kind::kDoubling, rank ^ d, 0, total, 0, total, true));
  }
  FoldOut(size, rank, total, &plan->steps);
}

void PlanHalvingDoubling(int size, int rank, int64_t total, ButterflyPlan* plan) {
  CheckArgs(size, rank, total);
  plan->steps.clear();
  if (size == 1 || total == 0) return;
  if (FoldIn(size, rank, total, &plan->steps)) {
    const int p = ButterflyCore(size);
    auto at = [&](int block) { return total * block / p; };
    // The blocks [lo, hi) this rank holds.
    int lo = 0, hi = p;
    for (int d = p / 2; d >= 1; d /= 2) {
      const int mid = lo + (hi - lo) / 2;
      const bool lower = (rank & d) == 0;
      const int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
      const int send_lo = lower ? mid : lo, send_hi = lower ? hi : mid;
      plan->steps.push_back(Step(Kind::kReduceScatter, rank ^ d, at(send_lo), at(send_hi),
                                 at(keep_lo), at(keep_hi), true));
      lo = keep_lo;
      hi = keep_hi;
    }
    for (int d = 1; d < p; d *= 2) {
      const int width = hi - lo;
      const bool lower = (rank & d) == 0;
      const int peer_lo = lower ? hi : lo - width, peer_hi = lower ? hi + width : lo;
      plan->steps.push_back(Step(Kind::kAllgather, rank ^ d, at(lo), at(hi), at(peer_lo),
                                 at(peer_hi), false));
      lo = lower ? lo : peer_lo;
      hi = lower ? peer_hi : hi;
    }
  }
  FoldOut(size, rank, total, &plan->steps);
}

}  // namespace hvd
