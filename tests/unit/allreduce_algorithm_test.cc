// Unit tests for runtime/transport/allreduce_algorithm.h: the ring or
// halving-doubling by size and ranks, and the forced modes.
#include "runtime/transport/allreduce_algorithm.h"

#include <gtest/gtest.h>

namespace hvd {
namespace {

constexpr auto kRing = AllreduceAlgorithm::kRing;
constexpr auto kHalving = AllreduceAlgorithm::kHalvingDoubling;

TEST(AllreduceAlgorithm, TwoRanksAlwaysRing) {
  AllreduceAlgorithmOptions o;
  for (int64_t bytes : {int64_t{0}, int64_t{4}, int64_t{1} << 30})
    EXPECT_EQ(ChooseAllreduceAlgorithm(bytes, 2, o), kRing) << bytes;
  EXPECT_EQ(ChooseAllreduceAlgorithm(4, 1, o), kRing);
}

// saved steps = 2(n - 1) - 2 log2(p) (- 2 off powers of two); the limit is saved x
// 64 KiB (halved off powers of two).
TEST(AllreduceAlgorithm, SmallMessagesAtManyRanksHalve) {
  AllreduceAlgorithmOptions o;
  // 4 ranks: 6 - 4 = 2 steps saved, 128 KiB.
  EXPECT_EQ(ChooseAllreduceAlgorithm(128 << 10, 4, o), kHalving);
  EXPECT_EQ(ChooseAllreduceAlgorithm((128 << 10) + 1, 4, o), kRing);
  // 3 ranks: 4 - (2 + 2) = 0 saved: the ring.
  EXPECT_EQ(ChooseAllreduceAlgorithm(4, 3, o), kRing);
  // 6 ranks: 10 - (4 + 2) = 4 saved, halved: 128 KiB.
  EXPECT_EQ(ChooseAllreduceAlgorithm(128 << 10, 6, o), kHalving);
  EXPECT_EQ(ChooseAllreduceAlgorithm((128 << 10) + 1, 6, o), kRing);
  // 128 ranks: 254 - 14 = 240 saved, 15 MiB: 1000 x 4 KiB halves, ResNet-50 rings.
  EXPECT_EQ(ChooseAllreduceAlgorithm(4096000, 128, o), kHalving);
  EXPECT_EQ(ChooseAllreduceAlgorithm(240 << 16, 128, o), kHalving);
  EXPECT_EQ(ChooseAllreduceAlgorithm((240 << 16) + 1, 128, o), kRing);
  EXPECT_EQ(ChooseAllreduceAlgorithm(102228128, 128, o), kRing);
  // 4096 ranks: 8190 - 24 saved, ~510 MiB.
  EXPECT_EQ(ChooseAllreduceAlgorithm(102228128, 4096, o), kHalving);
  o.bytes_per_saved_step = 1 << 10;
  EXPECT_EQ(ChooseAllreduceAlgorithm(4096000, 128, o), kRing);
}

TEST(AllreduceAlgorithm, ForcedModes) {
  AllreduceAlgorithmOptions o;
  o.mode = AllreduceAlgorithmOptions::Mode::kRing;
  EXPECT_EQ(ChooseAllreduceAlgorithm(4, 128, o), kRing);
  o.mode = AllreduceAlgorithmOptions::Mode::kHalvingDoubling;
  EXPECT_EQ(ChooseAllreduceAlgorithm(int64_t{1} << 30, 3, o), kHalving);
  EXPECT_EQ(ChooseAllreduceAlgorithm(4, 2, o), kHalving);
}

TEST(AllreduceAlgorithm, ParsesTheModes) {
  AllreduceAlgorithmOptions::Mode m = AllreduceAlgorithmOptions::Mode::kRing;
  ASSERT_TRUE(ParseAllreduceAlgorithmMode("auto", &m).ok());
  EXPECT_EQ(m, AllreduceAlgorithmOptions::Mode::kAuto);
  ASSERT_TRUE(ParseAllreduceAlgorithmMode("halving_doubling", &m).ok());
  EXPECT_EQ(m, AllreduceAlgorithmOptions::Mode::kHalvingDoubling);
  ASSERT_TRUE(ParseAllreduceAlgorithmMode("ring", &m).ok());
  EXPECT_EQ(m, AllreduceAlgorithmOptions::Mode::kRing);
  const Status s = ParseAllreduceAlgorithmMode("tree", &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("HVD_ALLREDUCE_ALGORITHM='tree'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace hvd
