// Unit tests for runtime/transport/gloo/ring_schedule.h, without Gloo: the plans of
// every rank of a ring are executed together in memory, messages delivered FIFO per
// sender and Gloo slot, over ring sizes 2..16 and hand-picked and seeded random
// piece layouts, for the all-reduce and the reduce-scatter. Values are symbolic:
// each records which ranks' inputs it adds up, which reduction made it and whether
// it was finished, so a rank counted twice or a result computed twice shows.
//
// Checked for every plan: extents tile the buffer and follow the direct/staged rule;
// blocks and their segments tile it, a segment within one extent and seg_max, cut
// no finer than that; staged parts tile their segment and the staging area; slots
// of receives outstanding together are distinct. For every ring: each message is
// the next receive its peer has for that Gloo slot, of the same range and size, and
// its bytes do not change at the sender before they are received; no rank waits
// forever and no message is left over; each element is finished once, by its
// block's owner; an all-reduce leaves every rank the one result of each element,
// summed over every rank exactly once, and a reduce-scatter each rank its block.
#include "runtime/transport/gloo/ring_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace hvd {
namespace {

// A value in the simulation: the ranks whose inputs it adds up (4 bits per rank,
// so a rank counted twice shows), the reduction that made it (copies keep it; 0:
// an input) and whether its block's owner has finished it.
struct Value {
  uint64_t ranks = 0;
  uint64_t id = 0;
  bool finished = false;
  bool operator==(const Value& o) const {
    return ranks == o.ranks && id == o.id && finished == o.finished;
  }
  bool operator!=(const Value& o) const { return !(*this == o); }
};

struct Ring {
  int size = 2;
  std::vector<int64_t> counts;
  int64_t elem = 4;
  PieceRingOptions options;
  std::vector<int64_t> blocks;  // a reduce-scatter's block counts; empty: all-reduce
  std::vector<bool> in_place;   // per rank: outputs are the inputs

  const std::vector<int64_t>* block_counts() const { return blocks.empty() ? nullptr : &blocks; }
  std::string Describe() const {
    std::ostringstream s;
    s << "size " << size << ", elem " << elem << ", counts {";
    for (int64_t c : counts) s << c << ",";
    s << "}, segment " << options.segment_bytes << ", small block " << options.small_block_bytes
      << " in " << options.small_block_segment_bytes << ", direct min " << options.direct_min_bytes
      << ", scratch " << options.max_scratch_bytes;
    if (!blocks.empty()) {
      s << ", reduce-scatter {";
      for (int64_t c : blocks) s << c << ",";
      s << "}";
    }
    return s.str();
  }
};

int64_t Total(const std::vector<int64_t>& counts) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  return total;
}

// Block b's range in the logical buffer, by the ring's definition.
std::pair<int64_t, int64_t> BlockRange(const Ring& ring, int b) {
  const int64_t total = Total(ring.counts);
  if (ring.blocks.empty()) return {total * b / ring.size, total * (b + 1) / ring.size};
  int64_t lo = 0;
  for (int i = 0; i < b; ++i) lo += ring.blocks[i];
  return {lo, lo + ring.blocks[b]};
}

#define RETURN_ERROR_IF(cond, what) \
  do {                              \
    if (cond) {                     \
      std::ostringstream _s;        \
      _s << what;                   \
      return _s.str();              \
    }                               \
  } while (0)

