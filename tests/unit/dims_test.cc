#include "runtime/common/dims.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace hvd {
namespace {

using ::testing::ElementsAre;

TEST(DimsTest, HoldsWhatItWasGivenInlineAndOnTheHeap) {
  Dims d;
  EXPECT_TRUE(d.empty());
  d = {7};
  EXPECT_THAT(d, ElementsAre(7));
  d = {1, 2, 3, 4, 5, 6};  // kInline: still inline
  EXPECT_THAT(d, ElementsAre(1, 2, 3, 4, 5, 6));
  d = {1, 2, 3, 4, 5, 6, 7, 8};  // past kInline: on the heap
  EXPECT_EQ(d.size(), 8u);
  EXPECT_THAT(d, ElementsAre(1, 2, 3, 4, 5, 6, 7, 8));
  d = {9, 8};  // and back inline: nothing of the longer shape shows
  EXPECT_THAT(d, ElementsAre(9, 8));
  d[1] = 5;
  EXPECT_EQ(d[1], 5);
  d = {};
  EXPECT_TRUE(d.empty());
}

TEST(DimsTest, AssignsFromRangesOfOtherTypes) {
  const std::vector<int> ranks = {0, 2, 3};
  Dims d;
  d.assign(ranks.begin(), ranks.end());
  EXPECT_THAT(d, ElementsAre(0, 2, 3));
  const std::vector<int> many = {9, 8, 7, 6, 5, 4, 3, 2, 1};
  d.assign(many.begin(), many.end());
  EXPECT_EQ(d.size(), 9u);
  EXPECT_EQ(d[8], 1);
}

TEST(DimsTest, CopiesMovesAndConvertsToAndFromAVector) {
  const std::vector<int64_t> long_shape = {1, 2, 3, 4, 5, 6, 7};
  Dims a = long_shape;
  Dims b = a;  // a copy owns its own heap dimensions
  b[0] = 100;
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(static_cast<std::vector<int64_t>>(a), long_shape);
  Dims c = std::move(b);
  EXPECT_EQ(c[0], 100);
  EXPECT_EQ(c.size(), 7u);
  Dims s = {3, 4};
  Dims t = s;
  EXPECT_TRUE(s == t);
  t[1] = 5;
  EXPECT_TRUE(s != t);
  EXPECT_FALSE(Dims({3}) == Dims({3, 1}));
  EXPECT_EQ(std::vector<int64_t>(Dims{}), std::vector<int64_t>{});
}

}  // namespace
}  // namespace hvd
