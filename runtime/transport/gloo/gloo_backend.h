// GlooBackend: the CPU data plane over Gloo's TCP transport.
//
// All-reduce, of one buffer or of many tensors fused, is PieceRing (piece_ring.h):
// a ring over Gloo's transport with our reduction kernels, so every dtype and op
// works and all ranks end with identical bytes, that reads and writes large tensors
// in place and posts its receives before sending (Gloo's own ring took one buffer,
// and ran each direction of a 10 Gbit/s link at half its rate). The other
// collectives are Gloo's allgatherv, broadcast, alltoallv and barrier;
// reduce-scatter is the ring's first half, then a copy of this rank's block.
//
// Gloo reports failure by exception; every exception becomes a Status here and the
// backend is then broken (Gloo's context cannot be reused after a timeout).
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_GLOO_BACKEND_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_GLOO_BACKEND_H_

#include <chrono>
#include <memory>
#include <string>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "runtime/common/backend.h"
#include "runtime/store/store.h"
#include "runtime/transport/allreduce_algorithm.h"
#include "runtime/transport/gloo/butterfly_allreduce.h"
#include "runtime/transport/gloo/piece_ring.h"

namespace hvd {

// The address a rank's Gloo device binds on a host given `hostname`: for
// 127.0.0.1 (the default), a loopback address of the rank's own,
// 127.0.<local_rank / 250>.<1 + local_rank % 250> (local rank 0 keeps 127.0.0.1);
// any other hostname as it is. Each Gloo pair listens on a socket of its own, so a
// host's ranks bind size x local_size ports; on one address the kernel's search for
// a free port grows with the sockets already bound there (hvd_init of 128 local
// ranks over Gloo took 18 s, 4 s with an address per rank, docs/scaling.md).
std::string GlooBindHostname(const std::string& hostname, int local_rank);

// Creates a TCP device bound to `iface` if non-empty, else to `hostname`
// (127.0.0.1 for local jobs).
Status CreateGlooDevice(const std::string& hostname, const std::string& iface,
                        std::shared_ptr<gloo::transport::Device>* out);

// Connects a full mesh among `size` ranks through `store` (keys are used as given:
// pass a prefixed store per communicator). Bounded by `timeout`. Each rank publishes
// one key per peer (its pair's address for that peer) and reads the one each peer
// published for it: O(size) small keys per rank, where Gloo's connectFullMesh has
// every rank read every peer's whole address list (O(size^2) bytes per rank, 280 MB
// through the store at 128 ranks). A store failure returns its status naming the
// peer; a failed connect is kTimeout.
Status ConnectGlooContext(const std::shared_ptr<Store>& store,
                          const std::shared_ptr<gloo::transport::Device>& device, int rank,
                          int size, std::chrono::milliseconds timeout,
                          std::shared_ptr<gloo::Context>* out);

class GlooBackend : public Backend {
 public:
  // All-reduces run the ring or halving-doubling, by size and ranks as `algorithm`
  // says (allreduce_algorithm.h).
  explicit GlooBackend(std::shared_ptr<gloo::Context> context,
                       PieceRingOptions ring_options = PieceRingOptions(),
                       AllreduceAlgorithmOptions algorithm = AllreduceAlgorithmOptions());

  const char* Name() const override { return "gloo"; }
  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) override;
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

  const std::shared_ptr<gloo::Context>& context() const { return context_; }
  // Bytes the last AllreducePieces copied through its staging area.
  int64_t staged_bytes() const { return ring_.staged_bytes(); }
  int64_t ring_messages_sent() const { return ring_.messages_sent(); }
  // The algorithm of the last all-reduce, and the messages halving-doubling sent.
  AllreduceAlgorithm last_allreduce_algorithm() const { return last_algorithm_; }
  int64_t butterfly_messages_sent() const { return butterfly_.messages_sent(); }

 private:
  // Runs `fn`, turning a Gloo exception into a Status that names `what`.
  template <typename Fn>
  Status Guard(const char* what, Fn&& fn);

  uint32_t NextTag() { return next_tag_++; }
  // The ring's Gloo slots: prefix 0x7d (Gloo's collectives use small prefixes, the
  // control channel 0x7e) and the running tag.
  uint64_t NextRingSlot() { return (0x7dull << 56) | NextTag(); }

  std::shared_ptr<gloo::Context> context_;
  PieceRing ring_;
  ButterflyAllreduce butterfly_;
  AllreduceAlgorithmOptions algorithm_;
  AllreduceAlgorithm last_algorithm_ = AllreduceAlgorithm::kRing;
  uint32_t next_tag_ = 1;
  Status broken_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_GLOO_BACKEND_H_
