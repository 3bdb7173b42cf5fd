// The shared-memory backend.
//
// Terms. The segment holds one *staging area* per rank and one *result area*, each
// `segment_bytes` long and cut into `depth` *slots* (a power of two, at least 2).
// A collective moves its buffer in *rounds*: round k carries the k-th *segment* of
// the buffer (at most one slot) through slot g % depth, where g is the round's
// number counted over the backend's whole life. Every rank runs the same rounds in
// the same order, so g agrees everywhere without being exchanged.
//
// Each rank owns three counters in the segment header, each holding the number of
// the last round it finished a step of, plus one:
//   staged  - it has written its part of round g into its staging slot;
//   read    - it has finished reading every rank's staging slot of round g;
//   out     - it has finished reading the result slot of round g.
// A rank may write staging slot s for round g once every rank's `read` has passed
// g - depth (the last round that used s), and the result slot once every `out` has.
// With depth 2 this is double buffering: a rank stages round k+1 before it works on
// round k, so copying in one segment overlaps the peers' reduction of the previous.
//
// All-reduce is a reduce-scatter followed by an all-gather, per segment. The
// segment is cut into `size` *pieces* at 64-byte boundaries. Every rank stages the
// segment (all pieces but its own, which it reads straight from its buffer); rank r
// then reduces piece r across ranks in rank order 0..N-1 (dst = x0 op x1, then
// dst = dst op x2, ...) into the result slot; once every rank has reduced its piece,
// every rank copies the whole reduced segment back into its buffer. Each element is
// reduced by exactly one rank and copied to all, so every rank ends with identical
// bytes, and the order never depends on timing.
//
// Reduce-scatter stages, per round, the k-th *block chunk* of every rank's block
// (rank d's chunk in sub-slot d of the staging slot, `slot / size` bytes); rank r
// reduces sub-slot r across ranks in rank order straight into its output. Allgatherv
// stages the k-th chunk of each rank's input and every rank copies all of them out;
// broadcast stages the root's chunk only; alltoallv first exchanges each rank's
// largest send (to agree on the number of rounds), then stages, per round, the k-th
// chunk of the block for each destination in that destination's sub-slot. A
// barrier is one round that carries no data.
//
// Waiting is ShmSegment::WaitAtLeast: a short spin, then a futex sleep, bounded by
// the timeout, with periodic checks that the peers are alive.
#include "runtime/transport/shm/shm_backend.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "runtime/kernels/reduce_kernels.h"
#include "runtime/transport/shm/shm_segment.h"

namespace hvd {
namespace {

enum Counter : int { kStaged = 0, kRead = 1, kOut = 2, kNumCounters = 3 };

// Slots of at most this size (more of them when segment_bytes is larger) keep a
// round's working set in cache while peers drift apart by up to `depth` rounds.
constexpr size_t kMaxSlotBytes = 1u << 20;
constexpr int kMaxDepth = 16;

int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(v, hi)); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

using FinishFn = Backend::FinishFn;

// A logical buffer of `pieces` laid end to end, addressed in elements.
class PieceList {
 public:
  PieceList(std::vector<AllreducePiece> pieces, DataType dtype)
      : pieces_(std::move(pieces)), elem_(static_cast<int64_t>(DataTypeSize(dtype))) {
    starts_.reserve(pieces_.size() + 1);
    starts_.push_back(0);
    for (const auto& p : pieces_) starts_.push_back(starts_.back() + p.count);
  }

  int64_t count() const { return starts_.back(); }

  // Copies inputs [lo, hi) to dst.
  void Gather(int64_t lo, int64_t hi, uint8_t* dst) const {
    ForRange(lo, hi, [&](const AllreducePiece& p, int64_t at, int64_t n, int64_t logical) {
      std::memcpy(dst + (logical - lo) * elem_, static_cast<const uint8_t*>(p.in) + at * elem_,
                  n * elem_);
    });
  }

  // fn(input, output, logical offset, elements) for each stretch of [lo, hi)
  // that lies in one piece, in order.
  template <typename Fn>
  void ForEachPiece(int64_t lo, int64_t hi, Fn&& fn) const {
    ForRange(lo, hi, [&](const AllreducePiece& p, int64_t at, int64_t n, int64_t logical) {
      fn(static_cast<const uint8_t*>(p.in) + at * elem_, static_cast<uint8_t*>(p.out) + at * elem_,
         logical, n);
    });
  }

