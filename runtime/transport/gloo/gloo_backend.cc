#include "runtime/transport/gloo/gloo_backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/transport/tcp/device.h>


namespace hvd {
namespace {

// Gloo says "Timed out" for its own deadline; everything else is a lost peer.
Status FromGlooException(const char* what, const std::exception& e) {
  std::string msg = e.what();
  if (msg.find("Timed out") != std::string::npos || msg.find("timed out") != std::string::npos)
    return Status::Timeout(std::string("gloo ") + what + " timed out: " + msg);
  return Status::RemoteError(std::string("gloo ") + what + " failed: " + msg);
}

}  // namespace

std::string GlooBindHostname(const std::string& hostname, int local_rank) {
  if (hostname != "127.0.0.1" || local_rank <= 0) return hostname;
  return "127.0." + std::to_string(local_rank / 250) + "." + std::to_string(1 + local_rank % 250);
}

Status CreateGlooDevice(const std::string& hostname, const std::string& iface,
                        std::shared_ptr<gloo::transport::Device>* out) {
  gloo::transport::tcp::attr attr;
  if (!iface.empty()) {
    attr.iface = iface;
  } else {
    attr.hostname = hostname.empty() ? "127.0.0.1" : hostname;
  }
  try {
    *out = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("cannot create a Gloo TCP device on " +
                                   (iface.empty() ? "host '" + attr.hostname + "'"
                                                  : "interface '" + iface + "'") +
                                   ": " + e.what());
  }
  return Status::OK();
}

namespace {

// A Gloo context whose full mesh is connected with one store key per pair (see
// ConnectGlooContext); Gloo's own connectFullMesh publishes each rank's addresses
// for all its peers under one key that every peer reads whole.
class MeshContext : public gloo::Context {
 public:
  MeshContext(int rank, int size) : gloo::Context(rank, size) {}

  // Gloo throws on a failed connect; a failed store call returns its status.
  Status Connect(Store& store, const std::shared_ptr<gloo::transport::Device>& device,
                 std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto context = device->createContext(rank, size);
    context->setTimeout(timeout);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      auto& pair = context->createPair(peer);
      pair->setLocalRank(0);  // unused by the TCP transport
      const std::vector<char> bytes = pair->address().bytes();
      HVD_RETURN_IF_ERROR(store.Set(PairKey(rank, peer), std::string(bytes.begin(), bytes.end())));
    }
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const auto left = std::max(std::chrono::milliseconds(0),
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()));
      std::string address;
      HVD_RETURN_IF_ERROR(store.Get(PairKey(peer, rank), left, &address)
                              .Prepend("rank " + std::to_string(rank) + " waiting for rank " +
                                       std::to_string(peer) + "'s Gloo address"));
      context->getPair(peer)->connect(std::vector<char>(address.begin(), address.end()));
    }
    device_ = device;
    transportContext_ = std::move(context);
    return Status::OK();
  }

 private:
  // Where rank `from` publishes its pair's address for rank `to`.
  static std::string PairKey(int from, int to) {
    return "gloo/" + std::to_string(from) + "/" + std::to_string(to);
  }
};

}  // namespace

Status ConnectGlooContext(const std::shared_ptr<Store>& store,
                          const std::shared_ptr<gloo::transport::Device>& device, int rank,
                          int size, std::chrono::milliseconds timeout,
                          std::shared_ptr<gloo::Context>* out) {
  auto context = std::make_shared<MeshContext>(rank, size);
  context->setTimeout(timeout);
  Status connected;
  try {
    connected = context->Connect(*store, device, timeout);
  } catch (const std::exception& e) {
    return Status::Timeout("rank " + std::to_string(rank) + " could not connect to its " +
                           std::to_string(size - 1) + " peer(s) within " +
                           std::to_string(timeout.count()) + " ms: " + e.what());
  }
  HVD_RETURN_IF_ERROR(connected);
  *out = context;
  return Status::OK();
}

GlooBackend::GlooBackend(std::shared_ptr<gloo::Context> context, PieceRingOptions ring_options,
                         AllreduceAlgorithmOptions algorithm)
    : context_(std::move(context)),
      ring_(context_, ring_options),
      butterfly_(context_),
      algorithm_(algorithm) {}

template <typename Fn>
Status GlooBackend::Guard(const char* what, Fn&& fn) {
  if (!broken_.ok()) return broken_;
  try {
    fn();
  } catch (const std::exception& e) {
    broken_ = FromGlooException(what, e);
    return broken_;
  }
  return Status::OK();
}

Status GlooBackend::Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) {
  if (size() == 1 || count == 0) return Status::OK();
  return AllreducePieces({{buf, buf, count}}, dtype, op, nullptr);
}

