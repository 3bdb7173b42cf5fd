// Choosing a communicator's host plane from where its ranks are (runtime/transport/host_plane.h).
#include "runtime/transport/gloo/gloo_backend.h"
#include "runtime/transport/host_plane.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "runtime/transport/hierarchical_backend.h"

namespace hvd {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kPlenty = int64_t{1} << 30;

std::vector<HostInfo> Hosts(const std::vector<std::string>& ids, int64_t free = kPlenty) {
  std::vector<HostInfo> v;
  for (const auto& id : ids) v.push_back({id, free});
  return v;
}

HostPath Choose(const std::string& mode, const std::vector<int>& ranks,
                const std::vector<HostInfo>& info, std::string* note = nullptr) {
  std::string ignored;
  HostPath path = HostPath::kGloo;
  Status s = ChooseHostPath(mode, PlaceRanks(ranks, info), &path, note ? note : &ignored);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return path;
}

TEST(PlaceRanksTest, HostsNumberedByFirstAppearanceInSetOrder) {
  const auto info = Hosts({"b", "a", "b", "a", "c"});
  Placement p = PlaceRanks({3, 0, 1, 2}, info);  // hosts a, b, a, b
  EXPECT_THAT(p.host_of, ElementsAre(0, 1, 0, 1));
  EXPECT_THAT(p.local_of, ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(p.host_size, ElementsAre(2, 2));
  EXPECT_EQ(p.hosts(), 2);
}

TEST(PlaceRanksTest, HostFreeIsTheLeastOfItsRanks) {
  std::vector<HostInfo> info = {{"a", 500}, {"a", 300}, {"b", 900}};
  Placement p = PlaceRanks({0, 1, 2}, info);
  EXPECT_THAT(p.host_free, ElementsAre(300, 900));
}

TEST(ChooseHostPathTest, OneHostIsSharedMemory) {
  EXPECT_EQ(Choose("auto", {0, 1, 2}, Hosts({"a", "a", "a"})), HostPath::kShm);
  EXPECT_EQ(Choose("shm", {0, 1}, Hosts({"a", "a"})), HostPath::kShm);
}

TEST(ChooseHostPathTest, EvenHostsAreHierarchical) {
  EXPECT_EQ(Choose("auto", {0, 1, 2, 3}, Hosts({"a", "a", "b", "b"})), HostPath::kHierarchical);
  EXPECT_EQ(Choose("auto", {0, 1, 2, 3, 4, 5}, Hosts({"a", "b", "c", "a", "b", "c"})),
            HostPath::kHierarchical);
}

TEST(ChooseHostPathTest, GlooWhenAskedOrNothingToShare) {
  EXPECT_EQ(Choose("gloo", {0, 1}, Hosts({"a", "a"})), HostPath::kGloo);
  EXPECT_EQ(Choose("auto", {0}, Hosts({"a"})), HostPath::kGloo);
  EXPECT_EQ(Choose("auto", {0, 1, 2}, Hosts({"a", "b", "c"})), HostPath::kGloo);
  // A process set with one rank on each host, inside a job that shares hosts.
  EXPECT_EQ(Choose("auto", {0, 2}, Hosts({"a", "a", "b", "b"})), HostPath::kGloo);
  EXPECT_EQ(Choose("auto", {0, 1}, Hosts({"a", "a", "b", "b"})), HostPath::kShm);
}

TEST(ChooseHostPathTest, UnevenHostsFallBackToGlooWithANote) {
  std::string note;
  EXPECT_EQ(Choose("auto", {0, 1, 2}, Hosts({"a", "a", "b"}), &note), HostPath::kGloo);
  EXPECT_THAT(note, HasSubstr("different numbers of ranks"));
}

TEST(ChooseHostPathTest, SmallDevShmFallsBackUnderAutoAndFailsUnderShm) {
  std::vector<HostInfo> info = {{"a", kPlenty}, {"a", kPlenty}, {"b", 1000}, {"b", kPlenty}};
  std::string note;
  EXPECT_EQ(Choose("auto", {0, 1, 2, 3}, info, &note), HostPath::kGloo);
  EXPECT_THAT(note, HasSubstr("/dev/shm has 1000 bytes free on host 1"));
  HostPath path;
  Status s = ChooseHostPath("shm", PlaceRanks({0, 1, 2, 3}, info), &path, &note);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("HVD_CPU_OPERATIONS=shm: /dev/shm has 1000 bytes free"));
  EXPECT_THAT(s.message(), HasSubstr("HVD_CPU_OPERATIONS=gloo"));
  EXPECT_GT(ShmBytesNeeded(2), 3 * (4 << 20));
}

TEST(LocalHostInfoTest, OverrideAndDefault) {
  EXPECT_EQ(LocalHostInfo("rack7").id, "rack7");
  const HostInfo a = LocalHostInfo(""), b = LocalHostInfo("");
  EXPECT_FALSE(a.id.empty());
  EXPECT_EQ(a.id, b.id);
  EXPECT_GT(a.shm_free, 0);  // the test machine has a /dev/shm
}

TEST(ExchangeHostInfoTest, EveryRankReadsTheSameTable) {
  auto store = NewInMemoryStore();
  std::vector<std::vector<HostInfo>> seen(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      HostInfo mine{"host " + std::to_string(r % 2), 100 + r};
      Status s = ExchangeHostInfo(store.get(), r, 3, mine, std::chrono::milliseconds(5000), &seen[r]);
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(seen[r].size(), 3u);
    EXPECT_EQ(seen[r][1].id, "host 1");
    EXPECT_EQ(seen[r][2].shm_free, 102);
    EXPECT_EQ(seen[r][2].id, "host 0");
  }
}

// 300 ranks: the tree three levels deep below rank 0 (fan-out 16), ids with spaces;
// every rank's table is every rank's record, in rank order; and each rank made a
// few store calls, not one per rank.
TEST(ExchangeHostInfoTest, ATreeOfManyRanksGathersEveryRecord) {
  constexpr int kRanks = 300;
  auto store = NewInMemoryStore();
  std::vector<std::vector<HostInfo>> seen(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      HostInfo mine{"boot " + std::to_string(r % 7) + "/shm", 1000 + r};
      Status s = ExchangeHostInfo(store.get(), r, kRanks, mine, std::chrono::milliseconds(20000),
                                  &seen[r]);
      EXPECT_TRUE(s.ok()) << s.ToString();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(seen[r].size(), static_cast<size_t>(kRanks));
    for (int q = 0; q < kRanks; ++q) {
      ASSERT_EQ(seen[r][q].id, "boot " + std::to_string(q % 7) + "/shm") << r << " " << q;
      ASSERT_EQ(seen[r][q].shm_free, 1000 + q);
    }
  }
}

TEST(ExchangeHostInfoTest, AMalformedRecordIsAnError) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("host/tree/1", "7 5 elsewhere\n").ok());  // rank 7 of 2
  std::vector<HostInfo> all;
  Status s = ExchangeHostInfo(store.get(), 0, 2, {"a", 1}, std::chrono::milliseconds(1000), &all);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("malformed host record '7 5 elsewhere' (job of 2 ranks)"));
}