  // Copies src (results [lo, hi)) to the outputs, finishing each stretch.
  void Scatter(int64_t lo, int64_t hi, const uint8_t* src, const FinishFn& finish) const {
    ForRange(lo, hi, [&](const AllreducePiece& p, int64_t at, int64_t n, int64_t logical) {
      uint8_t* out = static_cast<uint8_t*>(p.out) + at * elem_;
      std::memcpy(out, src + (logical - lo) * elem_, n * elem_);
      if (finish) finish(out, n);
    });
  }

 private:
  // The piece holding element `at` (the last of any empty pieces before it).
  size_t Find(int64_t at) const {
    return static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), at) -
                               starts_.begin()) - 1;
  }

  // fn(piece, element offset in it, elements, logical offset) over [lo, hi).
  template <typename Fn>
  void ForRange(int64_t lo, int64_t hi, Fn&& fn) const {
    for (size_t i = lo < hi ? Find(lo) : pieces_.size(); lo < hi; ++i) {
      const int64_t n = std::min(hi, starts_[i + 1]) - lo;
      if (n <= 0) continue;
      fn(pieces_[i], lo - starts_[i], n, lo);
      lo += n;
    }
  }

  std::vector<AllreducePiece> pieces_;
  std::vector<int64_t> starts_;
  int64_t elem_;
};

class ShmBackend : public Backend {
 public:
  ShmBackend(std::unique_ptr<ShmSegment> seg, size_t slot_bytes, int depth)
      : seg_(std::move(seg)), slot_bytes_(slot_bytes), depth_(depth) {
    sub_bytes_ = slot_bytes_ / size() / 64 * 64;
    // Touch our own staging slots now rather than in the first collective.
    std::memset(Stage(rank(), 0), 0, slot_bytes_ * depth_);
    if (rank() == 0) std::memset(Result(0), 0, slot_bytes_ * depth_);
  }

  const char* Name() const override { return "shm"; }
  int rank() const override { return seg_->rank(); }
  int size() const override { return seg_->size(); }

  Status Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) override {
    if (!broken_.ok()) return broken_;
    if (size() == 1 || count == 0) return Status::OK();
    return Check("allreduce", AllreduceImpl(PieceList({{buf, buf, count}}, dtype), dtype, op,
                                            nullptr));
  }

  bool SupportsPieces() const override { return true; }
  Status AllreducePieces(const std::vector<AllreducePiece>& pieces, DataType dtype, ReduceOp op,
                         const FinishFn& finish) override {
    if (!broken_.ok()) return broken_;
    PieceList list(pieces, dtype);
    if (size() == 1 || list.count() == 0) {
      AllreducePiecesAlone(pieces, dtype, finish);
      return Status::OK();
    }
    return Check("allreduce", AllreduceImpl(list, dtype, op, finish));
  }

  Status Allgatherv(const void* in, void* out, const std::vector<int64_t>& bytes_per_rank) override;
  Status Broadcast(void* buf, int64_t bytes, int root) override;
  Status Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                   const std::vector<int64_t>& recv_bytes) override;
  Status ReduceScatter(void* buf, void* out, const std::vector<int64_t>& recv_counts,
                       DataType dtype, ReduceOp op) override;

  void Abort(const Status& why) override {
    if (broken_.ok()) broken_ = why;
    seg_->Abort(why);
  }

  Status Barrier() override {
    if (!broken_.ok()) return broken_;
    if (size() == 1) return Status::OK();
    return Check("barrier", Exchange(1, [](int64_t, uint8_t*) {}, [](int64_t, int) {}));
  }

 private:
  uint8_t* Stage(int r, int slot) const {
    return seg_->data() + (static_cast<size_t>(r) * depth_ + slot) * slot_bytes_;
  }
  uint8_t* Result(int slot) const {
    return seg_->data() + (static_cast<size_t>(size()) * depth_ + slot) * slot_bytes_;
  }
  int SlotOf(uint32_t g) const { return static_cast<int>(g & static_cast<uint32_t>(depth_ - 1)); }

  // Waits until staging slot SlotOf(g) is free everywhere, lets `fill` write this
  // rank's part and announces it.
  template <typename Fill>
  Status StageRound(uint32_t g, int64_t k, Fill& fill) {
    HVD_RETURN_IF_ERROR(seg_->WaitAllAtLeast(kRead, g - depth_ + 1,
                                             "finish reading an earlier segment"));
    fill(k, Stage(rank(), SlotOf(g)));
    seg_->Post(kStaged, g + 1);
    return Status::OK();
  }

  // `rounds` rounds that only stage and read: fill(k, my_slot) writes this rank's
  // part of round k, drain(k, slot) reads every rank's staging slot `slot`.
  template <typename Fill, typename Drain>
  Status Exchange(int64_t rounds, Fill&& fill, Drain&& drain) {
    const uint32_t g0 = round_;
    round_ += static_cast<uint32_t>(rounds);
    if (rounds > 0) HVD_RETURN_IF_ERROR(StageRound(g0, 0, fill));
    for (int64_t k = 0; k < rounds; ++k) {
      const uint32_t g = g0 + static_cast<uint32_t>(k);
      if (k + 1 < rounds) HVD_RETURN_IF_ERROR(StageRound(g + 1, k + 1, fill));
      HVD_RETURN_IF_ERROR(seg_->WaitAllAtLeast(kStaged, g + 1, "stage its data"));
      drain(k, SlotOf(g));
      seg_->Post(kRead, g + 1);
      seg_->Post(kOut, g + 1);
    }
    return Status::OK();
  }

  Status AllreduceImpl(const PieceList& buf, DataType dtype, ReduceOp op, const FinishFn& finish);

  // Records the first failure, tells the peers, and keeps returning it.
  Status Check(const char* what, Status s) {
    if (s.ok()) return s;
    broken_ = s.Prepend(std::string("shm ") + what);
    seg_->Abort(broken_);
    return broken_;
  }

  std::unique_ptr<ShmSegment> seg_;
  size_t slot_bytes_;
  int depth_;
  size_t sub_bytes_ = 0;  // per-destination share of a slot, 64-byte multiple
  uint32_t round_ = 0;
  Status broken_;
};