Status GlooBackend::AllreducePieces(const std::vector<AllreducePiece>& pieces, DataType dtype,
                                    ReduceOp op, const FinishFn& finish) {
  if (size() == 1) {
    AllreducePiecesAlone(pieces, dtype, finish);
    return Status::OK();
  }
  const uint64_t rs_slot = NextRingSlot(), ag_slot = NextRingSlot();  // one per phase
  int64_t count = 0;
  for (const AllreducePiece& p : pieces) count += p.count;
  last_algorithm_ = ChooseAllreduceAlgorithm(count * static_cast<int64_t>(DataTypeSize(dtype)),
                                             size(), algorithm_);
  if (last_algorithm_ == AllreduceAlgorithm::kHalvingDoubling)
    return Guard("allreduce", [&] { butterfly_.Run(pieces, dtype, op, finish, rs_slot, ag_slot); });
  return Guard("allreduce", [&] { ring_.Run(pieces, dtype, op, finish, rs_slot, ag_slot); });
}

Status GlooBackend::Allgatherv(const void* in, void* out,
                               const std::vector<int64_t>& bytes_per_rank) {
  HVD_CHECK(static_cast<int>(bytes_per_rank.size()) == size());
  const int64_t total = std::accumulate(bytes_per_rank.begin(), bytes_per_rank.end(), int64_t{0});
  if (size() == 1) {
    if (total > 0 && in != out) std::memmove(out, in, total);
    return Status::OK();
  }
  if (total == 0) return Status::OK();
  return Guard("allgather", [&] {
    gloo::AllgathervOptions opts(context_);
    std::vector<size_t> counts(bytes_per_rank.begin(), bytes_per_rank.end());
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)),
                  counts[context_->rank]);
    opts.setOutput(static_cast<uint8_t*>(out), counts);
    opts.setTag(NextTag());
    gloo::allgatherv(opts);
  });
}

Status GlooBackend::Broadcast(void* buf, int64_t bytes, int root) {
  if (size() == 1 || bytes == 0) return Status::OK();
  return Guard("broadcast", [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(buf), static_cast<size_t>(bytes));
    opts.setRoot(root);
    opts.setTag(NextTag());
    gloo::broadcast(opts);
  });
}

Status GlooBackend::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                              const std::vector<int64_t>& recv_bytes) {
  HVD_CHECK(static_cast<int>(send_bytes.size()) == size());
  HVD_CHECK(static_cast<int>(recv_bytes.size()) == size());
  if (size() == 1) {
    if (send_bytes[0] > 0 && in != out) std::memmove(out, in, send_bytes[0]);
    return Status::OK();
  }
  const int64_t total_send = std::accumulate(send_bytes.begin(), send_bytes.end(), int64_t{0});
  const int64_t total_recv = std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0});
  // Gloo needs non-null buffers even for empty transfers.
  uint8_t dummy_in = 0, dummy_out = 0;
  return Guard("alltoall", [&] {
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(total_send > 0 ? const_cast<uint8_t*>(static_cast<const uint8_t*>(in)) : &dummy_in,
                  send_bytes);
    opts.setOutput(total_recv > 0 ? static_cast<uint8_t*>(out) : &dummy_out, recv_bytes);
    opts.setTag(NextTag());
    gloo::alltoallv(opts);
  });
}

Status GlooBackend::ReduceScatter(void* buf, void* out, const std::vector<int64_t>& recv_counts,
                                  DataType dtype, ReduceOp op) {
  HVD_CHECK(static_cast<int>(recv_counts.size()) == size());
  const int64_t total = std::accumulate(recv_counts.begin(), recv_counts.end(), int64_t{0});
  if (size() > 1 && total > 0) {
    const uint64_t slot = NextRingSlot();
    HVD_RETURN_IF_ERROR(
        Guard("reducescatter", [&] { ring_.ReduceScatter(buf, recv_counts, dtype, op, slot); }));
  }
  int64_t offset = 0;
  for (int r = 0; r < rank(); ++r) offset += recv_counts[r];
  const size_t elem = DataTypeSize(dtype);
  if (recv_counts[rank()] > 0)
    std::memmove(out, static_cast<uint8_t*>(buf) + offset * elem, recv_counts[rank()] * elem);
  return Status::OK();
}

Status GlooBackend::Barrier() {
  if (size() == 1) return Status::OK();
  return Guard("barrier", [&] {
    gloo::BarrierOptions opts(context_);
    opts.setTag(NextTag());
    gloo::barrier(opts);
  });
}

}  // namespace hvd
