// GlooBackend::AllreducePieces (PieceRing) across 2-4 ranks as threads over Gloo on
// 127.0.0.1: against a reduction in rank order for every dtype and op, with pieces
// small (staged), large (in place), empty, spanning several segments and blocks, in
// place and not; bitwise identical on every rank; large pieces never copied; the
// finish callback once per element; the reduce-scatter half alone (uneven blocks); a
// peer that never comes is a timeout; small pieces end to end in memory (each
// rank's own layout) sent without copies.
#include "runtime/transport/gloo/gloo_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <iterator>
#include <random>
#include <thread>

#include "runtime/kernels/reduce_kernels.h"
#include "runtime/store/store.h"
#include "tests/multirank/gloo_backends.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

// Tiny segments and a low in-place threshold, so a few hundred elements take many
// segments, several extents per block and both kinds of piece.
PieceRingOptions SmallRing() {
  PieceRingOptions o;
  o.segment_bytes = 96;
  o.small_block_bytes = 0;  // every block in 96-byte segments
  o.direct_min_bytes = 40;
  o.max_scratch_bytes = 3 * 96;  // three receives ahead
  return o;
}

// The ring forced: at 3 and 4 ranks the automatic choice would run these small
// all-reduces by halving-doubling (butterfly_allreduce_test.cc tests that).
void RunGloo(int size, const PieceRingOptions& ring,
             const std::function<void(int, GlooBackend&)>& fn,
             milliseconds timeout = milliseconds(10000)) {
  AllreduceAlgorithmOptions algorithm;
  algorithm.mode = AllreduceAlgorithmOptions::Mode::kRing;
  RunGlooBackends(size, ring, algorithm, fn, timeout);
}

const auto& kTypes = kEveryType;
const auto& kOps = kEveryOp;

class PieceRingTest : public ::testing::TestWithParam<int> {};

TEST_P(PieceRingTest, EqualsTheReductionOfEachPiece) {
  const int size = GetParam();
  // Small runs, zeros, pieces over the in-place threshold and over several segments.
  const std::vector<int64_t> counts = {0, 5, 3, 0, 1, 40, 7, 2, 0, 130, 9, 11, 1, 64, 0, 3};
  std::vector<std::vector<std::vector<uint8_t>>> results(size);
  RunGloo(size, SmallRing(), [&](int rank, GlooBackend& b) {
    ASSERT_TRUE(b.SupportsPieces());
    uint32_t seed = 100;
    for (DataType t : kTypes) {
      for (ReduceOp op : kOps) {
        std::vector<std::vector<uint8_t>> ins, outs;
        for (size_t i = 0; i < counts.size(); ++i) {
          ins.push_back(RankInput(rank, counts[i], t, seed + i));
          outs.emplace_back(ins.back().size(), 0xee);
        }
        std::vector<AllreducePiece> pieces;
        for (size_t i = 0; i < counts.size(); ++i)  // every other piece in place
          pieces.push_back({ins[i].data(), i % 2 ? ins[i].data() : outs[i].data(), counts[i]});
        int64_t finished = 0;
        const Status s = b.AllreducePieces(pieces, t, op, [&](void* out, int64_t n) {
          ScaledCopy(t, out, out, n, 2.0);
          finished += n;
        });
        ASSERT_TRUE(s.ok()) << s.ToString();
        // Each element is finished once, on the rank that owns its block.
        int64_t total = 0;
        for (int64_t c : counts) total += c;
        EXPECT_GT(finished, 0);
        EXPECT_LT(finished, total);
        for (size_t i = 0; i < counts.size(); ++i) {
          auto expect = RankOrderReduction(size, counts[i], t, op, seed + i);
          ScaledCopy(t, expect.data(), expect.data(), counts[i], 2.0);
          const auto& got = i % 2 ? ins[i] : outs[i];
          EXPECT_EQ(got, expect) << "rank " << rank << " " << DataTypeName(t) << " "
                                 << ReduceOpName(op) << " piece " << i;
          if (t == DataType::kFloat32 && op == ReduceOp::kSum) results[rank].push_back(got);
        }
        seed += 50;
      }
    }
  });
  for (int r = 1; r < size; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
}

// The finish callback's elements over all ranks add up to the whole buffer.
TEST_P(PieceRingTest, EveryElementIsFinishedOnceAcrossTheRanks) {
  const int size = GetParam();
  std::atomic<int64_t> finished{0};
  RunGloo(size, SmallRing(), [&](int rank, GlooBackend& b) {
    std::vector<float> a(300, 1.0f), c(7, 1.0f), d(50, 1.0f);
    std::vector<AllreducePiece> pieces = {{a.data(), a.data(), 300}, {c.data(), c.data(), 7},
                                          {d.data(), d.data(), 50}};
    const Status s = b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum,
                                       [&](void*, int64_t n) { finished += n; });
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(a[299], static_cast<float>(size)) << "rank " << rank;
  });
  EXPECT_EQ(finished.load(), 357);
}

