#include "runtime/transport/gloo/piece_ring.h"

#include <cstring>

#include <gloo/transport/unbound_buffer.h>

#include "runtime/common/status.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace {

using Buffer = gloo::transport::UnboundBuffer;

// Where this rank reads and writes one segment of the plan.
struct Place {
  bool staged = false;
  const uint8_t* in = nullptr;  // not staged: the first element's input and output
  uint8_t* out = nullptr;
  Buffer* in_buf = nullptr;         // not staged: the input is sent from here, at in_off
  Buffer* out_buf = nullptr;        // received into and sent on from here, at out_off
  int64_t in_off = 0, out_off = 0;  // byte offsets in those buffers
};

// One call's Gloo buffers.
struct Buffers {
  std::unique_ptr<Buffer> scratch, staging;
  std::vector<std::unique_ptr<Buffer>> in, out;  // per memory run, at its first piece
};

// Places every segment of `plan` in this rank's memory, creating in `bufs` the Gloo
// buffers that the places name. A memory run is consecutive non-empty pieces whose
// inputs and outputs both lie end to end (views of one buffer, as a framework's
// gradient buckets are): a segment inside one run is sent from, reduced in and
// received into that memory. Any other segment (of a staged extent) is staged, and
// then `staging` grows to the plan's staging area.
void PlaceSegments(gloo::Context& context, const std::vector<AllreducePiece>& pieces,
                   const RingPlan& plan, int64_t elem, std::vector<uint8_t>* staging, Buffers* bufs,
                   std::vector<Place>* places) {
  const int n = static_cast<int>(pieces.size());
  std::vector<int> run(n, -1);           // run[i]: the first piece of i's run
  std::vector<int64_t> run_count(n, 0);  // at a run's first piece: its elements
  for (int i = 0, last = -1; i < n; ++i) {
    if (pieces[i].count == 0) continue;
    const bool joins =
        last >= 0 &&
        static_cast<const uint8_t*>(pieces[last].in) + pieces[last].count * elem == pieces[i].in &&
        static_cast<uint8_t*>(pieces[last].out) + pieces[last].count * elem == pieces[i].out;
    run[i] = joins ? run[last] : i;
    run_count[run[i]] += pieces[i].count;
    last = i;
  }

  bufs->in.resize(n);
  bufs->out.resize(n);
  auto out_buf = [&](int r) {
    if (!bufs->out[r])
      bufs->out[r] = context.createUnboundBuffer(pieces[r].out, run_count[r] * elem);
    return bufs->out[r].get();
  };
  auto in_buf = [&](int r) {  // a run in place has one buffer
    if (pieces[r].in == pieces[r].out) return out_buf(r);
    if (!bufs->in[r])
      bufs->in[r] =
          context.createUnboundBuffer(const_cast<void*>(pieces[r].in), run_count[r] * elem);
    return bufs->in[r].get();
  };

  places->assign(plan.segments.size(), Place());
  bool any_staged = false;
  for (size_t k = 0; k < plan.segments.size(); ++k) {
    const RingSegment& seg = plan.segments[k];
    const RingExtent& e = plan.extents[seg.extent];
    Place& place = (*places)[k];
    int first = e.first, one_run = run[e.first];
    int64_t from = seg.start - e.start;
    if (e.staged) {
      first = -1;
      ForEachStagedPart(plan, seg, [&](int i, int64_t f, int64_t, int64_t) {
        if (first < 0) first = i, from = f, one_run = run[i];
        if (run[i] != one_run) one_run = -1;
      });
    }
    if (one_run < 0) {
      place.staged = any_staged = true;
      place.out_off = (e.stage_off + seg.start - e.start) * elem;
      continue;
    }
    place.in = static_cast<const uint8_t*>(pieces[first].in) + from * elem;
    place.out = static_cast<uint8_t*>(pieces[first].out) + from * elem;
    place.in_buf = in_buf(one_run);
    place.out_buf = out_buf(one_run);
    place.in_off = place.in - static_cast<const uint8_t*>(pieces[one_run].in);
    place.out_off = place.out - static_cast<uint8_t*>(pieces[one_run].out);
  }
  if (any_staged) {
    if (static_cast<int64_t>(staging->size()) < plan.staged * elem)
      staging->resize(plan.staged * elem);
    bufs->staging = context.createUnboundBuffer(staging->data(), plan.staged * elem);
    for (Place& place : *places)
      if (place.staged) place.out_buf = bufs->staging.get();
  }
}

}  // namespace

PieceRing::PieceRing(std::shared_ptr<gloo::Context> context, PieceRingOptions options)
    : context_(std::move(context)), options_(options) {}

void PieceRing::Run(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
                    const Backend::FinishFn& finish, uint64_t rs_slot, uint64_t ag_slot) {
  Ring(pieces, dtype, op, finish, rs_slot, ag_slot, nullptr);
}

void PieceRing::ReduceScatter(void* buf, const std::vector<int64_t>& counts, DataType dtype,
                              ReduceOp op, uint64_t slot) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  HVD_CHECK(static_cast<int>(counts.size()) == context_->size);
  Ring({{buf, buf, total}}, dtype, op, nullptr, slot, slot, &counts);
}

