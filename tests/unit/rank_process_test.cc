// RankProcess's name and RanksToSpawn's pacing of ssh logins: no process is started.
#include "launcher/rank_process.h"

#include <gtest/gtest.h>

namespace hvd {
namespace launcher {
namespace {

RankProcess Rank(int rank, bool remote, const std::string& host) {
  RankProcess r;
  r.spec.placement.rank = rank;
  r.spec.placement.host = host;
  r.spec.remote = remote;
  return r;
}

// A remote rank whose ssh runs and has not printed the start marker.
RankProcess LoggingIn(int rank, const std::string& host) {
  RankProcess r = Rank(rank, true, host);
  r.pending = false;
  r.running = true;
  r.pid = 100 + rank;
  return r;
}

// horovodrun's --output-filename layout: ranks zero-padded to the last rank's digits.
TEST(RankProcess, OutputDirsArePaddedToTheLastRanksDigits) {
  EXPECT_EQ(RankOutputDir("/o", 3, 1), "/o/rank.3");
  EXPECT_EQ(RankOutputDir("/o", 3, 2), "/o/rank.03");
  EXPECT_EQ(RankOutputDir("/o", 10, 2), "/o/rank.10");
  EXPECT_EQ(RankOutputDir("out", 7, 3), "out/rank.007");
}

TEST(RankProcess, NameShowsThePidAndWithHostsTheHost) {
  RankProcess local = Rank(2, false, "127.0.0.1");
  local.pid = 123;
  EXPECT_EQ(local.Name(), "rank 2 (pid 123)");
  local.spec.host = "hostA";
  EXPECT_EQ(local.Name(), "rank 2 (pid 123 on hostA)");
  // A remote rank's pid is the remote script's, unknown until its start marker.
  RankProcess remote = LoggingIn(3, "hostB");
  remote.spec.host = "hostB";
  EXPECT_EQ(remote.Name(), "rank 3 (on hostB)");
  EXPECT_TRUE(remote.LoggingIn());
}

TEST(RankProcess, LocalRanksAllSpawnAtOnce) {
  std::vector<RankProcess> ranks;
  for (int r = 0; r < 20; ++r) ranks.push_back(Rank(r, false, "127.0.0.1"));
  EXPECT_EQ(RanksToSpawn(ranks).size(), 20u);
  ranks[3].pending = false;
  EXPECT_EQ(RanksToSpawn(ranks).size(), 19u);
}

TEST(RankProcess, RemoteLoginsArePacedPerHost) {
  std::vector<RankProcess> ranks;
  for (int r = 0; r < 10; ++r) ranks.push_back(Rank(r, true, "hostB"));
  for (int r = 10; r < 12; ++r) ranks.push_back(Rank(r, true, "hostC"));
  ranks.push_back(Rank(12, false, "127.0.0.1"));
  std::vector<size_t> want;
  for (size_t i = 0; i < static_cast<size_t>(kMaxStartingSshPerHost); ++i) want.push_back(i);
  want.insert(want.end(), {10, 11, 12});
  EXPECT_EQ(RanksToSpawn(ranks), want);
}

TEST(RankProcess, ALoginInProgressTakesASlotUntilItsMarkerArrives) {
  std::vector<RankProcess> ranks;
  for (int r = 0; r < kMaxStartingSshPerHost; ++r) ranks.push_back(LoggingIn(r, "hostB"));
  ranks.push_back(Rank(kMaxStartingSshPerHost, true, "hostB"));
  EXPECT_TRUE(RanksToSpawn(ranks).empty());
  ranks[0].running = false;  // Reaped: no longer logging in.
  EXPECT_EQ(RanksToSpawn(ranks),
            (std::vector<size_t>{static_cast<size_t>(kMaxStartingSshPerHost)}));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