Status ShmBackend::AllreduceImpl(const PieceList& buf, DataType dtype, ReduceOp op,
                                 const FinishFn& finish) {
  const ReduceFn fn = GetReduceFn(dtype, op);
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  const int64_t count = buf.count();
  const int64_t seg_elems = static_cast<int64_t>(slot_bytes_) / elem;
  const int64_t rounds = CeilDiv(count, seg_elems);
  const int n = size(), me = rank();
  // Piece r of a segment of `elems` elements starts at element Piece(elems, r).
  const int64_t unit = std::max<int64_t>(1, 64 / elem);
  auto piece = [&](int64_t elems, int r) {
    return std::min(elems, CeilDiv(elems, unit) * r / n * unit);
  };
  auto seg_len = [&](int64_t k) { return std::min(seg_elems, count - k * seg_elems); };
  // Stages every piece but our own: this rank reduces its own piece straight from
  // the inputs.
  auto fill = [&](int64_t k, uint8_t* slot) {
    const int64_t s = k * seg_elems, len = seg_len(k);
    const int64_t a = piece(len, me), b = piece(len, me + 1);
    buf.Gather(s, s + a, slot);
    buf.Gather(s + b, s + len, slot + b * elem);
  };

  const uint32_t g0 = round_;
  round_ += static_cast<uint32_t>(rounds);
  HVD_RETURN_IF_ERROR(StageRound(g0, 0, fill));
  for (int64_t k = 0; k < rounds; ++k) {
    const uint32_t g = g0 + static_cast<uint32_t>(k);
    const int slot = SlotOf(g);
    if (k + 1 < rounds) HVD_RETURN_IF_ERROR(StageRound(g + 1, k + 1, fill));
    HVD_RETURN_IF_ERROR(seg_->WaitAllAtLeast(kStaged, g + 1, "stage its allreduce data"));
    HVD_RETURN_IF_ERROR(seg_->WaitAllAtLeast(kOut, g - depth_ + 1,
                                             "copy out an earlier reduced segment"));
    const int64_t s = k * seg_elems, len = seg_len(k);
    const int64_t a = piece(len, me), m = piece(len, me + 1) - a;
    if (m > 0) {
      // Every rank sums in rank order, so each result is bitwise the same
      // whichever rank reduced it. Each stretch of our own piece goes to its
      // output while it is still in cache (and before we wait for the peers'
      // pieces); the input is read in full before the output, which may be the
      // same memory, is written.
      buf.ForEachPiece(s + a, s + a + m,
                       [&](const uint8_t* own, uint8_t* out, int64_t logical, int64_t len) {
        const int64_t at = logical - s;  // element offset in the slot
        auto src = [&](int r) -> const uint8_t* { return r == me ? own : Stage(r, slot) + at * elem; };
        uint8_t* dst = Result(slot) + at * elem;
        fn(dst, src(0), src(1), static_cast<size_t>(len));
        for (int r = 2; r < n; ++r) fn(dst, dst, src(r), static_cast<size_t>(len));
        std::memcpy(out, dst, static_cast<size_t>(len * elem));
        if (finish) finish(out, len);
      });
    }
    seg_->Post(kRead, g + 1);
    HVD_RETURN_IF_ERROR(seg_->WaitAllAtLeast(kRead, g + 1, "reduce its piece"));
    buf.Scatter(s, s + a, Result(slot), finish);
    buf.Scatter(s + a + m, s + len, Result(slot) + (a + m) * elem, finish);
    seg_->Post(kOut, g + 1);
  }
  return Status::OK();
}