// Extents: they tile the logical buffer; a direct one is one non-empty piece,
// large or with no small non-empty neighbour; a staged one is at least two small
// pieces (else it would be direct), never next to another staged one (they would
// be one), with the next stretch of the staging area.
std::string CheckExtents(const Ring& ring, const RingPlan& plan) {
  const std::vector<int64_t>& counts = ring.counts;
  const int n = static_cast<int>(counts.size());
  const int64_t direct_min =
      std::max<int64_t>(1, static_cast<int64_t>(ring.options.direct_min_bytes) / ring.elem);
  auto small = [&](int i) { return counts[i] > 0 && counts[i] < direct_min; };
  RETURN_ERROR_IF(static_cast<int>(plan.piece_start.size()) != n + 1, "piece_start size");
  for (int i = 0; i < n; ++i)
    RETURN_ERROR_IF(plan.piece_start[i + 1] - plan.piece_start[i] != counts[i],
                    "piece_start of piece " << i);
  RETURN_ERROR_IF(plan.piece_start[0] != 0 || plan.total != Total(counts), "total");
  int64_t pos = 0, staged = 0;
  int piece = 0;  // the next piece no extent holds yet
  for (size_t x = 0; x < plan.extents.size(); ++x) {
    const RingExtent& e = plan.extents[x];
    while (piece < n && counts[piece] == 0) ++piece;
    RETURN_ERROR_IF(e.first != piece || e.last < e.first || e.last >= n,
                    "extent " << x << " holds pieces " << e.first << ".." << e.last
                              << ", expected from " << piece);
    RETURN_ERROR_IF(e.start != pos || e.start != plan.piece_start[e.first],
                    "extent " << x << " starts at " << e.start << ", not " << pos);
    RETURN_ERROR_IF(counts[e.last] == 0, "extent " << x << " ends with an empty piece");
    RETURN_ERROR_IF(e.count != plan.piece_start[e.last + 1] - e.start || e.count <= 0,
                    "extent " << x << " count " << e.count);
    if (e.staged) {
      int nonempty = 0;
      for (int i = e.first; i <= e.last; ++i) {
        RETURN_ERROR_IF(counts[i] > 0 && !small(i),
                        "staged extent " << x << " holds piece " << i << " of " << counts[i]);
        nonempty += counts[i] > 0;
      }
      RETURN_ERROR_IF(nonempty < 2, "staged extent " << x << " of one piece");
      RETURN_ERROR_IF(x > 0 && plan.extents[x - 1].staged,
                      "staged extents " << x - 1 << " and " << x << " side by side");
      RETURN_ERROR_IF(e.stage_off != staged, "staged extent " << x << " at " << e.stage_off
                                                              << " in the staging area, not "
                                                              << staged);
      staged += e.count;
    } else {
      RETURN_ERROR_IF(e.first != e.last, "direct extent " << x << " of several pieces");
      int before = e.first - 1, after = e.first + 1;
      while (before >= 0 && counts[before] == 0) --before;
      while (after < n && counts[after] == 0) ++after;
      const bool alone = !(before >= 0 && small(before)) && !(after < n && small(after));
      RETURN_ERROR_IF(small(e.first) && !alone,
                      "small piece " << e.first << " direct beside a small neighbour");
    }
    pos += e.count;
    piece = e.last + 1;
  }
  while (piece < n && counts[piece] == 0) ++piece;
  RETURN_ERROR_IF(piece != n || pos != plan.total, "extents end at " << pos);
  RETURN_ERROR_IF(plan.staged != staged, "staging area of " << plan.staged << ", not " << staged);
  return "";
}

