// GlooBackend's halving-doubling all-reduce (ButterflyAllreduce) across 2..9 ranks
// as threads over Gloo on 127.0.0.1, powers of two and not: against a reduction in
// rank order for every dtype and op, with pieces empty, small and several, in place
// and not, a single piece in place and out of place; bitwise identical on every rank
// (float sums, whose order matters); every element finished once across the ranks;
// the step count (2 log2 p, + 2 off powers of two) against the ring's 2 (n - 1); the
// auto choice by size; a peer that never comes is a timeout, not a hang.
#include "runtime/transport/gloo/gloo_backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "runtime/kernels/reduce_kernels.h"
#include "runtime/store/store.h"
#include "runtime/transport/butterfly_schedule.h"
#include "tests/multirank/gloo_backends.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;

AllreduceAlgorithmOptions Forced(AllreduceAlgorithmOptions::Mode mode) {
  AllreduceAlgorithmOptions o;
  o.mode = mode;
  return o;
}
const AllreduceAlgorithmOptions kHalving = Forced(AllreduceAlgorithmOptions::Mode::kHalvingDoubling);

void RunGloo(int size, const AllreduceAlgorithmOptions& algorithm,
             const std::function<void(int, GlooBackend&)>& fn,
             milliseconds timeout = milliseconds(10000)) {
  RunGlooBackends(size, PieceRingOptions(), algorithm, fn, timeout);
}

const auto& kTypes = kEveryType;
const auto& kOps = kEveryOp;

class ButterflyAllreduceTest : public ::testing::TestWithParam<int> {};

TEST_P(ButterflyAllreduceTest, EqualsTheReductionOfEachPiece) {
  const int size = GetParam();
  // Fewer elements than ranks in some pieces, zeros, and one larger piece.
  const std::vector<int64_t> counts = {0, 5, 3, 0, 1, 40, 7, 2, 0, 130, 9};
  std::vector<std::vector<std::vector<uint8_t>>> results(size);
  RunGloo(size, kHalving, [&](int rank, GlooBackend& b) {
    uint32_t seed = 300;
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
        const Status s = b.AllreducePieces(pieces, t, op, [&](void* out, int64_t n) {
          ScaledCopy(t, out, out, n, 2.0);
        });
        ASSERT_TRUE(s.ok()) << s.ToString();
        EXPECT_EQ(b.last_allreduce_algorithm(), AllreduceAlgorithm::kHalvingDoubling);
        for (size_t i = 0; i < counts.size(); ++i) {
          auto expect = RankOrderReduction(size, counts[i], t, op, seed + i);
          ScaledCopy(t, expect.data(), expect.data(), counts[i], 2.0);
          const auto& got = i % 2 ? ins[i] : outs[i];
          EXPECT_EQ(got, expect) << "rank " << rank << " " << DataTypeName(t) << " "
                                 << ReduceOpName(op) << " piece " << i;
        }
        seed += 50;
      }
    }
    // Float sums in another order than the reference's may round differently, but
    // never differ between ranks.
    std::vector<float> x(1001), y(1001);
    std::mt19937 gen(7 + rank);
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    for (auto& v : x) v = dist(gen) * (1 + rank);
    std::vector<AllreducePiece> one = {{x.data(), y.data(), 1001}};
    ASSERT_TRUE(b.AllreducePieces(one, DataType::kFloat32, ReduceOp::kSum, nullptr).ok());
    std::vector<uint8_t> bytes(reinterpret_cast<uint8_t*>(y.data()),
                               reinterpret_cast<uint8_t*>(y.data() + y.size()));
    results[rank].push_back(bytes);
  });
  for (int r = 1; r < size; ++r) EXPECT_EQ(results[r], results[0]) << "rank " << r;
}

// Each element is finished once, on its block's owner; and a single piece in place.
TEST_P(ButterflyAllreduceTest, EveryElementIsFinishedOnceAcrossTheRanks) {
  const int size = GetParam();
  std::atomic<int64_t> finished{0};
  RunGloo(size, kHalving, [&](int rank, GlooBackend& b) {
    for (int64_t n : {int64_t{1}, int64_t{size} - 1, int64_t{999}}) {
      std::vector<float> a(n, 1.0f + rank);
      const Status s = b.Allreduce(a.data(), n, DataType::kFloat32, ReduceOp::kSum);
      ASSERT_TRUE(s.ok()) << s.ToString();
      const float expect = size * (size + 1) / 2.0f;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], expect) << "rank " << rank << " n " << n;
    }
    std::vector<float> a(300, 1.0f), c(7, 1.0f), d(50, 1.0f);
    std::vector<AllreducePiece> pieces = {{a.data(), a.data(), 300}, {c.data(), c.data(), 7},
                                          {d.data(), d.data(), 50}};
    const Status s = b.AllreducePieces(pieces, DataType::kFloat32, ReduceOp::kSum,
                                       [&](void*, int64_t n) { finished += n; });
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(c[6], static_cast<float>(size));
  });
  EXPECT_EQ(finished.load(), 357);
}

// About 2 log2(size) messages a rank, where the ring sends 2 (size - 1).
TEST_P(ButterflyAllreduceTest, SendsLogarithmicallyManyMessages) {
  const int size = GetParam();
  RunGloo(size, kHalving, [&](int rank, GlooBackend& b) {
    std::vector<float> a(4096, 1.0f);
    ASSERT_TRUE(b.Allreduce(a.data(), 4096, DataType::kFloat32, ReduceOp::kSum).ok());
    EXPECT_LE(b.butterfly_messages_sent(), ButterflySteps(size, true)) << "rank " << rank;
    EXPECT_GE(b.butterfly_messages_sent(), 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ButterflyAllreduceTest, ::testing::Range(2, 10),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Auto: at 8 ranks 512 KiB and less halve (14 - 6 = 8 steps saved x 64 KiB), more
// goes round the ring; results agree either way.
TEST(ButterflyAllreduce, AutoChoosesBySize) {
  RunGloo(8, AllreduceAlgorithmOptions(), [&](int rank, GlooBackend& b) {
    for (int64_t n : {int64_t{1000}, int64_t{128} << 10, (int64_t{128} << 10) + 1}) {
      std::vector<float> a(n, 1.0f);
      ASSERT_TRUE(b.Allreduce(a.data(), n, DataType::kFloat32, ReduceOp::kSum).ok());
      EXPECT_EQ(a[n - 1], 8.0f);
      EXPECT_EQ(b.last_allreduce_algorithm(), n * 4 <= (512 << 10)
                                                  ? AllreduceAlgorithm::kHalvingDoubling
                                                  : AllreduceAlgorithm::kRing)
          << "rank " << rank << " n " << n;
    }
  });
}

// A rank that stops taking part leaves its partners with a timeout, not a hang.
TEST(ButterflyAllreduce, APeerThatNeverComesTimesOut) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Status> got(4);
  RunGloo(4, kHalving, [&](int rank, GlooBackend& b) {
    if (rank == 3) {
      std::this_thread::sleep_for(milliseconds(2500));
      return;
    }
    std::vector<float> a(64, 1.0f);
    got[rank] = b.Allreduce(a.data(), 64, DataType::kFloat32, ReduceOp::kSum);
  }, milliseconds(1000));
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(got[r].code() == StatusCode::kTimeout || got[r].code() == StatusCode::kRemoteError)
        << "rank " << r << ": " << got[r].ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(8));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
