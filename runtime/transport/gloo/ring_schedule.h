// Ring schedule: what each rank of PieceRing's ring all-reduce (and of its
// reduce-scatter half) sends and receives, and in which order, as a pure function
// of the pieces' element counts and the options: no Gloo, no I/O, no memory beyond
// the plan. Every rank plans from the same counts, so the plans agree on every
// message; PieceRing (piece_ring.h) executes its own rank's plan.
//
// Terms. Offsets and counts are in elements unless named bytes.
// - The *logical buffer* is the pieces (tensors) laid end to end: piece i holds
//   elements [piece_start[i], piece_start[i + 1]) of it.
// - An *extent* is a stretch of the logical buffer that every rank holds the same
//   way. A *direct* extent is one piece, sent from, reduced into and received into
//   its own memory: a piece of at least `direct_min_bytes`, or a smaller one with no
//   small non-empty neighbour (alone it is a message of its own anyway). A *staged*
//   extent is a run of small pieces side by side (empty pieces between them do not
//   break it), with a stretch of its own in the *staging area*, where the staged
//   extents lie end to end in logical order. Extents tile the logical buffer.
// - A *block* is one rank's share of the logical buffer: block b ends reduced on
//   rank b. An all-reduce cuts equal blocks (block b is [total * b / size,
//   total * (b + 1) / size)); a reduce-scatter takes the block counts it is given,
//   zeros allowed. Blocks tile the logical buffer in rank order.
// - A *segment* is one message: a stretch of one block inside one extent, of at
//   most `seg_max` elements. Each block is cut at every extent boundary and every
//   seg_max elements. seg_max is `segment_bytes`, or the larger of it and
//   `small_block_segment_bytes` when no block exceeds `small_block_bytes`, in
//   elements, at least one.
// - A *step* moves one block across every link of the ring: rank r sends to r + 1
//   and receives from r - 1 (mod size). Reduce-scatter step s, 0 <= s < size - 1:
//   rank r sends block r - s - 1 and receives block r - s - 2, which it reduces
//   with its own input; at step 0 it sends its input alone. At the last step,
//   size - 2, it receives its own block r, now reduced over every rank: it finishes
//   it there (averages, post-scales) and, in an all-reduce, sends it as the
//   allgather's step 0. Allgather step s: rank r sends block r - s and receives
//   block r - s - 1, which lands in place. A reduce-scatter stops after its last
//   step. Every received segment but those of the last step is forwarded, sent on
//   as soon as it has been processed, so segments stream around the ring with no
//   barrier between steps.
// - A *slot* is a stretch of `seg_max` elements of the scratch area that one
//   reduce-scatter receive lands in before it is reduced: the k-th reduce-scatter
//   receive takes slot k % slots. `slots` receives are outstanding at once, as many
//   as `max_scratch_bytes` holds, at least one. Allgather receives land in place
//   and take no slot. (Gloo's "slot" is the tag a message travels under; here that
//   is called a Gloo slot, one per phase.)
//
// Each phase's messages travel on a Gloo slot of their own, FIFO per neighbour
// pair, so a rank's sends of one phase match its next rank's receives of that phase
// one for one, in size and in logical range. Each block is reduced once, along one
// chain that starts at its owner's next rank and ends at its owner, and then copied
// to the others, so every rank ends with the same bits.
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_RING_SCHEDULE_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_RING_SCHEDULE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hvd {

// The ring's options, each of which shapes the schedule. The defaults were
// measured (docs/benchmarks.md, "The Gloo ring over the tensors" and "Per-tensor
// costs, the control plane and message sizes").
struct PieceRingOptions {
  size_t segment_bytes = 1 << 20;  // largest message on the wire
  // Blocks of at most small_block_bytes go in messages of up to
  // small_block_segment_bytes instead: each message costs a wake-up of Gloo's
  // thread and of the caller, which for a block of a few MiB outweighs what finer
  // pipelining gains; larger blocks gain more from it than the messages cost.
  size_t small_block_bytes = 8 << 20;
  size_t small_block_segment_bytes = 4 << 20;
  size_t direct_min_bytes = 64 << 10;   // smaller pieces go through the staging area
  size_t max_scratch_bytes = 64 << 20;  // the slots: reduce-scatter receives posted ahead
};

struct RingExtent {
  bool staged;
  int first, last;  // pieces [first, last], empty ones included; direct: first == last
  int64_t start;    // in the logical buffer
  int64_t count;
  int64_t stage_off;  // staged: where it starts in the staging area
};

// `count` (> 0) elements of the logical buffer from `start`, inside extent `extent`.
struct RingSegment {
  int extent;
  int64_t start, count;
};

// One receive from the previous rank.
struct RingReceive {
  int segment;      // index in RingPlan::segments
  bool reduce;      // reduce-scatter: lands in a slot, then reduced; else allgather
  bool last_rs;     // the reduce-scatter's last step: this rank's own block, finished
  bool forward;     // sent on to the next rank once processed
  int64_t scratch;  // reduce: where its slot starts in the scratch area

  // Whether the forward is a reduce-scatter message (else an allgather one).
  bool forwards_reduce() const { return reduce && !last_rs; }
};

// One rank's plan. When `total` is 0 there are no messages: every vector but
// piece_start and block_begin is empty, and so is every block.
struct RingPlan {
  int64_t total = 0;                  // elements in the logical buffer
  std::vector<int64_t> piece_start;   // one per piece, then total
  std::vector<RingExtent> extents;    // in logical order
  int64_t staged = 0;                 // elements in the staging area
  int64_t seg_max = 0;                // the largest segment
  std::vector<RingSegment> segments;  // block by block, each block's in logical order
  std::vector<int> block_begin;       // block b: segments [block_begin[b], block_begin[b + 1])
  int send_block = 0;                 // step 0: this rank sends its input of this block
  // In the order they arrive, which is the order they are processed: the
  // reduce-scatter's (the first rs_receives), then the allgather's.
  std::vector<RingReceive> receives;
  int64_t rs_receives = 0;
  // Reduce-scatter receives outstanding at once; the scratch area is slots * seg_max
  // elements.
  int64_t slots = 0;
};

// Plans rank `rank`'s part of a ring over `size` ranks of pieces of `counts`
// elements, each element `elem_bytes` bytes. `block_counts`: null for an
// all-reduce, else a reduce-scatter's block counts, one per rank, adding up to the
// pieces' total. Overwrites *plan, reusing its vectors' storage. Needs size > 1,
// 0 <= rank < size, elem_bytes > 0 and counts >= 0 (HVD_CHECK).
void PlanRing(int size, int rank, const std::vector<int64_t>& counts, int64_t elem_bytes,
              const PieceRingOptions& options, const std::vector<int64_t>* block_counts,
              RingPlan* plan);

// Calls f(piece, offset in the piece, offset in the staging area, count) for each
// non-empty part of `seg`, a segment of a staged extent, in logical order.
template <typename F>
void ForEachStagedPart(const RingPlan& plan, const RingSegment& seg, F&& f) {
  const RingExtent& e = plan.extents[seg.extent];
  const std::vector<int64_t>& ps = plan.piece_start;
  const int64_t end = seg.start + seg.count;
  int i =
      static_cast<int>(std::upper_bound(ps.begin() + e.first, ps.begin() + e.last + 1, seg.start) -
                       ps.begin()) -
      1;
  for (; i <= e.last && ps[i] < end; ++i) {
    const int64_t lo = std::max(seg.start, ps[i]), hi = std::min(end, ps[i + 1]);
    if (hi > lo) f(i, lo - ps[i], e.stage_off + (lo - e.start), hi - lo);
  }
}

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_RING_SCHEDULE_H_
