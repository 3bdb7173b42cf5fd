// PieceRing: a ring all-reduce over a list of tensors (Backend::AllreducePieces) on
// Gloo's TCP transport, reading and writing large tensors in place, with no fusion
// buffer: the ring runs over the tensors as if laid end to end (one buffer is the
// case of a single piece). Which messages each rank sends and receives, in which
// order, is the schedule (ring_schedule.h, which defines extents, blocks, segments,
// steps and slots); PieceRing executes this rank's plan over Gloo's unbound
// buffers.
//
// - Where a segment lives. A segment of a direct extent is sent from, reduced into
//   and received into its tensor's memory. So is a segment of small tensors that
//   lie end to end in this rank's memory, inputs and outputs alike (views of one
//   buffer: a framework's gradient bucket). Any other segment of a staged extent
//   goes through the staging area: gathered right before it is first sent or
//   reduced, and scattered out right after its final bytes arrive, so those copies
//   overlap the segments still on the wire (one thread, no helper). Each rank
//   places the segments for its own memory; the messages are the plan's either way.
// - Posting ahead. Gloo's unbound buffers send a message only once the receiver
//   has posted its receive, and that notice travels behind the data already queued
//   on the connection. Posted a few at a time, receives halve each direction's rate
//   (docs/benchmarks.md, "The Gloo ring over the tensors"). So all receives are
//   posted before any data is sent: the allgather's straight into place (the
//   tensors or the staging area), the reduce-scatter's into the plan's slots (the
//   rest as slots free up), each phase on a Gloo slot of its own so the two phases'
//   messages never wait on each other's order.
//
// Errors: Gloo's exceptions (timeouts included, bounded by the context's timeout)
// propagate to the caller (GlooBackend::Guard turns them into a Status).
// Memory: the staging area (the small tensors' bytes), the scratch area (at most
// max_scratch_bytes, or one segment) and the plan keep their largest size, like a
// fusion buffer.
// Not thread-safe: one call at a time, from the backend's thread.
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_PIECE_RING_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_PIECE_RING_H_

#include <gloo/context.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/backend.h"
#include "runtime/common/types.h"
#include "runtime/transport/gloo/ring_schedule.h"

namespace hvd {

class PieceRing {
 public:
  PieceRing(std::shared_ptr<gloo::Context> context, PieceRingOptions options);

  // All-reduces the pieces (see Backend::AllreducePieces) among every rank of the
  // context, with reduce-scatter messages on Gloo slot `rs_slot` and allgather
  // messages on `ag_slot`. Needs context size > 1.
  void Run(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
           const Backend::FinishFn& finish, uint64_t rs_slot, uint64_t ag_slot);

  // The reduce-scatter half alone, in place: `buf` holds counts[r] elements for
  // each rank r in rank order, and this rank's block of it ends reduced (the rest
  // of `buf` is clobbered). Messages on Gloo slot `slot`.
  void ReduceScatter(void* buf, const std::vector<int64_t>& counts, DataType dtype, ReduceOp op,
                     uint64_t slot);

  // Bytes gathered into or scattered out of the staging area by the last Run
  // (tests check that large tensors are not copied).
  int64_t staged_bytes() const { return staged_bytes_; }
  // Messages this rank sent in the last Run (tests check the segment sizes).
  int64_t messages_sent() const { return messages_sent_; }

 private:
  // Both: `scatter` null for an all-reduce, else the reduce-scatter's block counts.
  void Ring(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
            const Backend::FinishFn& finish, uint64_t rs_slot, uint64_t ag_slot,
            const std::vector<int64_t>* scatter);

  std::shared_ptr<gloo::Context> context_;
  PieceRingOptions options_;
  std::vector<int64_t> counts_;  // the pieces' counts, for PlanRing
  RingPlan plan_;
  std::vector<uint8_t> staging_;
  std::vector<uint8_t> scratch_;
  int64_t staged_bytes_ = 0;
  int64_t messages_sent_ = 0;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_PIECE_RING_H_