// GlooBackend::ReduceScatter is the ring's first half: each rank's block, of
// uneven (and empty) sizes, against the rank-order reduction.
TEST_P(PieceRingTest, ReduceScatterLeavesEachRankItsBlock) {
  const int size = GetParam();
  std::vector<int64_t> counts(size);
  for (int r = 0; r < size; ++r) counts[r] = r == 1 ? 0 : 37 * (r + 1);
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  RunGloo(size, SmallRing(), [&](int rank, GlooBackend& b) {
    uint32_t seed = 900;
    for (DataType t : kTypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct}) {
        auto buf = RankInput(rank, total, t, seed);
        const auto expect = RankOrderReduction(size, total, t, op, seed);
        const size_t elem = DataTypeSize(t);
        std::vector<uint8_t> out(counts[rank] * elem, 0xee);
        const Status s = b.ReduceScatter(buf.data(), out.data(), counts, t, op);
        ASSERT_TRUE(s.ok()) << s.ToString();
        int64_t offset = 0;
        for (int r = 0; r < rank; ++r) offset += counts[r];
        EXPECT_TRUE(std::equal(out.begin(), out.end(), expect.begin() + offset * elem))
            << "rank " << rank << " " << DataTypeName(t) << " " << ReduceOpName(op);
        ++seed;
      }
    }
  });
}

// Random layouts (seeded, the same on every rank): runs of small pieces, large ones
// and empty ones, cut at random against the blocks and segments, in place or not.
TEST_P(PieceRingTest, RandomLayoutsMatchTheReference) {
  const int size = GetParam();
  RunGloo(size, SmallRing(), [&](int rank, GlooBackend& b) {
    std::mt19937 gen(1234);  // not the rank: every rank draws the same layouts
    for (int trial = 0; trial < 40; ++trial) {
      const DataType t = kTypes[gen() % std::size(kTypes)];
      const ReduceOp op = kOps[gen() % std::size(kOps)];
      const int n = 1 + static_cast<int>(gen() % 12);
      std::vector<int64_t> counts(n);
      for (auto& c : counts) c = gen() % 4 == 0 ? 0 : (gen() % 3 == 0 ? 20 + gen() % 90 : gen() % 6);
      std::vector<bool> in_place(n);
      for (int i = 0; i < n; ++i) in_place[i] = gen() % 2;
      std::vector<std::vector<uint8_t>> ins, outs;
      std::vector<AllreducePiece> pieces;
      const uint32_t seed = 5000 + trial * 40;
      for (int i = 0; i < n; ++i) {
        ins.push_back(RankInput(rank, counts[i], t, seed + i));
        outs.emplace_back(ins.back().size(), 0xee);
      }
      for (int i = 0; i < n; ++i)
        pieces.push_back({ins[i].data(), in_place[i] ? ins[i].data() : outs[i].data(), counts[i]});
      const Status s = b.AllreducePieces(pieces, t, op, nullptr);
      ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.ToString();
      for (int i = 0; i < n; ++i) {
        const auto& got = in_place[i] ? ins[i] : outs[i];
        EXPECT_EQ(got, RankOrderReduction(size, counts[i], t, op, seed + i))
            << "rank " << rank << " trial " << trial << " piece " << i << " of " << n << " ("
            << DataTypeName(t) << " " << ReduceOpName(op) << ")";
      }
    }
  });
}