Status ShmBackend::Allgatherv(const void* in, void* out,
                              const std::vector<int64_t>& bytes_per_rank) {
  HVD_CHECK(static_cast<int>(bytes_per_rank.size()) == size());
  if (!broken_.ok()) return broken_;
  const int n = size(), me = rank();
  std::vector<int64_t> offset(n + 1, 0);
  for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + bytes_per_rank[r];
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  if (bytes_per_rank[me] > 0 && src != dst + offset[me])
    std::memmove(dst + offset[me], src, bytes_per_rank[me]);
  if (n == 1 || offset[n] == 0) return Status::OK();
  const int64_t chunk = static_cast<int64_t>(slot_bytes_);
  const int64_t most = *std::max_element(bytes_per_rank.begin(), bytes_per_rank.end());
  auto part = [&](int r, int64_t k) { return Clamp(bytes_per_rank[r] - k * chunk, 0, chunk); };
  return Check("allgather", Exchange(
      CeilDiv(most, chunk),
      [&](int64_t k, uint8_t* slot) {
        if (part(me, k) > 0) std::memcpy(slot, src + k * chunk, part(me, k));
      },
      [&](int64_t k, int slot) {
        for (int r = 0; r < n; ++r)
          if (r != me && part(r, k) > 0)
            std::memcpy(dst + offset[r] + k * chunk, Stage(r, slot), part(r, k));
      }));
}

Status ShmBackend::Broadcast(void* buf, int64_t bytes, int root) {
  HVD_CHECK(root >= 0 && root < size());
  if (!broken_.ok()) return broken_;
  if (size() == 1 || bytes == 0) return Status::OK();
  auto* data = static_cast<uint8_t*>(buf);
  const int64_t chunk = static_cast<int64_t>(slot_bytes_);
  auto part = [&](int64_t k) { return std::min(chunk, bytes - k * chunk); };
  return Check("broadcast", Exchange(
      CeilDiv(bytes, chunk),
      [&](int64_t k, uint8_t* slot) {
        if (rank() == root) std::memcpy(slot, data + k * chunk, part(k));
      },
      [&](int64_t k, int slot) {
        if (rank() != root) std::memcpy(data + k * chunk, Stage(root, slot), part(k));
      }));
}

Status ShmBackend::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes, void* out,
                             const std::vector<int64_t>& recv_bytes) {
  HVD_CHECK(static_cast<int>(send_bytes.size()) == size());
  HVD_CHECK(static_cast<int>(recv_bytes.size()) == size());
  if (!broken_.ok()) return broken_;
  const int n = size(), me = rank();
  std::vector<int64_t> soff(n + 1, 0), roff(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    soff[r + 1] = soff[r] + send_bytes[r];
    roff[r + 1] = roff[r] + recv_bytes[r];
  }
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  const int64_t self = std::min(send_bytes[me], recv_bytes[me]);
  if (self > 0) std::memmove(dst + roff[me], src + soff[me], self);
  if (n == 1) return Status::OK();
  // Agree on the number of rounds: the largest block any rank sends.
  int64_t most = 0;
  Status s = Exchange(
      1,
      [&](int64_t, uint8_t* slot) {
        const int64_t mine = *std::max_element(send_bytes.begin(), send_bytes.end());
        std::memcpy(slot, &mine, sizeof(mine));
      },
      [&](int64_t, int slot) {
        for (int r = 0; r < n; ++r) {
          int64_t v;
          std::memcpy(&v, Stage(r, slot), sizeof(v));
          most = std::max(most, v);
        }
      });
  if (!s.ok()) return Check("alltoall", s);
  const int64_t chunk = static_cast<int64_t>(sub_bytes_);
  auto part = [&](int64_t total, int64_t k) { return Clamp(total - k * chunk, 0, chunk); };
  return Check("alltoall", Exchange(
      CeilDiv(most, chunk),
      [&](int64_t k, uint8_t* slot) {
        for (int d = 0; d < n; ++d)
          if (d != me && part(send_bytes[d], k) > 0)
            std::memcpy(slot + d * chunk, src + soff[d] + k * chunk, part(send_bytes[d], k));
      },
      [&](int64_t k, int slot) {
        for (int r = 0; r < n; ++r)
          if (r != me && part(recv_bytes[r], k) > 0)
            std::memcpy(dst + roff[r] + k * chunk, Stage(r, slot) + me * chunk,
                        part(recv_bytes[r], k));
      }));
}

