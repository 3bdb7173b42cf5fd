// Butterfly schedules: recursive doubling and recursive halving-doubling
// (Rabenseifner's all-reduce) over any number of ranks, as pure functions of the
// ranks and the element count: no transport, no I/O. Every rank plans from the same
// inputs, so the plans agree on every message; an executor (the Gloo control
// channel's word all-reduce, GlooBackend's halving-doubling all-reduce) runs its own
// rank's plan step by step. A ring all-reduce takes 2(size - 1) steps; these take
// about 2 log2(size), which is what small all-reduces at many ranks pay for.
//
// Terms. Offsets and counts are in elements.
// - The *core* is ranks [0, p), p the largest power of two <= size. A rank e >= p is
//   an *extra* rank; core rank e - p is its *proxy*. Extra ranks only *fold*: an
//   extra rank sends its whole vector to its proxy, which reduces it into its own
//   before the core starts (fold-in), and receives the finished vector from its
//   proxy once the core is done (fold-out). With size a power of two there are none.
// - A *round* pairs each core rank r with its *partner* r ^ d, for a distance d.
//   Doubling: rounds at d = 1, 2, ..., p / 2, each partner sending its whole vector
//   and reducing the other's into its own.
// - Halving-doubling cuts the vector into p *blocks*, block b being
//   [total * b / p, total * (b + 1) / p). Reduce-scatter by recursive halving:
//   rounds at d = p / 2, p / 4, ..., 1; each rank holds a *range* of blocks (all of
//   them at first), splits it in two halves, keeps the half on its own side of the
//   partner (lower if r & d is 0), sends the other half and reduces the partner's
//   copy of the kept half into its own. After the last round core rank r holds
//   block r, reduced over every rank. Allgather by recursive doubling: rounds at
//   d = 1, 2, ..., p / 2, each rank sending the range it holds and receiving the
//   partner's (the same size) into place, so the held range doubles.
// - A *step* is one message each way, or one way: the executor posts the receive,
//   sends, waits for both, then reduces (reduce steps) or leaves the received
//   elements where they landed.
//
// Why every rank ends with the same bits: in halving-doubling each block is reduced
// by one rank only (its final owner, along one binary tree of partial results) and
// then copied to every other rank. In doubling both partners of a round compute
// a op b from the same two operands; the ops used with it (OR, max, sum, product,
// min of the executors) are commutative, so both get the same bits.
#ifndef HVD_RUNTIME_TRANSPORT_BUTTERFLY_SCHEDULE_H_
#define HVD_RUNTIME_TRANSPORT_BUTTERFLY_SCHEDULE_H_

#include <cstdint>
#include <vector>

namespace hvd {

struct ButterflyStep {
  enum class Kind { kFoldIn, kReduceScatter, kAllgather, kDoubling, kFoldOut };
  Kind kind;
  int peer;
  // Elements [send_begin, send_end) go to `peer` (none when equal), and
  // [recv_begin, recv_end) come from it (none when equal), into a scratch area to
  // be reduced into this rank's own elements when `reduce`, else into place.
  int64_t send_begin = 0, send_end = 0;
  int64_t recv_begin = 0, recv_end = 0;
  bool reduce = false;

  int64_t send_count() const { return send_end - send_begin; }
  int64_t recv_count() const { return recv_end - recv_begin; }
};

struct ButterflyPlan {
  std::vector<ButterflyStep> steps;  // in the order they run
};

// The largest power of two <= size (size >= 1).
int ButterflyCore(int size);

// Recursive doubling over `total` elements: each core round exchanges the whole
// vector. Needs size >= 1, 0 <= rank < size, total >= 0 (HVD_CHECK). Overwrites
// *plan (a job of one, or total 0: no steps).
void PlanDoubling(int size, int rank, int64_t total, ButterflyPlan* plan);

// Recursive halving (reduce-scatter), then recursive doubling (allgather), over
// `total` elements. Same preconditions as PlanDoubling.
void PlanHalvingDoubling(int size, int rank, int64_t total, ButterflyPlan* plan);

// Messages a rank sends in the worst case, the depth of either plan: 2 log2(p) for
// halving-doubling (log2(p) for doubling) plus 2 when size is not a power of two.
int ButterflySteps(int size, bool halving);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_BUTTERFLY_SCHEDULE_H_
