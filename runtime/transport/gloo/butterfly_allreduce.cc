#include "runtime/transport/gloo/butterfly_allreduce.h"

#include <algorithm>
#include <cstring>

#include <gloo/transport/unbound_buffer.h>

#include "runtime/common/status.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {

ButterflyAllreduce::ButterflyAllreduce(std::shared_ptr<gloo::Context> context)
    : context_(std::move(context)) {}

void ButterflyAllreduce::Run(const std::vector<AllreducePiece>& pieces, DataType dtype,
                             ReduceOp op, const Backend::FinishFn& finish, uint64_t rs_slot,
                             uint64_t ag_slot) {
  using Kind = ButterflyStep::Kind;
  HVD_CHECK(context_->size > 1);
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  int64_t total = 0;
  for (const AllreducePiece& p : pieces) total += p.count;
  messages_sent_ = 0;
  if (total == 0) return;

  // The work buffer: the single piece itself, or the staging area.
  const bool single = pieces.size() == 1;
  uint8_t* work = nullptr;
  std::unique_ptr<gloo::transport::UnboundBuffer> single_buf;
  gloo::transport::UnboundBuffer* work_buf = nullptr;
  if (single) {
    const AllreducePiece& p = pieces[0];
    if (p.in != p.out) std::memcpy(p.out, p.in, total * elem);
    work = static_cast<uint8_t*>(p.out);
    single_buf = context_->createUnboundBuffer(work, total * elem);
    work_buf = single_buf.get();
  } else {
    if (static_cast<int64_t>(staging_.size()) < total * elem || !staging_buf_) {
      staging_.resize(total * elem);
      staging_buf_ = context_->createUnboundBuffer(staging_.data(), staging_.size());
    }
    work = staging_.data();
    work_buf = staging_buf_.get();
    uint8_t* at = work;
    for (const AllreducePiece& p : pieces) {
      if (p.count > 0) std::memcpy(at, p.in, p.count * elem);
      at += p.count * elem;
    }
  }

  PlanHalvingDoubling(context_->size, context_->rank, total, &plan_);
  int64_t scratch_elems = 0;
  for (const ButterflyStep& s : plan_.steps)
    if (s.reduce) scratch_elems = std::max(scratch_elems, s.recv_count());
  if (static_cast<int64_t>(scratch_.size()) < scratch_elems * elem || !scratch_buf_) {
    scratch_.resize(std::max<int64_t>(scratch_elems * elem, 1));
    scratch_buf_ = context_->createUnboundBuffer(scratch_.data(), scratch_.size());
  }

  const ReduceFn reduce = GetReduceFn(dtype, op);
  // A core rank finishes its own block once the reduce-scatter has reduced it, before
  // the allgather hands it on: each element is finished once, by its block's owner,
  // as in the ring.
  const int size = context_->size, rank = context_->rank, p = ButterflyCore(size);
  bool finished = rank >= p;
  auto finish_own_block = [&] {
    finished = true;
    const int64_t begin = total * rank / p, end = total * (rank + 1) / p;
    if (finish && end > begin) finish(work + begin * elem, end - begin);
  };
  for (const ButterflyStep& s : plan_.steps) {
    if (!finished && (s.kind == Kind::kAllgather || s.kind == Kind::kFoldOut)) finish_own_block();
    const uint64_t slot = s.kind == Kind::kFoldIn || s.kind == Kind::kReduceScatter ? rs_slot : ag_slot;
    const bool recv = s.recv_count() > 0, send = s.send_count() > 0;
    gloo::transport::UnboundBuffer* into = s.reduce ? scratch_buf_.get() : work_buf;
    if (recv)
      into->recv(s.peer, slot, s.reduce ? 0 : s.recv_begin * elem, s.recv_count() * elem);
    if (send) {
      work_buf->send(s.peer, slot, s.send_begin * elem, s.send_count() * elem);
      ++messages_sent_;
    }
    if (recv) into->waitRecv();
    if (send) work_buf->waitSend();
    if (recv && s.reduce) {
      uint8_t* dst = work + s.recv_begin * elem;
      reduce(dst, dst, scratch_.data(), static_cast<size_t>(s.recv_count()));
    }
  }

  if (!finished) finish_own_block();
  if (single) return;
  const uint8_t* at = work;
  for (const AllreducePiece& piece : pieces) {
    if (piece.count > 0) std::memcpy(piece.out, at, piece.count * elem);
    at += piece.count * elem;
  }
}

}  // namespace hvd
