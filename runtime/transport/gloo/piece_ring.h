// PieceRing: a ring all-reduce over a list of tensors (Backend::AllreducePieces) on
// Gloo's TCP transport, reading and writing large tensors in place.
//
// Gloo's own ring all-reduce takes one contiguous buffer, so a fused all-reduce of
// many tensors used to cost "copy into a fusion buffer, all-reduce, copy out": on
// ResNet-50's 102 MB of gradients, 2 x 12 ms of cold copies per step around 100 ms on
// a 10 Gbit/s wire. Here the ring runs over the tensors as if laid end to end (one
// buffer is the case of a single piece):
//
// - The logical buffer is split into one block per rank and each block into
//   segments of at most `segment_bytes` (of `small_block_segment_bytes` when no
//   block exceeds `small_block_bytes`). A tensor of at least `direct_min_bytes`
//   (or a smaller one with no small neighbour) is sent from, reduced into and
//   received into its own memory. Runs of smaller tensors are gathered into a
//   staging area segment by segment, right before the segment is first sent or
//   reduced, and scattered out right after its final bytes arrive, so those copies
//   overlap the segments still on the wire (one thread, no helper). A segment of
//   small tensors that lie end to end in this rank's memory, inputs and outputs
//   alike (views of one buffer: a framework's gradient bucket), is not staged but
//   read and written in place like a large tensor. Segments are cut from the
//   counts alone, so each rank chooses for its own memory and the messages match.
// - Reduce-scatter then allgather, as in Gloo's ring: at reduce-scatter step s rank
//   r sends block r-s-1 to r+1 and reduces block r-s-2 received from r-1; the block
//   it holds fully reduced at the end (its own, r) is finished (averaged,
//   post-scaled) and circulates in the allgather. A reduce-scatter stops there. Every received segment is forwarded as soon as it
//   has been reduced, so segments stream around the ring without step barriers.
// - Gloo's unbound buffers send a message only once the receiver has posted its
//   receive, and that notice travels behind the data already queued on the
//   connection. Posted a few at a time, receives halve each direction's rate
//   (measured: ResNet-50's reduce-scatter at 10 Gbit/s took twice the wire's time).
//   So all receives are posted before any data is sent: the allgather's straight
//   into the tensors (or the staging area), the reduce-scatter's into scratch slots,
//   as many as `max_scratch_bytes` holds (the rest as slots free up), on a slot
//   of their own so the two phases' messages never wait on each other's order.
//
// Every rank derives the same blocks and segments from the same counts, so the
// messages match one for one (one Gloo slot per phase, FIFO per pair). Results are
// bitwise identical on every rank: each block is reduced once, by its owner's chain,
// and copied to the others.
//
// Errors: Gloo's exceptions (timeouts included, bounded by the context's timeout)
// propagate to the caller (GlooBackend::Guard turns them into a Status).
// Memory: the staging area (the small tensors' bytes) and the scratch slots (at
// most max_scratch_bytes) keep their largest size, like a fusion buffer.
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
  std::vector<uint8_t> staging_;
  std::vector<uint8_t> scratch_;
  int64_t staged_bytes_ = 0;
  int64_t messages_sent_ = 0;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_PIECE_RING_H_
