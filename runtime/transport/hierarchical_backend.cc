#include "runtime/transport/hierarchical_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

namespace hvd {

std::vector<int64_t> ShardCounts(int64_t count, int parts) {
  std::vector<int64_t> counts(parts, count / parts);
  for (int64_t i = 0; i < count % parts; ++i) ++counts[i];
  return counts;
}

HierarchicalBackend::HierarchicalBackend(std::unique_ptr<Backend> local,
                                         std::unique_ptr<Backend> cross,
                                         std::unique_ptr<Backend> flat,
                                         HierarchyChoice::Mode mode)
    : local_(std::move(local)), cross_(std::move(cross)), flat_(std::move(flat)), choice_(mode) {}

Status HierarchicalBackend::Check(Status s) {
  if (!s.ok() && broken_.ok()) broken_ = s;
  return s;
}

template <typename Run>
Status HierarchicalBackend::OnChosenPath(int64_t bytes, Run&& run) {
  using Path = HierarchyChoice::Path;
  const Path path = choice_.Next(bytes);
  const auto start = std::chrono::steady_clock::now();
  HVD_RETURN_IF_ERROR(run(path == Path::kFlat));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double medians[2];
  if (!choice_.Record(bytes, path, seconds, medians)) return Status::OK();
  // The class's last sample, at this same call on every rank: agree on the sums.
  HVD_RETURN_IF_ERROR(Check(flat_->Allreduce(medians, 2, DataType::kFloat64, ReduceOp::kSum)));
  const Path chosen = choice_.Decide(bytes, medians);
  if (flat_->rank() == 0) {
    const int n = flat_->size();
    std::fprintf(stderr,
                 "hvd: all-reduce of %lld bytes across hosts: hierarchical %.3f ms, flat %.3f ms "
                 "(medians, mean over %d ranks): %s for sizes like it\n",
                 static_cast<long long>(bytes), 1e3 * medians[0] / n, 1e3 * medians[1] / n, n,
                 chosen == Path::kFlat ? "flat" : "hierarchical");
  }
  return Status::OK();
}

Status HierarchicalBackend::Allreduce(void* buf, int64_t count, DataType dtype, ReduceOp op) {
  if (!broken_.ok()) return broken_;
  if (count == 0) return Status::OK();
  return OnChosenPath(count * static_cast<int64_t>(DataTypeSize(dtype)), [&](bool flat) {
    return flat ? Check(flat_->Allreduce(buf, count, dtype, op))
                : HierarchicalAllreduce(buf, count, dtype, op);
  });
}

Status HierarchicalBackend::AllreducePieces(const std::vector<AllreducePiece>& pieces,
                                            DataType dtype, ReduceOp op, const FinishFn& finish) {
  if (!broken_.ok()) return broken_;
  const int64_t elem = static_cast<int64_t>(DataTypeSize(dtype));
  int64_t count = 0;
  for (const auto& p : pieces) count += p.count;
  if (count == 0) return Status::OK();
  return OnChosenPath(count * elem, [&](bool flat) {
    if (flat && flat_->SupportsPieces())
      return Check(flat_->AllreducePieces(pieces, dtype, op, finish));
    if (static_cast<int64_t>(packed_.size()) < count * elem) packed_.resize(count * elem);
    uint8_t* const packed = packed_.data();
    // Copies the elements [lo, hi) of the pieces laid end to end into the packed
    // buffer, or back out to the pieces (finishing them).
    auto copy = [&](int64_t lo, int64_t hi, bool in) {
      int64_t start = 0;
      for (const auto& p : pieces) {
        const int64_t from = std::max(lo, start), to = std::min(hi, start + p.count);
        if (to > from) {
          uint8_t* at = packed + from * elem;
          const int64_t off = (from - start) * elem;
          if (in) {
            std::memcpy(at, static_cast<const uint8_t*>(p.in) + off, (to - from) * elem);
          } else {
            std::memcpy(static_cast<uint8_t*>(p.out) + off, at, (to - from) * elem);
            if (finish) finish(static_cast<uint8_t*>(p.out) + off, to - from);
          }
        }
        start += p.count;
        if (start >= hi) break;
      }
    };
    auto reduce = [&](int64_t lo, int64_t n) {
      return flat ? Check(flat_->Allreduce(packed + lo * elem, n, dtype, op))
                  : HierarchicalAllreduce(packed + lo * elem, n, dtype, op);
    };
    // Every rank cuts the same chunks (the counts are the same everywhere).
    const int64_t chunk = std::max<int64_t>(1, kPipelineChunk / elem);
    const int64_t chunks = (count + chunk - 1) / chunk;
    if (chunks <= 2) {
      copy(0, count, true);
      HVD_RETURN_IF_ERROR(reduce(0, count));
      copy(0, count, false);
      return Status::OK();
    }
    auto bounds = [&](int64_t c) {
      return std::make_pair(c * chunk, std::min(count, (c + 1) * chunk));
    };
    copy(bounds(0).first, bounds(0).second, true);
    Status s;
    for (int64_t c = 0; c < chunks && s.ok(); ++c) {
      pipeline_.Run([&, c] {
        if (c > 0) copy(bounds(c - 1).first, bounds(c - 1).second, false);
        if (c + 1 < chunks) copy(bounds(c + 1).first, bounds(c + 1).second, true);
      });
      s = reduce(bounds(c).first, bounds(c).second - bounds(c).first);
      pipeline_.Wait();
    }
    HVD_RETURN_IF_ERROR(s);
    copy(bounds(chunks - 1).first, bounds(chunks - 1).second, false);
    return Status::OK();
  });
}

Status HierarchicalBackend::HierarchicalAllreduce(void* buf, int64_t count, DataType dtype,
                                                  ReduceOp op) {
  const int local_size = local_->size(), me = local_->rank();
  const std::vector<int64_t> shards = ShardCounts(count, local_size);
  const size_t elem = DataTypeSize(dtype);
  // The shard goes to a persistent scratch buffer (grown, never shrunk), so no
  // collective allocates and the all-gather's input does not overlap its output.
  const size_t shard_bytes = static_cast<size_t>(shards[me]) * elem;
  if (scratch_.size() < shard_bytes) scratch_.resize(shard_bytes);
  uint8_t* mine = scratch_.data();
  HVD_RETURN_IF_ERROR(Check(local_->ReduceScatter(buf, mine, shards, dtype, op)));
  if (shards[me] > 0) HVD_RETURN_IF_ERROR(Check(cross_->Allreduce(mine, shards[me], dtype, op)));
  std::vector<int64_t> bytes(local_size);
  for (int l = 0; l < local_size; ++l) bytes[l] = shards[l] * static_cast<int64_t>(elem);
  return Check(local_->Allgatherv(mine, buf, bytes));
}

Status HierarchicalBackend::Allgatherv(const void* in, void* out,
                                       const std::vector<int64_t>& bytes_per_rank) {
  if (!broken_.ok()) return broken_;
  return Check(flat_->Allgatherv(in, out, bytes_per_rank));
}

Status HierarchicalBackend::Broadcast(void* buf, int64_t bytes, int root) {
  if (!broken_.ok()) return broken_;
  return Check(flat_->Broadcast(buf, bytes, root));
}

Status HierarchicalBackend::Alltoallv(const void* in, const std::vector<int64_t>& send_bytes,
                                      void* out, const std::vector<int64_t>& recv_bytes) {
  if (!broken_.ok()) return broken_;
  return Check(flat_->Alltoallv(in, send_bytes, out, recv_bytes));
}

Status HierarchicalBackend::ReduceScatter(void* buf, void* out,
                                          const std::vector<int64_t>& recv_counts, DataType dtype,
                                          ReduceOp op) {
  if (!broken_.ok()) return broken_;
  return Check(flat_->ReduceScatter(buf, out, recv_counts, dtype, op));
}

Status HierarchicalBackend::Barrier() {
  if (!broken_.ok()) return broken_;
  return Check(flat_->Barrier());
}

void HierarchicalBackend::Abort(const Status& why) {
  if (broken_.ok()) broken_ = why;
  local_->Abort(why);
  cross_->Abort(why);
  flat_->Abort(why);
}

}  // namespace hvd