// Each rank lays its pieces out its own way: slices of one input and one output
// buffer, with random gaps between some (so runs of pieces end to end in memory
// of every length), or apart. Which stretches a rank sends straight from memory
// is its own choice: the messages, and the results, must not depend on it.
TEST_P(PieceRingTest, EachRanksOwnMemoryLayoutGivesTheSameResults) {
  const int size = GetParam();
  RunGloo(size, SmallRing(), [&](int rank, GlooBackend& b) {
    std::mt19937 gen(777);               // the same counts and types on every rank
    std::mt19937 local(31 + 17 * rank);  // this rank's layout
    for (int trial = 0; trial < 40; ++trial) {
      const DataType t = kTypes[gen() % std::size(kTypes)];
      const ReduceOp op = kOps[gen() % std::size(kOps)];
      const int n = 1 + static_cast<int>(gen() % 14);
      std::vector<int64_t> counts(n);
      for (auto& c : counts)
        c = gen() % 5 == 0 ? 0 : (gen() % 4 == 0 ? 20 + gen() % 90 : 1 + gen() % 8);
      const size_t elem = DataTypeSize(t);
      const uint32_t seed = 9000 + trial * 40;
      const bool in_place = local() % 2;
      const int gaps = static_cast<int>(local() % 3);  // 0: none, 1: some, 2: apart
      int64_t total = 0;
      for (int64_t c : counts) total += c;
      std::vector<uint8_t> in_slab((total + n) * elem), out_slab((total + n) * elem, 0xee);
      std::vector<int64_t> at(n);
      int64_t pos = 0;
      for (int i = 0; i < n; ++i) {
        if (gaps == 2 || (gaps == 1 && local() % 3 == 0)) ++pos;  // one element apart
        at[i] = pos;
        const auto input = RankInput(rank, counts[i], t, seed + i);
        std::copy(input.begin(), input.end(), in_slab.begin() + pos * elem);
        pos += counts[i];
      }
      std::vector<AllreducePiece> pieces;
      for (int i = 0; i < n; ++i)
        pieces.push_back({in_slab.data() + at[i] * elem,
                          (in_place ? in_slab.data() : out_slab.data()) + at[i] * elem, counts[i]});
      const Status s = b.AllreducePieces(pieces, t, op, nullptr);
      ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.ToString();
      const auto& result = in_place ? in_slab : out_slab;
      for (int i = 0; i < n; ++i) {
        const auto expect = RankOrderReduction(size, counts[i], t, op, seed + i);
        EXPECT_TRUE(std::equal(expect.begin(), expect.end(), result.begin() + at[i] * elem))
            << "rank " << rank << " trial " << trial << " piece " << i << " of " << n << " ("
            << DataTypeName(t) << " " << ReduceOpName(op) << ", gaps " << gaps
            << (in_place ? ", in place)" : ")");
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, PieceRingTest, ::testing::Values(2, 3, 4));

TEST(PieceRing, LargePiecesAreReducedInPlaceWithoutCopies) {
  PieceRingOptions ring;  // the defaults: 1 MiB segments (4 MiB for small blocks), 64 KiB in place
  ring.small_block_bytes = 0;
  RunGloo(2, ring, [&](int rank, GlooBackend& b) {
    const int64_t big = 300000;  // 1.2 MB: several segments, split between the blocks
    std::vector<float> x(big), y(big), small(100);
    for (int64_t i = 0; i < big; ++i) x[i] = static_cast<float>((i % 17) + rank);
    for (auto& v : small) v = static_cast<float>(rank + 1);
    std::vector<AllreducePiece> pieces = {{x.data(), y.data(), big}};
    ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
    EXPECT_EQ(b.staged_bytes(), 0);
    for (int64_t i = 0; i < big; i += 997) ASSERT_EQ(y[i], 2.0f * (i % 17) + 1) << i;
    // A small tensor alone (between large ones, or one buffer) is a message of its
    // own, not copied either.
    pieces = {{x.data(), x.data(), big},
              {small.data(), small.data(), 100},
              {y.data(), y.data(), big}};
    ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
    EXPECT_EQ(b.staged_bytes(), 0);
    EXPECT_EQ(small[99], 3.0f);
    ASSERT_TRUE(b.Allreduce(small.data(), 100, DataType::kFloat32, ReduceOp::kSum).ok());
    EXPECT_EQ(b.staged_bytes(), 0);
    EXPECT_EQ(small[0], 6.0f);
    // Two small ones side by side go through the staging area, and only their bytes
    // (in, reduced or out, at most twice each).
    std::vector<float> other(50, 1.0f);
    pieces = {{x.data(), x.data(), big}, {small.data(), small.data(), 100},
              {other.data(), other.data(), 50}};
    ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
    EXPECT_GT(b.staged_bytes(), 0);
    EXPECT_LE(b.staged_bytes(), 2 * 150 * 4);
    EXPECT_EQ(small[99], 12.0f);
    EXPECT_EQ(other[49], 2.0f);
    EXPECT_EQ(x[big - 1], 4.0f * ((big - 1) % 17) + 2);
  });
}

// Small tensors that are views of one buffer (a framework's gradient bucket) are
// sent from, reduced in and received into that memory: nothing is staged. Apart,
// the same tensors go through the staging area.
TEST(PieceRing, SmallPiecesEndToEndInMemoryAreNotCopied) {
  RunGloo(2, PieceRingOptions(), [&](int rank, GlooBackend& b) {
    const int n = 1000, each = 1024;  // 1000 x 4 KiB
    std::vector<float> in(n * each), out(n * each, -1.0f);
    for (int64_t i = 0; i < n * each; ++i) in[i] = static_cast<float>(i % 7 + rank);
    for (bool in_place : {false, true}) {
      std::vector<AllreducePiece> pieces;
      float* const to = in_place ? in.data() : out.data();
      for (int t = 0; t < n; ++t) pieces.push_back({in.data() + t * each, to + t * each, each});
      ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
      EXPECT_EQ(b.staged_bytes(), 0) << (in_place ? "in place" : "out of place");
      const std::vector<float>& got = in_place ? in : out;
      for (int64_t i = 0; i < n * each; i += 1013) ASSERT_EQ(got[i], 2.0f * (i % 7) + 1) << i;
      ASSERT_EQ(got[n * each - 1], 2.0f * ((n * each - 1) % 7) + 1);
    }
    // Each tensor one element after the last: none end to end, all staged.
    std::vector<float> spread(n * (each + 1), 1.0f);
    std::vector<AllreducePiece> pieces;
    for (int t = 0; t < n; ++t)
      pieces.push_back({spread.data() + t * (each + 1), spread.data() + t * (each + 1), each});
    ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
    // Half gathered, half reduced into the staging area, all scattered out.
    EXPECT_EQ(b.staged_bytes(), 2 * int64_t{n} * each * 4);
    EXPECT_EQ(spread[0], 2.0f);
    EXPECT_EQ(spread[each], 1.0f);  // the gap, untouched
  });
}

// Blocks of at most 8 MiB go in messages of up to 4 MiB, larger ones in 1 MiB
// messages (the defaults); the results are the same either way.
TEST(PieceRing, SmallBlocksTravelInFewerLargerMessages) {
  RunGloo(2, PieceRingOptions(), [&](int rank, GlooBackend& b) {
    // elements -> messages per rank: one per block and phase for blocks up to
    // 4 MiB, two for 8 MiB, 1 MiB segments beyond (9 MiB blocks: 9 + 9).
    const std::pair<int64_t, int64_t> cases[] = {
        {1 << 20, 2}, {4 << 20, 4}, {(9 << 20) / 2, 18}};
    for (const auto& [count, messages] : cases) {
      std::vector<float> x(count), y(count);
      for (int64_t i = 0; i < count; ++i) x[i] = static_cast<float>(i % 13 + rank);
      std::vector<AllreducePiece> pieces = {{x.data(), y.data(), count}};
      ASSERT_TRUE(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
      EXPECT_EQ(b.ring_messages_sent(), messages) << count << " elements";
      for (int64_t i = 0; i < count; i += 4099) ASSERT_EQ(y[i], 2.0f * (i % 13) + 1) << i;
      ASSERT_EQ(y[count - 1], 2.0f * ((count - 1) % 13) + 1);
    }
  });
}

TEST(PieceRing, APeerThatNeverComesIsATimeout) {
  RunGloo(
      2, SmallRing(),
      [&](int rank, GlooBackend& b) {
        if (rank == 1) {
          std::this_thread::sleep_for(milliseconds(1500));  // never calls, then leaves
          return;
        }
        std::vector<float> a(100, 1.0f);
        std::vector<AllreducePiece> pieces = {{a.data(), a.data(), 100}};
        const Status s = b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr);
        EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
        EXPECT_THAT(s.message(), HasSubstr("allreduce"));
        // The backend is broken afterwards and says why.
        EXPECT_EQ(b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum, nullptr).code(),
                  StatusCode::kTimeout);
      },
      milliseconds(500));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
