// ButterflyAllreduce: recursive halving-doubling all-reduce (Rabenseifner's) over a
// list of tensors (Backend::AllreducePieces) on Gloo's TCP transport, executing this
// rank's plan of butterfly_schedule.h (which defines the core, extra ranks, rounds,
// blocks and steps). For small all-reduces at many ranks: about 2 log2(size) steps
// where the ring (PieceRing) takes 2(size - 1); allreduce_algorithm.h chooses.
//
// - The *work buffer* holds the logical buffer (the pieces end to end): the one
//   piece's output when there is a single piece (its input copied there first if
//   elsewhere), else a staging area the pieces' inputs are gathered into first and
//   the results copied out of at the end. Halving-doubling is chosen for small
//   messages, so these copies are small beside the steps saved.
// - Finishing (finish(out, count)): each core rank finishes its own block in the
//   work buffer once the reduce-scatter has reduced it, before the allgather hands it
//   on, so each element is finished once, by one rank, as in the ring.
// - Each step posts its receive (a reduce-scatter's and the fold-in's into a scratch
//   area, then reduced into the work buffer; an allgather's and the fold-out's
//   straight into place), sends, and waits for both. The reduce-scatter and fold-in
//   travel on one Gloo slot, the allgather and fold-out on another, so the two
//   messages a pair exchanges at the same distance in the two halves never meet.
// - Every rank ends with the same bits: each block is reduced by one rank, then
//   copied (butterfly_schedule.h).
//
// Errors: Gloo's exceptions (timeouts included, bounded by the context's timeout)
// propagate to the caller (GlooBackend::Guard turns them into a Status).
// Memory: the staging and scratch areas keep their largest size.
// Not thread-safe: one call at a time, from the backend's thread.
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_BUTTERFLY_ALLREDUCE_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_BUTTERFLY_ALLREDUCE_H_

#include <gloo/context.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/backend.h"
#include "runtime/common/types.h"
#include "runtime/transport/butterfly_schedule.h"

namespace hvd {

class ButterflyAllreduce {
 public:
  explicit ButterflyAllreduce(std::shared_ptr<gloo::Context> context);

  // All-reduces the pieces among every rank of the context (size > 1), the
  // reduce-scatter half on Gloo slot `rs_slot`, the allgather half on `ag_slot`.
  void Run(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
           const Backend::FinishFn& finish, uint64_t rs_slot, uint64_t ag_slot);

  // Messages this rank sent in the last Run (tests check the step count).
  int64_t messages_sent() const { return messages_sent_; }

 private:
  std::shared_ptr<gloo::Context> context_;
  ButterflyPlan plan_;
  std::vector<uint8_t> staging_;
  std::vector<uint8_t> scratch_;
  std::unique_ptr<gloo::transport::UnboundBuffer> staging_buf_, scratch_buf_;
  int64_t messages_sent_ = 0;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_BUTTERFLY_ALLREDUCE_H_
