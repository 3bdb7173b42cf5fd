#include "runtime/transport/gloo/piece_ring.h"

#include <algorithm>
#include <cstring>

#include <gloo/transport/unbound_buffer.h>

#include "runtime/common/status.h"
#include "runtime/kernels/reduce_kernels.h"

namespace hvd {
namespace {

using Buffer = gloo::transport::UnboundBuffer;

// Consecutive elements of the logical buffer held the same way: one large piece
// (direct), or a run of small pieces that share a stretch of the staging area.
struct Extent {
  bool staged;
  int first, last;  // pieces [first, last]; direct: first == last
  int64_t start;    // logical element offset
  int64_t count;
  int64_t stage_off;  // staged: element offset in the staging area
};

// A message: `count` logical elements from `start`, inside one extent, and where
// this rank reads and writes them: in the staging area, or straight in memory (a
// large piece, or small pieces that lie end to end in memory, inputs and outputs
// alike). That is each rank's own choice: the messages are the same either way.
struct Segment {
  int extent;
  int64_t start, count;
  bool staged = false;
  const uint8_t* in = nullptr;  // direct: the first element's input and output
  uint8_t* out = nullptr;
  gloo::transport::UnboundBuffer* in_buf = nullptr;  // direct: sent from, at in_off
  gloo::transport::UnboundBuffer* out_buf = nullptr;  // received into, sent from
  int64_t in_off = 0, out_off = 0;                    // byte offsets in those buffers
};

// One receive from the previous rank, in the order they arrive.
struct Receive {
  const Segment* seg;
  bool reduce;      // reduce-scatter (into scratch, then reduced); else allgather
  bool last_rs;     // the final reduce-scatter step: this rank's block, finished here
  bool forward;     // sent on to the next rank once processed
  int64_t scratch;  // reduce-scatter: byte offset of its scratch slot
};

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
  const int n = static_cast<int>(pieces.size());
  staged_bytes_ = 0;
  messages_sent_ = 0;

  std::vector<int64_t> pstart(n + 1, 0);
  for (int i = 0; i < n; ++i) pstart[i + 1] = pstart[i] + pieces[i].count;
  const int64_t total = pstart[n];
  if (total == 0) return;

  // Extents, in logical order. A small piece is staged only among other small ones:
  // alone (one buffer, or between large pieces) it is a message of its own anyway.
  const int64_t direct_min = std::max<int64_t>(1, options_.direct_min_bytes / elem);
  auto small = [&](int i) {
    return i >= 0 && i < n && pieces[i].count > 0 && pieces[i].count < direct_min;
  };
  std::vector<Extent> extents;
  int64_t staged = 0;
  int prev_nonempty = -1;
  for (int i = 0; i < n; ++i) {
    const int64_t count = pieces[i].count;
    if (count == 0) continue;
    int next_nonempty = i + 1;
    while (next_nonempty < n && pieces[next_nonempty].count == 0) ++next_nonempty;
    const bool alone = !small(prev_nonempty) && !small(next_nonempty);
    prev_nonempty = i;
    if (count >= direct_min || alone) {
      extents.push_back({false, i, i, pstart[i], count, 0});
      continue;
    }
    // The last extent, if staged, ends right here (empty pieces add nothing).
    if (!extents.empty() && extents.back().staged) {
      extents.back().last = i;
      extents.back().count += count;
    } else {
      extents.push_back({true, i, i, pstart[i], count, staged});
    }
    staged += count;
  }

  // One block per rank (block b ends reduced on rank b; equal blocks, or the
  // reduce-scatter's counts), each cut into segments at extent ends and every
  // seg_max: larger segments when every block is small (PieceRingOptions).
  int64_t largest_block = 0;
  for (int b = 0; b < size; ++b)
    largest_block = std::max(largest_block, scatter != nullptr
                                                ? (*scatter)[b]
                                                : total * (b + 1) / size - total * b / size);
  const size_t seg_bytes = largest_block * elem <= static_cast<int64_t>(options_.small_block_bytes)
                               ? std::max(options_.segment_bytes, options_.small_block_segment_bytes)
                               : options_.segment_bytes;
  const int64_t seg_max = std::max<int64_t>(1, static_cast<int64_t>(seg_bytes) / elem);
  std::vector<std::vector<Segment>> blocks(size);
  size_t x = 0;
  int64_t lo = 0;
  for (int b = 0; b < size; ++b) {
    const int64_t hi = scatter != nullptr ? lo + (*scatter)[b] : total * (b + 1) / size;
    for (int64_t pos = lo; pos < hi;) {
      while (extents[x].start + extents[x].count <= pos) ++x;
      const int64_t end = std::min({hi, extents[x].start + extents[x].count, pos + seg_max});
      blocks[b].push_back({static_cast<int>(x), pos, end - pos});
      pos = end;
    }
    lo = hi;
  }
  auto block = [&](int b) -> const std::vector<Segment>& {
    return blocks[((b % size) + size) % size];
  };

