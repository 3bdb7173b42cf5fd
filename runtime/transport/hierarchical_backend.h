// HierarchicalBackend: the CPU data plane for a communicator that spans hosts with
// several of its ranks on each host.
//
// All-reduce runs in three steps: a reduce-scatter inside each host through shared
// memory (rank l of a host ends with shard l of the reduced buffer), an all-reduce
// of each shard across hosts over Gloo (among the ranks that hold the same shard,
// one per host), and an all-gather of the shards inside each host. Only 1/L of the
// buffer crosses the network per rank (L ranks per host), and every rank ends with
// the same bytes: a shard is reduced inside a host in one fixed order, across hosts
// by Gloo's ring (identical everywhere), and then copied.
//
// Where the link is about as fast as the copies inside a host, the flat all-reduce
// (Gloo's ring over every rank) can be faster: each all-reduce runs on the path that
// HierarchyChoice picks for its size, measured on the first calls of each size class
// (or forced by HVD_HIERARCHICAL_ALLREDUCE). All ranks run the same path for a call.
// Rank 0 prints each class's measured choice to stderr once ("hvd: all-reduce ...").
//
// The other collectives move little data or are dominated by the network, and go to
// `flat` (Gloo over every rank of the communicator).
//
// Every host must hold the same number of ranks (the shards then line up); the
// runtime uses the flat backend alone otherwise. A failure in any part leaves the
// whole backend broken, as backend.h requires.
#ifndef HVD_RUNTIME_TRANSPORT_HIERARCHICAL_BACKEND_H_
#define HVD_RUNTIME_TRANSPORT_HIERARCHICAL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/backend.h"
#include "runtime/transport/chunk_pipeline.h"
#include "runtime/transport/hierarchy_choice.h"

namespace hvd {

class HierarchicalBackend : public Backend {
 public:
  // `local`: the ranks of this host (shared memory); `cross`: the ranks with this
  // rank's local index, one per host, in host order; `flat`: every rank of the
  // communicator, in its order (rank() and size() are the flat ones).
  HierarchicalBackend(std::unique_ptr<Backend> local, std::unique_ptr<Backend> cross,
                      std::unique_ptr<Backend> flat,
                      HierarchyChoice::Mode mode = HierarchyChoice::Mode::kAuto);

  const char* Name() const override { return "hierarchical"; }
  int rank() const override { return flat_->rank(); }
  int size() const override { return flat_->size(); }

  Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) override;
  // Flat: the flat backend's own piecewise all-reduce (no copies where it has one);
  // hierarchical: the pieces packed into one buffer and back, in chunks of
  // kPipelineChunk bytes with the copies on a helper thread while the previous
  // chunk is all-reduced (one host's phases and the wire then overlap the copies;
  // docs/benchmarks.md has the figures).
  bool SupportsPieces() const override { return true; }
  Status AllreducePieces(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
                         const FinishFn& finish) override;
  Status Allgatherv(const void* in, void* out, const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buf, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status ReduceScatter(void* buf, void* out, const std::vector<int64_t>& recv_counts,
                       DataType dtype, ReduceOp op) override;
  Status Barrier() override;
  void Abort(const Status& why) override;

  // The paths chosen so far (for tests); only from the executing thread.
  const HierarchyChoice& choice() const { return choice_; }

  static constexpr int64_t kPipelineChunk = 4 << 20;

 private:
  Status Check(Status s);
  // Runs `run` on the path chosen for `bytes` and records its time (see HierarchyChoice).
  template <typename Run>
  Status OnChosenPath(int64_t bytes, Run&& run);
  Status HierarchicalAllreduce(void* buf, int64_t count, DataType dtype, ReduceOp op);

  std::unique_ptr<Backend> local_, cross_, flat_;
  HierarchyChoice choice_;
  std::vector<uint8_t> scratch_;  // this rank's shard
  std::vector<uint8_t> packed_;   // pieces laid end to end, for the hierarchical path
  ChunkPipeline pipeline_;
  Status broken_;
};

// How `count` elements are cut into `parts` shards for the hierarchical all-reduce:
// equal shards, the first `count % parts` one element longer.
std::vector<int64_t> ShardCounts(int64_t count, int parts);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_HIERARCHICAL_BACKEND_H_