// Blocks and segments: blocks tile the buffer in rank order; each block's
// segments tile it, each inside one extent and at most seg_max long, and shorter
// only where the block or the extent ends. Staged parts tile their segment.
std::string CheckSegments(const Ring& ring, const RingPlan& plan) {
  const PieceRingOptions& o = ring.options;
  if (plan.total == 0) {
    RETURN_ERROR_IF(
        !plan.segments.empty() || plan.block_begin != std::vector<int>(ring.size + 1, 0),
        "segments of an empty buffer");
    return "";
  }
  RETURN_ERROR_IF(plan.seg_max < 1, "seg_max " << plan.seg_max);
  const int64_t seg_bytes = plan.seg_max * ring.elem;
  const int64_t largest =
      static_cast<int64_t>(std::max(o.segment_bytes, o.small_block_segment_bytes));
  RETURN_ERROR_IF(plan.seg_max > 1 && seg_bytes > largest, "seg_max " << plan.seg_max);
  int64_t largest_block = 0;
  for (int b = 0; b < ring.size; ++b) {
    const auto [lo, hi] = BlockRange(ring, b);
    largest_block = std::max(largest_block, hi - lo);
  }
  RETURN_ERROR_IF(plan.seg_max > 1 &&
                      largest_block * ring.elem > static_cast<int64_t>(o.small_block_bytes) &&
                      seg_bytes > static_cast<int64_t>(o.segment_bytes),
                  "seg_max " << plan.seg_max << " for a block of " << largest_block);
  RETURN_ERROR_IF(static_cast<int>(plan.block_begin.size()) != ring.size + 1, "block_begin size");
  RETURN_ERROR_IF(plan.block_begin[0] != 0 ||
                      plan.block_begin[ring.size] != static_cast<int>(plan.segments.size()),
                  "block_begin ends");
  for (int b = 0; b < ring.size; ++b) {
    const auto [lo, hi] = BlockRange(ring, b);
    int64_t pos = lo;
    RETURN_ERROR_IF(plan.block_begin[b + 1] < plan.block_begin[b], "block_begin order");
    for (int k = plan.block_begin[b]; k < plan.block_begin[b + 1]; ++k) {
      const RingSegment& seg = plan.segments[k];
      RETURN_ERROR_IF(seg.extent < 0 || seg.extent >= static_cast<int>(plan.extents.size()),
                      "segment " << k << " extent " << seg.extent);
      const RingExtent& e = plan.extents[seg.extent];
      const int64_t end = seg.start + seg.count;
      RETURN_ERROR_IF(seg.start != pos, "segment " << k << " of block " << b << " starts at "
                                                   << seg.start << ", not " << pos);
      RETURN_ERROR_IF(
          seg.count < 1 || seg.count > plan.seg_max,
          "segment " << k << " of " << seg.count << " (seg_max " << plan.seg_max << ")");
      RETURN_ERROR_IF(end > hi, "segment " << k << " crosses the end of block " << b);
      RETURN_ERROR_IF(
          seg.start < e.start || end > e.start + e.count,
          "segment " << k << " [" << seg.start << ", " << end << ") crosses extent " << seg.extent);
      RETURN_ERROR_IF(seg.count < plan.seg_max && end != hi && end != e.start + e.count,
                      "segment " << k << " cut short at " << end);
      if (e.staged) {
        int64_t at = seg.start;
        std::string error;
        ForEachStagedPart(plan, seg, [&](int i, int64_t from, int64_t stage, int64_t c) {
          if (!error.empty()) return;
          if (i < e.first || i > e.last || c < 1 || from < 0 || from + c > ring.counts[i] ||
              plan.piece_start[i] + from != at || stage != e.stage_off + (at - e.start))
            error = "staged part of segment " + std::to_string(k) + " at piece " +
                    std::to_string(i) + " + " + std::to_string(from);
          at += c;
        });
        if (!error.empty()) return error;
        RETURN_ERROR_IF(at != end, "staged parts of segment " << k << " end at " << at);
      }
      pos = end;
    }
    RETURN_ERROR_IF(pos != hi, "block " << b << " segments end at " << pos << ", not " << hi);
  }
  return "";
}