  // What arrives from the previous rank, in order: reduce-scatter steps 0..size-2
  // (blocks rank-2, rank-3, ..., rank), then allgather steps (blocks rank-1,
  // rank-2, ..., rank+1). Everything but the last step is forwarded. A
  // reduce-scatter alone stops at its own block.
  std::vector<Receive> receives;
  int64_t rs_count = 0;
  const bool allgather = scatter == nullptr;
  for (int s = 0; s < size - 1; ++s)
    for (const Segment& seg : block(rank - s - 2))
      receives.push_back({&seg, true, s == size - 2, allgather || s < size - 2, 0}), ++rs_count;
  for (int s = 0; allgather && s < size - 1; ++s)
    for (const Segment& seg : block(rank - s - 1))
      receives.push_back({&seg, false, false, s < size - 2, 0});
  // Reduce-scatter receives land in scratch slots, as many as max_scratch_bytes
  // holds (all of them, for fused responses up to that size).
  const int64_t slots = std::max<int64_t>(
      1, std::min<int64_t>(rs_count,
                           static_cast<int64_t>(options_.max_scratch_bytes) / (seg_max * elem)));
  for (int64_t k = 0; k < rs_count; ++k) receives[k].scratch = (k % slots) * seg_max * elem;
  if (static_cast<int64_t>(scratch_.size()) < slots * seg_max * elem)
    scratch_.resize(slots * seg_max * elem);

  // This rank's memory runs: consecutive non-empty pieces whose inputs and outputs
  // both lie end to end (views of one buffer, as a framework's gradient buckets
  // are) form one stretch of memory, which a segment inside it is sent from,
  // reduced in and received into without copies. run[i]: the first piece of i's run.
  std::vector<int> run(n, -1);
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

  // Gloo buffers: scratch, staging, and each memory run's input and output.
  std::unique_ptr<Buffer> scratch_buf =
      context_->createUnboundBuffer(scratch_.data(), scratch_.size());
  std::unique_ptr<Buffer> staging_buf;
  std::vector<std::unique_ptr<Buffer>> in_bufs(n), out_bufs(n);
  auto out_buf = [&](int r) {
    if (!out_bufs[r])
      out_bufs[r] = context_->createUnboundBuffer(pieces[r].out, run_count[r] * elem);
    return out_bufs[r].get();
  };
  auto in_buf = [&](int r) {  // a run in place has one buffer
    if (pieces[r].in == pieces[r].out) return out_buf(r);
    if (!in_bufs[r])
      in_bufs[r] =
          context_->createUnboundBuffer(const_cast<void*>(pieces[r].in), run_count[r] * elem);
    return in_bufs[r].get();
  };

  // Calls f(piece, element offset in the piece, element offset in staging, count)
  // for each part of a segment of a staged extent.
  auto for_parts = [&](const Segment& seg, auto&& f) {
    const Extent& e = extents[seg.extent];
    const int64_t end = seg.start + seg.count;
    int i = static_cast<int>(
                std::upper_bound(pstart.begin() + e.first, pstart.begin() + e.last + 1, seg.start) -
                pstart.begin()) -
            1;
    for (; i <= e.last && pstart[i] < end; ++i) {
      const int64_t lo = std::max(seg.start, pstart[i]), hi = std::min(end, pstart[i + 1]);
      if (hi > lo) f(i, lo - pstart[i], e.stage_off + (lo - e.start), hi - lo);
    }
  };

  // Where each segment lives on this rank: in one memory run, or staged.
  bool any_staged = false;
  for (auto& segs : blocks) {
    for (Segment& seg : segs) {
      const Extent& e = extents[seg.extent];
      int first = e.first, one_run = run[e.first];
      int64_t from = seg.start - e.start;
      if (e.staged) {
        first = -1;
        for_parts(seg, [&](int i, int64_t f, int64_t, int64_t) {
          if (first < 0) first = i, from = f, one_run = run[i];
          if (run[i] != one_run) one_run = -1;
        });
      }
      if (one_run < 0) {
        seg.staged = any_staged = true;
        seg.out_off = (e.stage_off + seg.start - e.start) * elem;
        continue;
      }
      seg.in = static_cast<const uint8_t*>(pieces[first].in) + from * elem;
      seg.out = static_cast<uint8_t*>(pieces[first].out) + from * elem;
      seg.in_buf = in_buf(one_run);
      seg.out_buf = out_buf(one_run);
      seg.in_off = seg.in - static_cast<const uint8_t*>(pieces[one_run].in);
      seg.out_off = seg.out - static_cast<uint8_t*>(pieces[one_run].out);
    }
  }
  if (any_staged) {
    if (static_cast<int64_t>(staging_.size()) < staged * elem) staging_.resize(staged * elem);
    staging_buf = context_->createUnboundBuffer(staging_.data(), staged * elem);
    for (auto& segs : blocks)
      for (Segment& seg : segs)
        if (seg.staged) seg.out_buf = staging_buf.get();
  }
  uint8_t* const staging = staging_.data();