Status ShmBackend::ReduceScatter(void* buf, void* out, const std::vector<int64_t>& recv_counts,
                                 DataType dtype, ReduceOp op) {
  HVD_CHECK(static_cast<int>(recv_counts.size()) == size());
  if (!broken_.ok()) return broken_;
  const int n = size(), me = rank();
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  std::vector<int64_t> offset(n + 1, 0);
  for (int r = 0; r < n; ++r) offset[r + 1] = offset[r] + recv_counts[r];
  auto* data = static_cast<uint8_t*>(buf);
  auto* result = static_cast<uint8_t*>(out);
  if (n == 1) {
    if (recv_counts[0] > 0 && data != result) std::memmove(result, data, recv_counts[0] * elem);
    return Status::OK();
  }
  if (offset[n] == 0) return Status::OK();
  // Rounds read `buf` after earlier rounds wrote `out`: keep them apart.
  std::vector<uint8_t> scratch;
  const bool overlap = result < data + offset[n] * elem && data < result + recv_counts[me] * elem;
  uint8_t* target = result;
  if (overlap) {
    scratch.resize(recv_counts[me] * elem);
    target = scratch.data();
  }
  const ReduceFn fn = GetReduceFn(dtype, op);
  const int64_t chunk = static_cast<int64_t>(sub_bytes_) / elem;  // elements per sub-slot
  const int64_t most = *std::max_element(recv_counts.begin(), recv_counts.end());
  auto part = [&](int r, int64_t k) { return Clamp(recv_counts[r] - k * chunk, 0, chunk); };
  Status s = Exchange(
      CeilDiv(most, chunk),
      [&](int64_t k, uint8_t* slot) {
        for (int d = 0; d < n; ++d)
          if (d != me && part(d, k) > 0)
            std::memcpy(slot + d * chunk * elem, data + (offset[d] + k * chunk) * elem,
                        part(d, k) * elem);
      },
      [&](int64_t k, int slot) {
        const int64_t m = part(me, k);
        if (m == 0) return;
        auto src = [&](int r) -> const uint8_t* {
          return r == me ? data + (offset[me] + k * chunk) * elem : Stage(r, slot) + me * chunk * elem;
        };
        uint8_t* dst = target + k * chunk * elem;
        fn(dst, src(0), src(1), static_cast<size_t>(m));
        for (int r = 2; r < n; ++r) fn(dst, dst, src(r), static_cast<size_t>(m));
      });
  if (s.ok() && overlap && !scratch.empty()) std::memcpy(result, scratch.data(), scratch.size());
  return Check("reducescatter", s);
}

}  // namespace

Status CreateShmBackend(const ShmOptions& opts, std::unique_ptr<Backend>* out) {
  if (opts.size < 1 || opts.rank < 0 || opts.rank >= opts.size)
    return Status::InvalidArgument("shm backend: rank " + std::to_string(opts.rank) +
                                   " out of range for size " + std::to_string(opts.size));
  if (opts.segment_bytes < 128u * opts.size)
    return Status::InvalidArgument("shm backend: segment_bytes " +
                                   std::to_string(opts.segment_bytes) + " is below 128 * size (" +
                                   std::to_string(128u * opts.size) + ")");
  // The largest power-of-two depth (2..kMaxDepth) whose slots stay within
  // kMaxSlotBytes and still give every rank a 64-byte sub-slot.
  int depth = 2;
  while (depth < kMaxDepth && opts.segment_bytes / depth > kMaxSlotBytes &&
         opts.segment_bytes / (2 * depth) >= 64u * opts.size)
    depth *= 2;
  const size_t slot_bytes = opts.segment_bytes / depth / 64 * 64;
  ShmSegmentOptions so;
  static_cast<ShmMembership&>(so) = opts;
  so.kind = "backend";
  so.data_bytes = slot_bytes * depth * (opts.size + 1);
  so.counters_per_rank = kNumCounters;
  std::unique_ptr<ShmSegment> seg;
  Status s = ShmSegment::Create(so, &seg);
  if (!s.ok()) return s;
  *out = std::make_unique<ShmBackend>(std::move(seg), slot_bytes, depth);
  return Status::OK();
}

}  // namespace hvd
