// ProcessSets: the registry of process sets, without a network (communicators
// here are bare structs that never connect).
#include "controller/loop/process_sets.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace hvd {
namespace {

std::shared_ptr<Communicator> Comm(int id) {
  auto c = std::make_shared<Communicator>();
  c->id = id;
  return c;
}

std::vector<int> Ids(const std::vector<std::shared_ptr<Communicator>>& comms) {
  std::vector<int> ids;
  for (const auto& c : comms) ids.push_back(c->id);
  return ids;
}

// Rank 1 of 4, with the global set.
class ProcessSetsTest : public ::testing::Test {
 protected:
  ProcessSetsTest() {
    global_ = Comm(0);
    sets_.Add(0, {0, 1, 2, 3}, global_);
  }
  ProcessSets sets_{1, 4};
  std::shared_ptr<Communicator> global_;
};

TEST_F(ProcessSetsTest, TheGlobalSetIsThereFromTheStart) {
  EXPECT_EQ(sets_.global(), global_.get());
  std::shared_ptr<Communicator> found;
  ASSERT_TRUE(sets_.Find(0, &found).ok());
  EXPECT_EQ(found, global_);
  int rank_in_set = -2;
  std::vector<int> ranks;
  ASSERT_TRUE(sets_.Info(0, &rank_in_set, &ranks).ok());
  EXPECT_EQ(rank_in_set, 1);
  EXPECT_EQ(ranks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Ids(sets_.Communicators()), std::vector<int>{0});
}

TEST_F(ProcessSetsTest, ANewSetIsSortedAndChecked) {
  std::vector<int> ranks{3, 0, 2};
  ASSERT_TRUE(sets_.CheckNewSet(&ranks).ok());
  EXPECT_EQ(ranks, (std::vector<int>{0, 2, 3}));
  std::vector<int> none;
  EXPECT_EQ(sets_.CheckNewSet(&none).message(), "a process set needs at least one rank");
  std::vector<int> repeat{2, 0, 2};
  const Status s = sets_.CheckNewSet(&repeat);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "process set ranks [0, 2, 2] repeat a rank");
  std::vector<int> outside{1, 4};
  EXPECT_EQ(sets_.CheckNewSet(&outside).message(), "process set ranks [1, 4] must lie in 0..3");
  std::vector<int> negative{-1, 1};
  EXPECT_EQ(sets_.CheckNewSet(&negative).message(), "process set ranks [-1, 1] must lie in 0..3");
}

TEST_F(ProcessSetsTest, IdsCountFromOne) {
  EXPECT_EQ(sets_.NextId(), 1);
  EXPECT_EQ(sets_.NextId(), 2);
}

TEST_F(ProcessSetsTest, ASetThisRankIsNotInIsKnownButHasNoCommunicator) {
  sets_.Add(1, {0, 2}, nullptr);
  std::shared_ptr<Communicator> found;
  const Status s = sets_.Find(1, &found);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "rank 1 is not a member of process set 1 (ranks 0, 2)");
  int rank_in_set = 0;
  std::vector<int> ranks;
  ASSERT_TRUE(sets_.Info(1, &rank_in_set, &ranks).ok());
  EXPECT_EQ(rank_in_set, -1);
  EXPECT_EQ(ranks, (std::vector<int>{0, 2}));
  EXPECT_EQ(Ids(sets_.Communicators()), std::vector<int>{0});
  EXPECT_EQ(sets_.Remove(1), nullptr);
}

TEST_F(ProcessSetsTest, MembersFindTheirCommunicatorsInTheOrderAdded) {
  auto three = Comm(3);
  auto two = Comm(2);
  sets_.Add(3, {1, 3}, three);
  sets_.Add(2, {0, 1}, two);
  std::shared_ptr<Communicator> found;
  ASSERT_TRUE(sets_.Find(2, &found).ok());
  EXPECT_EQ(found, two);
  int rank_in_set = -2;
  ASSERT_TRUE(sets_.Info(3, &rank_in_set, nullptr).ok());
  EXPECT_EQ(rank_in_set, 0);
  EXPECT_EQ(Ids(sets_.Communicators()), (std::vector<int>{0, 3, 2}));
}

TEST_F(ProcessSetsTest, ARemovedSetSaysSo) {
  auto one = Comm(1);
  sets_.Add(1, {1, 2}, one);
  EXPECT_EQ(sets_.Remove(1), one);
  EXPECT_EQ(Ids(sets_.Communicators()), std::vector<int>{0});
  std::shared_ptr<Communicator> found;
  EXPECT_EQ(sets_.Find(1, &found).message(), "process set 1 has been removed");
  EXPECT_EQ(found, nullptr);
  std::vector<int> ranks;
  EXPECT_EQ(sets_.Members(1, &ranks).message(), "process set 1 has been removed");
  EXPECT_EQ(sets_.Info(1, nullptr, nullptr).message(), "process set 1 has been removed");
}

TEST_F(ProcessSetsTest, AnUnknownSetSaysSo) {
  std::shared_ptr<Communicator> found;
  const Status s = sets_.Find(7, &found);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "unknown process set 7");
  std::vector<int> ranks;
  EXPECT_EQ(sets_.Members(7, &ranks).message(), "unknown process set 7");
  EXPECT_EQ(sets_.Info(-1, nullptr, nullptr).message(), "unknown process set -1");
}

}  // namespace
}  // namespace hvd