  std::vector<Buffer*> sends;
  auto send = [&](Buffer* buf, int64_t offset, int64_t count, uint64_t slot) {
    buf->send(next, slot, static_cast<size_t>(offset), static_cast<size_t>(count * elem));
    sends.push_back(buf);
    ++messages_sent_;
  };
  auto post = [&](const Receive& rv) {
    const int64_t bytes = rv.seg->count * elem;
    if (rv.reduce) {
      scratch_buf->recv(prev, rs_slot, static_cast<size_t>(rv.scratch), static_cast<size_t>(bytes));
    } else {
      rv.seg->out_buf->recv(prev, ag_slot, static_cast<size_t>(rv.seg->out_off),
                            static_cast<size_t>(bytes));
    }
  };

  // Gloo sends a message only once its receive is posted, and the notice that it is
  // posted queues behind the data this rank is sending; posted one by one, receives
  // would halve the rate of each direction. So every allgather receive is posted now
  // (they land in the tensors or the staging area), and the reduce-scatter receives
  // as far as the scratch slots go, before any data is sent.
  const size_t count = receives.size();
  const size_t rs_total = static_cast<size_t>(rs_count);
  size_t posted = 0;
  auto post_ahead = [&](size_t done) {
    for (; posted < rs_total && posted < done + static_cast<size_t>(slots); ++posted)
      post(receives[posted]);
  };
  post_ahead(0);  // first: the previous rank's first sends wait on these
  for (size_t k = rs_total; k < count; ++k) post(receives[k]);

  // Reduce-scatter step 0: this rank's own input of block `rank - 1`.
  for (const Segment& seg : block(rank - 1)) {
    if (seg.staged) {
      for_parts(seg, [&](int i, int64_t from, int64_t at, int64_t c) {
        std::memcpy(staging + at * elem, static_cast<const uint8_t*>(pieces[i].in) + from * elem,
                    c * elem);
      });
      staged_bytes_ += seg.count * elem;
      send(staging_buf.get(), seg.out_off, seg.count, rs_slot);
    } else {
      send(seg.in_buf, seg.in_off, seg.count, rs_slot);
    }
  }

  for (size_t k = 0; k < count; ++k) {
    post_ahead(k);
    const Receive& rv = receives[k];
    const Segment& seg = *rv.seg;
    if (rv.reduce) {
      scratch_buf->waitRecv();
      const uint8_t* got = scratch_.data() + rv.scratch;
      if (seg.staged) {
        const int64_t at0 = seg.out_off / elem;
        for_parts(seg, [&](int i, int64_t from, int64_t at, int64_t c) {
          reduce(staging + at * elem, static_cast<const uint8_t*>(pieces[i].in) + from * elem,
                 got + (at - at0) * elem, static_cast<size_t>(c));
        });
        staged_bytes_ += seg.count * elem;
      } else {
        reduce(seg.out, seg.in, got, static_cast<size_t>(seg.count));
      }
      if (rv.last_rs && finish) finish(seg.staged ? staging + seg.out_off : seg.out, seg.count);
    } else {
      seg.out_buf->waitRecv();
    }
    // A reduce-scatter step's result goes on in the next one, or, finished, as the
    // allgather's first step.
    if (rv.forward)
      send(seg.out_buf, seg.out_off, seg.count, rv.reduce && !rv.last_rs ? rs_slot : ag_slot);
    // This rank's final bytes of a staged segment go out to the tensors.
    if (seg.staged && (rv.last_rs || !rv.reduce)) {
      for_parts(seg, [&](int i, int64_t from, int64_t at, int64_t c) {
        std::memcpy(static_cast<uint8_t*>(pieces[i].out) + from * elem, staging + at * elem,
                    c * elem);
      });
      staged_bytes_ += seg.count * elem;
    }
  }
  for (Buffer* b : sends) b->waitSend();
}

}  // namespace hvd
