#include "runtime/transport/gloo/ring_schedule.h"

#include "runtime/common/status.h"

namespace hvd {
namespace {

// The extents, in logical order, and the staging area's size.
void CutExtents(const std::vector<int64_t>& counts, int64_t elem, const PieceRingOptions& options,
                RingPlan* plan) {
  const int n = static_cast<int>(counts.size());
  const int64_t direct_min = std::max<int64_t>(1, options.direct_min_bytes / elem);
  auto small = [&](int i) { return i >= 0 && i < n && counts[i] > 0 && counts[i] < direct_min; };
  std::vector<RingExtent>& extents = plan->extents;
  int prev_nonempty = -1;
  for (int i = 0; i < n; ++i) {
    const int64_t count = counts[i];
    if (count == 0) continue;
    int next_nonempty = i + 1;
    while (next_nonempty < n && counts[next_nonempty] == 0) ++next_nonempty;
    const bool alone = !small(prev_nonempty) && !small(next_nonempty);
    prev_nonempty = i;
    if (count >= direct_min || alone) {
      extents.push_back({false, i, i, plan->piece_start[i], count, 0});
      continue;
    }
    // The last extent, if staged, ends right here (empty pieces add nothing).
    if (!extents.empty() && extents.back().staged) {
      extents.back().last = i;
      extents.back().count += count;
    } else {
      extents.push_back({true, i, i, plan->piece_start[i], count, plan->staged});
    }
    plan->staged += count;
  }
}

// seg_max, and every block's segments.
void CutSegments(int size, int64_t elem, const PieceRingOptions& options,
                 const std::vector<int64_t>* block_counts, RingPlan* plan) {
  const int64_t total = plan->total;
  auto block_end = [&](int b, int64_t start) {
    return block_counts != nullptr ? start + (*block_counts)[b] : total * (b + 1) / size;
  };
  int64_t largest_block = 0;
  int64_t lo = 0;
  for (int b = 0; b < size; ++b) {
    const int64_t hi = block_end(b, lo);
    largest_block = std::max(largest_block, hi - lo);
    lo = hi;
  }
  const size_t seg_bytes = largest_block * elem <= static_cast<int64_t>(options.small_block_bytes)
                               ? std::max(options.segment_bytes, options.small_block_segment_bytes)
                               : options.segment_bytes;
  plan->seg_max = std::max<int64_t>(1, static_cast<int64_t>(seg_bytes) / elem);
  const std::vector<RingExtent>& extents = plan->extents;
  size_t x = 0;
  lo = 0;
  for (int b = 0; b < size; ++b) {
    const int64_t hi = block_end(b, lo);
    plan->block_begin[b] = static_cast<int>(plan->segments.size());
    for (int64_t pos = lo; pos < hi;) {
      while (extents[x].start + extents[x].count <= pos) ++x;
      const int64_t end = std::min({hi, extents[x].start + extents[x].count, pos + plan->seg_max});
      plan->segments.push_back({static_cast<int>(x), pos, end - pos});
      pos = end;
    }
    lo = hi;
  }
  plan->block_begin[size] = static_cast<int>(plan->segments.size());
}

// What arrives from the previous rank, in order, and the slots.
void ListReceives(int size, int rank, int64_t elem, const PieceRingOptions& options, bool allgather,
                  RingPlan* plan) {
  auto add = [&](int block, bool reduce, bool last_rs, bool forward) {
    const int b = ((block % size) + size) % size;
    for (int k = plan->block_begin[b]; k < plan->block_begin[b + 1]; ++k)
      plan->receives.push_back({k, reduce, last_rs, forward, 0});
  };
  for (int s = 0; s < size - 1; ++s)
    add(rank - s - 2, true, s == size - 2, allgather || s < size - 2);
  plan->rs_receives = static_cast<int64_t>(plan->receives.size());
  for (int s = 0; allgather && s < size - 1; ++s) add(rank - s - 1, false, false, s < size - 2);
  const int64_t seg_max = plan->seg_max;
  plan->slots = std::max<int64_t>(
      1, std::min<int64_t>(plan->rs_receives,
                           static_cast<int64_t>(options.max_scratch_bytes) / (seg_max * elem)));
  for (int64_t k = 0; k < plan->rs_receives; ++k)
    plan->receives[k].scratch = (k % plan->slots) * seg_max;
}

}  // namespace

void PlanRing(int size, int rank, const std::vector<int64_t>& counts, int64_t elem_bytes,
              const PieceRingOptions& options, const std::vector<int64_t>* block_counts,
              RingPlan* plan) {
  HVD_CHECK(size > 1);
  HVD_CHECK(rank >= 0 && rank < size);
  HVD_CHECK(elem_bytes > 0);
  const int n = static_cast<int>(counts.size());
  plan->piece_start.assign(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    HVD_CHECK(counts[i] >= 0);
    plan->piece_start[i + 1] = plan->piece_start[i] + counts[i];
  }
  plan->total = plan->piece_start[n];
  if (block_counts != nullptr) {
    HVD_CHECK(static_cast<int>(block_counts->size()) == size);
    int64_t sum = 0;
    for (int64_t c : *block_counts) {
      HVD_CHECK(c >= 0);
      sum += c;
    }
    HVD_CHECK(sum == plan->total);
  }
  plan->extents.clear();
  plan->staged = 0;
  plan->seg_max = 0;
  plan->segments.clear();
  plan->block_begin.assign(size + 1, 0);
  plan->send_block = (rank + size - 1) % size;
  plan->receives.clear();
  plan->rs_receives = 0;
  plan->slots = 0;
  if (plan->total == 0) return;

  CutExtents(counts, elem_bytes, options, plan);
  CutSegments(size, elem_bytes, options, block_counts, plan);
  ListReceives(size, rank, elem_bytes, options, block_counts == nullptr, plan);
}

}  // namespace hvd