// Receives: the reduce-scatter's first, then the allgather's (none in a
// reduce-scatter); each in a slot inside the scratch area, the slots of receives
// posted together distinct.
std::string CheckReceives(const Ring& ring, const RingPlan& plan) {
  if (plan.total == 0) {
    RETURN_ERROR_IF(!plan.receives.empty() || plan.slots != 0, "receives of an empty buffer");
    return "";
  }
  const int64_t rs = plan.rs_receives;
  RETURN_ERROR_IF(rs < 0 || rs > static_cast<int64_t>(plan.receives.size()), "rs_receives " << rs);
  RETURN_ERROR_IF(plan.slots < 1 || plan.slots > std::max<int64_t>(1, rs), "slots " << plan.slots);
  RETURN_ERROR_IF(plan.slots > 1 && plan.slots * plan.seg_max * ring.elem >
                                        static_cast<int64_t>(ring.options.max_scratch_bytes),
                  "scratch area of " << plan.slots << " slots");
  RETURN_ERROR_IF(!ring.blocks.empty() && rs != static_cast<int64_t>(plan.receives.size()),
                  "a reduce-scatter with allgather receives");
  std::vector<int64_t> last_use(plan.slots, -plan.slots);
  for (int64_t k = 0; k < static_cast<int64_t>(plan.receives.size()); ++k) {
    const RingReceive& rv = plan.receives[k];
    RETURN_ERROR_IF(rv.segment < 0 || rv.segment >= static_cast<int>(plan.segments.size()),
                    "receive " << k << " segment " << rv.segment);
    RETURN_ERROR_IF(rv.reduce != (k < rs), "receive " << k << " in the wrong phase");
    RETURN_ERROR_IF(rv.last_rs && !rv.reduce, "receive " << k << " last_rs in the allgather");
    if (!rv.reduce) continue;
    const int64_t slot = rv.scratch / plan.seg_max;
    RETURN_ERROR_IF(rv.scratch % plan.seg_max != 0 || slot < 0 || slot >= plan.slots,
                    "receive " << k << " at " << rv.scratch << " in the scratch area");
    RETURN_ERROR_IF(k - last_use[slot] < plan.slots, "receives " << last_use[slot] << " and " << k
                                                                 << " posted together in slot "
                                                                 << slot);
    last_use[slot] = k;
  }
  return "";
}

struct Message {
  int64_t start, count;
  std::vector<Value> values;  // as sent
};