void PieceRing::Ring(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
                     const Backend::FinishFn& finish, uint64_t rs_slot, uint64_t ag_slot,
                     const std::vector<int64_t>* scatter) {
  const int size = context_->size, rank = context_->rank;
  HVD_CHECK(size > 1);
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  const ReduceFn reduce = GetReduceFn(dtype, op);
  staged_bytes_ = 0;
  messages_sent_ = 0;
  counts_.clear();
  for (const AllreducePiece& piece : pieces) counts_.push_back(piece.count);
  PlanRing(size, rank, counts_, elem, options_, scatter, &plan_);
  const RingPlan& plan = plan_;
  if (plan.total == 0) return;

  const int64_t scratch_bytes = plan.slots * plan.seg_max * elem;
  if (static_cast<int64_t>(scratch_.size()) < scratch_bytes) scratch_.resize(scratch_bytes);
  Buffers bufs;
  bufs.scratch = context_->createUnboundBuffer(scratch_.data(), scratch_.size());
  std::vector<Place> places;
  PlaceSegments(*context_, pieces, plan, elem, &staging_, &bufs, &places);
  uint8_t* const staging = staging_.data();

  std::vector<Buffer*> sends;
  auto send = [&](Buffer* buf, int64_t offset, int64_t count, uint64_t slot) {
    buf->send(next, slot, static_cast<size_t>(offset), static_cast<size_t>(count * elem));
    sends.push_back(buf);
    ++messages_sent_;
  };
  auto post = [&](const RingReceive& rv) {
    const int64_t bytes = plan.segments[rv.segment].count * elem;
    if (rv.reduce) {
      bufs.scratch->recv(prev, rs_slot, static_cast<size_t>(rv.scratch * elem),
                         static_cast<size_t>(bytes));
    } else {
      const Place& place = places[rv.segment];
      place.out_buf->recv(prev, ag_slot, static_cast<size_t>(place.out_off),
                          static_cast<size_t>(bytes));
    }
  };

  // Every allgather receive is posted now, and the reduce-scatter's as far as the
  // slots go, before any data is sent (piece_ring.h, "Posting ahead").
  const size_t count = plan.receives.size();
  const size_t rs_total = static_cast<size_t>(plan.rs_receives);
  size_t posted = 0;
  auto post_ahead = [&](size_t done) {
    for (; posted < rs_total && posted < done + static_cast<size_t>(plan.slots); ++posted)
      post(plan.receives[posted]);
  };
  post_ahead(0);  // first: the previous rank's first sends wait on these
  for (size_t k = rs_total; k < count; ++k) post(plan.receives[k]);

  // Reduce-scatter step 0: this rank's own input of its send block.
  for (int k = plan.block_begin[plan.send_block]; k < plan.block_begin[plan.send_block + 1]; ++k) {
    const RingSegment& seg = plan.segments[k];
    const Place& place = places[k];
    if (place.staged) {
      ForEachStagedPart(plan, seg, [&](int i, int64_t from, int64_t at, int64_t c) {
        std::memcpy(staging + at * elem, static_cast<const uint8_t*>(pieces[i].in) + from * elem,
                    c * elem);
      });
      staged_bytes_ += seg.count * elem;
      send(bufs.staging.get(), place.out_off, seg.count, rs_slot);
    } else {
      send(place.in_buf, place.in_off, seg.count, rs_slot);
    }
  }

  for (size_t k = 0; k < count; ++k) {
    post_ahead(k);
    const RingReceive& rv = plan.receives[k];
    const RingSegment& seg = plan.segments[rv.segment];
    const Place& place = places[rv.segment];
    if (rv.reduce) {
      bufs.scratch->waitRecv();
      const uint8_t* got = scratch_.data() + rv.scratch * elem;
      if (place.staged) {
        const int64_t at0 = place.out_off / elem;
        ForEachStagedPart(plan, seg, [&](int i, int64_t from, int64_t at, int64_t c) {
          reduce(staging + at * elem, static_cast<const uint8_t*>(pieces[i].in) + from * elem,
                 got + (at - at0) * elem, static_cast<size_t>(c));
        });
        staged_bytes_ += seg.count * elem;
      } else {
        reduce(place.out, place.in, got, static_cast<size_t>(seg.count));
      }
      if (rv.last_rs && finish)
        finish(place.staged ? staging + place.out_off : place.out, seg.count);
    } else {
      place.out_buf->waitRecv();
    }
    // A reduce-scatter step's result goes on in the next one, or, finished, as the
    // allgather's first step.
    if (rv.forward)
      send(place.out_buf, place.out_off, seg.count, rv.forwards_reduce() ? rs_slot : ag_slot);
    // This rank's final bytes of a staged segment go out to the tensors.
    if (place.staged && (rv.last_rs || !rv.reduce)) {
      ForEachStagedPart(plan, seg, [&](int i, int64_t from, int64_t at, int64_t c) {
        std::memcpy(static_cast<uint8_t*>(pieces[i].out) + from * elem, staging + at * elem,
                    c * elem);
      });
      staged_bytes_ += seg.count * elem;
    }
  }
  for (Buffer* b : sends) b->waitSend();
}

}  // namespace hvd