TEST(ExchangeHostInfoTest, AMissingRankTimesOutNamingIt) {
  auto store = NewInMemoryStore();
  std::vector<HostInfo> all;
  Status s = ExchangeHostInfo(store.get(), 0, 2, {"a", 1}, std::chrono::milliseconds(100), &all);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("waiting for rank 1 to say which host it is on"));
}

TEST(GlooBindHostnameTest, EachLocalRankGetsALoopbackAddressOfItsOwn) {
  EXPECT_EQ(GlooBindHostname("127.0.0.1", 0), "127.0.0.1");
  EXPECT_EQ(GlooBindHostname("127.0.0.1", 1), "127.0.0.2");
  EXPECT_EQ(GlooBindHostname("127.0.0.1", 249), "127.0.0.250");
  EXPECT_EQ(GlooBindHostname("127.0.0.1", 250), "127.0.1.1");
  EXPECT_EQ(GlooBindHostname("127.0.0.1", 4095), "127.0.16.96");
  EXPECT_EQ(GlooBindHostname("10.1.2.3", 7), "10.1.2.3");  // a host's address stays
  EXPECT_EQ(GlooBindHostname("127.0.0.5", 7), "127.0.0.5");  // as does one chosen
}

TEST(ShardCountsTest, EqualShardsFirstOnesLonger) {
  EXPECT_THAT(ShardCounts(10, 3), ElementsAre(4, 3, 3));
  EXPECT_THAT(ShardCounts(2, 4), ElementsAre(1, 1, 0, 0));
  EXPECT_THAT(ShardCounts(0, 2), ElementsAre(0, 0));
}

}  // namespace
}  // namespace hvd