// Plans every rank, checks each plan, then runs them all: "" or the first error.
std::string RunRing(const Ring& ring) {
  const int size = ring.size;
  std::vector<RingPlan> plans(size);
  for (int r = 0; r < size; ++r) {
    PlanRing(size, r, ring.counts, ring.elem, ring.options, ring.block_counts(), &plans[r]);
    const RingPlan& plan = plans[r];
    for (const std::string& error :
         {CheckExtents(ring, plan), CheckSegments(ring, plan), CheckReceives(ring, plan)})
      RETURN_ERROR_IF(!error.empty(), "rank " << r << ": " << error);
    RETURN_ERROR_IF(plan.send_block != (r + size - 1) % size, "rank " << r << " send block");
    // The messages match only if every rank cuts the same segments.
    const RingPlan& first = plans[0];
    RETURN_ERROR_IF(
        plan.block_begin != first.block_begin || plan.segments.size() != first.segments.size() ||
            !std::equal(plan.segments.begin(), plan.segments.end(), first.segments.begin(),
                        [](const RingSegment& a, const RingSegment& b) {
                          return a.extent == b.extent && a.start == b.start && a.count == b.count;
                        }),
        "rank " << r << " cuts other segments than rank 0");
  }
  const int64_t total = Total(ring.counts);
  const bool allgather = ring.blocks.empty();

  // Memory: each rank's inputs, and where it reduces and receives (the outputs and
  // the staging area alike, by logical offset); in place, the same.
  std::vector<std::vector<Value>> inputs(size), outputs(size);
  auto in = [&](int r) -> std::vector<Value>& { return inputs[r]; };
  auto out = [&](int r) -> std::vector<Value>& {
    return ring.in_place[r] ? inputs[r] : outputs[r];
  };
  for (int r = 0; r < size; ++r) {
    inputs[r].assign(total, Value{uint64_t{1} << (4 * r), 0, false});
    if (!ring.in_place[r]) outputs[r].assign(total, Value());
  }
  // Messages in flight, per Gloo slot (a reduce-scatter alone has one) and sender.
  std::vector<std::deque<Message>> wire[2] = {std::vector<std::deque<Message>>(size),
                                              std::vector<std::deque<Message>>(size)};
  int64_t messages = 0;
  auto send = [&](int r, bool reduce_slot, const RingSegment& seg) {
    const auto from = out(r).begin() + seg.start;
    wire[allgather && !reduce_slot].at(r).push_back(
        {seg.start, seg.count, std::vector<Value>(from, from + seg.count)});
    ++messages;
  };
  // Step 0: each rank's input of its send block, copied where it is sent from.
  for (int r = 0; r < size; ++r) {
    const RingPlan& plan = plans[r];
    for (int k = plan.block_begin[plan.send_block]; k < plan.block_begin[plan.send_block + 1];
         ++k) {
      const RingSegment& seg = plan.segments[k];
      std::copy(in(r).begin() + seg.start, in(r).begin() + seg.start + seg.count,
                out(r).begin() + seg.start);
      send(r, true, seg);
    }
  }

  std::vector<size_t> done(size, 0);  // receives processed, per rank
  std::vector<int> finished(total, 0);
  uint64_t reductions = 0;
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < size; ++r) {
      const RingPlan& plan = plans[r];
      const int prev = (r + size - 1) % size;
      for (; done[r] < plan.receives.size(); ++done[r], progress = true) {
        const RingReceive& rv = plan.receives[done[r]];
        const RingSegment& seg = plan.segments[rv.segment];
        std::deque<Message>& queue = wire[allgather && !rv.reduce][prev];
        if (queue.empty()) break;
        const Message m = std::move(queue.front());
        queue.pop_front();
        RETURN_ERROR_IF(m.start != seg.start || m.count != seg.count,
                        "rank " << r << " receive " << done[r] << " expects [" << seg.start << ", +"
                                << seg.count << ") from rank " << prev << ", gets [" << m.start
                                << ", +" << m.count << ")");
        for (int64_t i = 0; i < m.count; ++i)
          RETURN_ERROR_IF(out(prev)[m.start + i] != m.values[i],
                          "rank " << prev << " overwrites element " << m.start + i
                                  << " before rank " << r << " receives it");
        for (int64_t i = 0; i < m.count; ++i) {
          const int64_t p = seg.start + i;
          if (!rv.reduce) {
            out(r)[p] = m.values[i];
            continue;
          }
          RETURN_ERROR_IF(m.values[i].finished || in(r)[p].finished,
                          "rank " << r << " reduces element " << p << " after it was finished");
          out(r)[p] = Value{in(r)[p].ranks + m.values[i].ranks, ++reductions, false};
          if (rv.last_rs) {
            const auto [lo, hi] = BlockRange(ring, r);
            RETURN_ERROR_IF(p < lo || p >= hi,
                            "rank " << r << " finishes element " << p << " of another block");
            out(r)[p].finished = true;
            ++finished[p];
          }
        }
        if (rv.forward) send(r, rv.forwards_reduce(), seg);
      }
    }
  }

  for (int r = 0; r < size; ++r)
    RETURN_ERROR_IF(done[r] != plans[r].receives.size(),
                    "rank " << r << " waits forever at receive " << done[r] << " of "
                            << plans[r].receives.size());
  for (const auto& slot : wire)
    for (int r = 0; r < size; ++r)
      RETURN_ERROR_IF(!slot[r].empty(),
                      "rank " << r << " sent " << slot[r].size() << " messages nobody receives");
  const int64_t segments = static_cast<int64_t>(plans[0].segments.size());
  RETURN_ERROR_IF(messages != (allgather ? 2 : 1) * (size - 1) * segments,
                  messages << " messages for " << segments << " segments");
  for (int64_t p = 0; p < total; ++p)
    RETURN_ERROR_IF(finished[p] != 1, "element " << p << " finished " << finished[p] << " times");
  uint64_t all = 0;
  for (int r = 0; r < size; ++r) all += uint64_t{1} << (4 * r);
  for (int r = 0; r < size; ++r) {
    const auto [lo, hi] = BlockRange(ring, r);
    for (int64_t p = allgather ? 0 : lo; p < (allgather ? total : hi); ++p) {
      const Value& v = out(r)[p];
      RETURN_ERROR_IF(v.ranks != all || !v.finished,
                      "rank " << r << " ends element " << p << " with ranks 0x" << std::hex
                              << v.ranks << std::dec << (v.finished ? "" : ", unfinished"));
      RETURN_ERROR_IF(v.id != out(0)[p].id && allgather,
                      "ranks 0 and " << r << " end element " << p << " with other reductions");
    }
  }
  return "";
}

#undef RETURN_ERROR_IF

// Tiny segments and a low direct threshold: a few hundred elements take many
// segments, several extents per block and both kinds of extent.
PieceRingOptions Tiny(size_t segment_bytes, size_t direct_min_bytes, size_t max_scratch_bytes) {
  PieceRingOptions o;
  o.segment_bytes = segment_bytes;
  o.small_block_bytes = 0;
  o.small_block_segment_bytes = 0;
  o.direct_min_bytes = direct_min_bytes;
  o.max_scratch_bytes = max_scratch_bytes;
  return o;
}

// A reduce-scatter's block counts adding up to `total`, cut at random: some zero.
std::vector<int64_t> RandomBlocks(int size, int64_t total, std::mt19937& gen) {
  std::vector<int64_t> cuts = {0, total};
  for (int b = 1; b < size; ++b) cuts.push_back(total == 0 ? 0 : gen() % (total + 1));
  std::sort(cuts.begin(), cuts.end());
  std::vector<int64_t> blocks;
  for (int b = 0; b < size; ++b) blocks.push_back(cuts[b + 1] - cuts[b]);
  return blocks;
}

// Runs `ring` over every size from 2 to 16: as an all-reduce, and as
// reduce-scatters of random blocks, of all in the last block and of all in the
// first; ranks in place at random.
void RunEverySize(Ring ring, std::mt19937& gen) {
  const int64_t total = Total(ring.counts);
  for (int size = 2; size <= 16; ++size) {
    ring.size = size;
    ring.in_place.assign(size, false);
    for (int r = 0; r < size; ++r) ring.in_place[r] = gen() % 2;
    ring.blocks.clear();
    EXPECT_EQ(RunRing(ring), "") << ring.Describe();
    ring.blocks = RandomBlocks(size, total, gen);
    EXPECT_EQ(RunRing(ring), "") << ring.Describe();
    ring.blocks.assign(size, 0);
    ring.blocks[size - 1] = total;
    EXPECT_EQ(RunRing(ring), "") << ring.Describe();
    ring.blocks.assign(size, 0);
    ring.blocks[0] = total;
    EXPECT_EQ(RunRing(ring), "") << ring.Describe();
  }
}

TEST(RingScheduleTest, HandPickedLayoutsOnEveryRingSize) {
  std::vector<int64_t> primes = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47};
  std::vector<int64_t> many_small;
  for (int i = 0; i < 150; ++i) many_small.push_back(1 + i % 3);
  // Around the direct threshold of 10 four-byte elements (40 bytes), with empty
  // pieces between others and a small piece alone between large ones.
  std::vector<int64_t> around = {9, 10, 11, 9, 0, 9, 10, 1, 0, 0, 1, 10, 3, 0, 40, 2, 64, 0, 3};
  const std::vector<std::vector<int64_t>> layouts = {
      {},
      {0},
      {0, 0, 0},
      {1},
      {2},
      {3},
      {1, 0, 2},  // totals below the number of ranks
      {7},
      {13},
      {1, 0, 1},
      {5, 0, 0, 3, 0, 2},
      {997},
      primes,
      many_small,
      around,
      {0, 5, 3, 0, 1, 40, 7, 2, 0, 130, 9, 11, 1, 64, 0, 3},  // piece_ring_test's
  };
  const PieceRingOptions options[] = {
      Tiny(8, 40, 24),     // two-element segments, three slots
      Tiny(96, 40, 288),   // piece_ring_test's SmallRing
      Tiny(0, 0, 0),       // one-element segments, everything direct, one slot
      Tiny(10, 1000, 0),   // segments not a whole number of elements, all staged
      PieceRingOptions(),  // the defaults: a block a message
  };
  std::mt19937 gen(20261205);
  for (const std::vector<int64_t>& counts : layouts) {
    for (const PieceRingOptions& o : options) {
      for (int64_t elem : {4, 1}) {
        Ring ring;
        ring.counts = counts;
        ring.elem = elem;
        ring.options = o;
        RunEverySize(ring, gen);
        if (HasFailure()) return;
      }
    }
  }
}

// Blocks of at most small_block_bytes take segments of small_block_segment_bytes.
TEST(RingScheduleTest, SmallBlocksTakeLargerSegments) {
  PieceRingOptions o = Tiny(8, 40, 1 << 20);
  o.small_block_bytes = 64;
  o.small_block_segment_bytes = 32;
  RingPlan plan;
  const std::vector<int64_t> small = {40}, large = {40, 40};  // blocks of 80 and 160 bytes
  PlanRing(2, 0, small, 4, o, nullptr, &plan);
  EXPECT_EQ(plan.seg_max, 2);  // 80 bytes > 64: the 8-byte segments
  o.small_block_bytes = 80;
  PlanRing(2, 0, small, 4, o, nullptr, &plan);
  EXPECT_EQ(plan.seg_max, 8);           // 32 bytes
  EXPECT_EQ(plan.segments.size(), 6u);  // 20 elements a block, in 8, 8, 4
  PlanRing(2, 0, large, 4, o, nullptr, &plan);
  EXPECT_EQ(plan.seg_max, 2);
  Ring ring;
  ring.counts = {17, 0, 23, 40, 1, 2};
  ring.options = o;
  std::mt19937 gen(7);
  RunEverySize(ring, gen);
}

// One large piece alone at the defaults: one direct extent, one message per block
// and phase (as PieceRing.SmallBlocksTravelInFewerLargerMessages counts them).
TEST(RingScheduleTest, ALargePieceIsDirectInFewMessages) {
  RingPlan plan;
  PlanRing(2, 1, {1 << 20}, 4, PieceRingOptions(), nullptr, &plan);
  ASSERT_EQ(plan.extents.size(), 1u);
  EXPECT_FALSE(plan.extents[0].staged);
  EXPECT_EQ(plan.segments.size(), 2u);
  EXPECT_EQ(plan.send_block, 0);
  ASSERT_EQ(plan.receives.size(), 2u);  // block 1 reduced and finished, then block 0
  EXPECT_EQ(plan.receives[0].segment, 1);
  EXPECT_TRUE(plan.receives[0].reduce && plan.receives[0].last_rs && plan.receives[0].forward);
  EXPECT_FALSE(plan.receives[0].forwards_reduce());
  EXPECT_EQ(plan.receives[1].segment, 0);
  EXPECT_FALSE(plan.receives[1].reduce || plan.receives[1].forward);
  EXPECT_EQ(plan.staged, 0);
}

// Small pieces side by side share a staged extent; alone, between large ones,
// a small piece is direct.
TEST(RingScheduleTest, OnlySmallPiecesSideBySideAreStaged) {
  const PieceRingOptions o = Tiny(1 << 20, 40, 1 << 20);
  RingPlan plan;
  PlanRing(3, 0, {100, 3, 100, 0, 2, 0, 5, 100}, 4, o, nullptr, &plan);
  ASSERT_EQ(plan.extents.size(), 5u);
  EXPECT_FALSE(plan.extents[1].staged);  // the 3, alone
  EXPECT_TRUE(plan.extents[3].staged);   // the 2 and the 5, an empty piece between
  EXPECT_EQ(plan.extents[3].first, 4);
  EXPECT_EQ(plan.extents[3].last, 6);
  EXPECT_EQ(plan.extents[3].count, 7);
  EXPECT_EQ(plan.staged, 7);
}

TEST(RingScheduleTest, AnEmptyBufferHasNoMessages) {
  RingPlan plan;
  PlanRing(4, 2, {0, 0}, 8, PieceRingOptions(), nullptr, &plan);
  EXPECT_EQ(plan.total, 0);
  EXPECT_TRUE(plan.extents.empty());
  EXPECT_TRUE(plan.segments.empty());
  EXPECT_TRUE(plan.receives.empty());
  EXPECT_EQ(plan.block_begin, std::vector<int>(5, 0));
}

// A plan is rewritten whole: what a larger call left behind does not leak in.
TEST(RingScheduleTest, PlanningAgainReusesThePlan) {
  RingPlan again, fresh;
  PlanRing(5, 3, {300, 2, 2, 7, 0, 100}, 4, Tiny(8, 40, 24), nullptr, &again);
  PlanRing(3, 1, {3, 4}, 4, Tiny(8, 40, 24), nullptr, &again);
  PlanRing(3, 1, {3, 4}, 4, Tiny(8, 40, 24), nullptr, &fresh);
  EXPECT_EQ(again.total, fresh.total);
  EXPECT_EQ(again.piece_start, fresh.piece_start);
  EXPECT_EQ(again.extents.size(), fresh.extents.size());
  EXPECT_EQ(again.staged, fresh.staged);
  EXPECT_EQ(again.segments.size(), fresh.segments.size());
  EXPECT_EQ(again.block_begin, fresh.block_begin);
  EXPECT_EQ(again.receives.size(), fresh.receives.size());
  EXPECT_EQ(again.rs_receives, fresh.rs_receives);
  EXPECT_EQ(again.slots, fresh.slots);
}

// PieceRing needs a ring of two ranks or more; so does the plan.
TEST(RingScheduleDeathTest, OneRankIsNotARing) {
  RingPlan plan;
  EXPECT_DEATH(PlanRing(1, 0, {5}, 4, PieceRingOptions(), nullptr, &plan), "size > 1");
}

// Seeded random layouts, options, ring sizes and reduce-scatter blocks.
TEST(RingScheduleTest, RandomLayouts) {
  std::mt19937 gen(1234);
  const size_t segment[] = {0, 1, 3, 8, 13, 64, 96, 1 << 20};
  const size_t small_block[] = {0, 16, 200, 8 << 20};
  const size_t small_segment[] = {0, 8, 40, 4 << 20};
  const size_t direct_min[] = {0, 1, 8, 40, 100, 64 << 10};
  const size_t scratch[] = {0, 8, 50, 1000, 64 << 20};
  const int64_t elems[] = {1, 2, 4, 8};
  for (int trial = 0; trial < 400; ++trial) {
    Ring ring;
    ring.size = 2 + static_cast<int>(gen() % 15);
    ring.elem = elems[gen() % 4];
    ring.options.segment_bytes = segment[gen() % std::size(segment)];
    ring.options.small_block_bytes = small_block[gen() % std::size(small_block)];
    ring.options.small_block_segment_bytes = small_segment[gen() % std::size(small_segment)];
    ring.options.direct_min_bytes = direct_min[gen() % std::size(direct_min)];
    ring.options.max_scratch_bytes = scratch[gen() % std::size(scratch)];
    const int n = static_cast<int>(gen() % 20);
    for (int i = 0; i < n; ++i) {
      const uint32_t kind = gen() % 8;
      ring.counts.push_back(kind < 2   ? 0
                            : kind < 6 ? 1 + gen() % 12
                            : kind < 7 ? gen() % 60
                                       : gen() % 600);
    }
    for (int r = 0; r < ring.size; ++r) ring.in_place.push_back(gen() % 2);
    if (gen() % 2) ring.blocks = RandomBlocks(ring.size, Total(ring.counts), gen);
    ASSERT_EQ(RunRing(ring), "") << "trial " << trial << ": " << ring.Describe();
  }
}

}  // namespace
}  // namespace hvd
