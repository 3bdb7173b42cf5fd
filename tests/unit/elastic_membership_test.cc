// ElasticMembership and ParseDiscoveryOutput (launcher): who is in each
// generation of an elastic job, and the discovery script's output.
#include "launcher/elastic_membership.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "launcher/host_discovery.h"
#include "launcher/host_list.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using Clock = ElasticMembership::Clock;

TEST(ElasticMembership, GenerationsNumberTheRunningWorkersInStartOrder) {
  ElasticMembership m(/*min_np=*/2, /*max_np=*/4, /*reset_limit=*/10);
  m.Add("w0", "a");
  m.Add("w1", "a");
  m.Add("w2", "b");
  std::vector<std::pair<std::string, std::string>> a;
  EXPECT_EQ(m.NextGeneration(&a), 0);
  // rank size local_rank local_size cross_rank cross_size
  EXPECT_THAT(a, ElementsAre(Pair("w0", "0 3 0 2 0 2"), Pair("w1", "1 3 1 2 0 1"),
                             Pair("w2", "2 3 0 1 1 2")));
  bool reset = false;
  EXPECT_EQ(m.Ended("w1", /*failed=*/true, Clock::now(), &reset), "");
  EXPECT_TRUE(reset);
  m.Add("w3", "b");
  // Before it is numbered, the next generation's places: what a new worker starts with.
  const auto upcoming = m.Upcoming();
  ASSERT_EQ(upcoming.size(), 3u);
  EXPECT_EQ(upcoming[2].id, "w3");
  EXPECT_EQ(upcoming[2].host, "b");
  EXPECT_EQ(upcoming[2].topology.rank, 2);
  EXPECT_EQ(upcoming[2].topology.local_rank, 1);
  EXPECT_EQ(upcoming[2].topology.local_size, 2);
  EXPECT_EQ(upcoming[2].topology.cross_size, 1);
  EXPECT_EQ(m.generation(), 0);
  EXPECT_EQ(m.NextGeneration(&a), 1);
  EXPECT_THAT(a, ElementsAre(Pair("w0", "0 3 0 1 0 2"), Pair("w2", "1 3 0 2 1 2"),
                             Pair("w3", "2 3 1 2 0 1")));
  EXPECT_EQ(m.resets(), 1);
  EXPECT_TRUE(m.InLatest("w3"));
  EXPECT_FALSE(m.InLatest("w1"));
}

TEST(ElasticMembership, ACleanExitIsNoResetAndTooFewRanksEndTheJob) {
  ElasticMembership m(2, 3, 10);
  for (const char* id : {"w0", "w1", "w2"}) m.Add(id, "a");
  std::vector<std::pair<std::string, std::string>> a;
  m.NextGeneration(&a);
  EXPECT_EQ(m.Vacancies(0), 0);
  bool reset = true;
  EXPECT_EQ(m.Ended("w2", /*failed=*/false, Clock::now(), &reset), "");
  EXPECT_FALSE(reset);
  // The job is finishing: the freed slot is not filled.
  EXPECT_TRUE(m.finishing());
  EXPECT_EQ(m.Vacancies(0), 0);
  EXPECT_EQ(m.Ended("w1", /*failed=*/true, Clock::now(), &reset),
            "1 rank(s) left, fewer than --min-np 2");
  EXPECT_FALSE(reset);
}

// horovodrun's --reset-limit: every generation after the first counts, one that
// discovery made (a worker added) as much as a failure's.
TEST(ElasticMembership, EveryNewGenerationCountsTowardsTheResetLimit) {
  ElasticMembership m(1, 4, /*reset_limit=*/1);
  m.Add("w0", "a");
  std::vector<std::pair<std::string, std::string>> a;
  EXPECT_EQ(m.NextGeneration(&a), 0);
  EXPECT_EQ(m.ResetRefused(), "");
  EXPECT_EQ(m.Vacancies(0), 3);
  m.Add("w1", "b");  // discovered
  EXPECT_EQ(m.NextGeneration(&a), 1);
  EXPECT_EQ(m.ResetRefused(), "the job was reset 1 time(s) (--reset-limit 1)");
  bool reset = true;
  EXPECT_EQ(m.Ended("w1", /*failed=*/true, Clock::now(), &reset), m.ResetRefused());
  EXPECT_FALSE(reset);
}

TEST(ElasticMembership, AStoppedWorkerFreesItsSlotWithoutFinishingTheJob) {
  ElasticMembership m(1, 2, 10);
  for (const char* id : {"w0", "w1"}) m.Add(id, "a");
  std::vector<std::pair<std::string, std::string>> a;
  m.NextGeneration(&a);
  EXPECT_EQ(m.Vacancies(0), 0);
  EXPECT_EQ(m.Vacancies(1), 1);  // once one of them has left
  m.Stopped("w1");  // its host vanished
  EXPECT_FALSE(m.finishing());
  EXPECT_EQ(m.Vacancies(0), 1);
  EXPECT_EQ(m.running(), 1);
  EXPECT_EQ(m.RunningOn("a"), 1);
}

TEST(ElasticMembership, ResetsAreBoundedAndFailingHostsAreBlacklistedForAWhile) {
  ElasticMembership m(1, 8, /*reset_limit=*/1);
  for (const char* id : {"w0", "w1", "w2", "w3"}) m.Add(id, id[1] == '0' ? "good" : "bad");
  std::vector<std::pair<std::string, std::string>> a;
  m.NextGeneration(&a);
  const auto t0 = Clock::now();
  bool reset = false;
  EXPECT_EQ(m.Ended("w1", true, t0, &reset), "");
  EXPECT_FALSE(m.Blacklisted("bad", t0));
  m.NextGeneration(&a);
  EXPECT_EQ(m.Ended("w2", true, t0, &reset), "the job was reset 1 time(s) (--reset-limit 1)");
  EXPECT_TRUE(m.Blacklisted("bad", t0));  // its second failure
  EXPECT_FALSE(m.Blacklisted("good", t0));
  // The default cooldown: a minute, whatever the draw.
  EXPECT_TRUE(m.Blacklisted("bad", t0 + std::chrono::seconds(59)));
  EXPECT_FALSE(m.Blacklisted("bad", t0 + std::chrono::seconds(60)));
}

// --blacklist-cooldown-range LO HI, as horovodrun's: the n-th blacklisting keeps the
// host out LO * 2^n s plus the jitter's share of LO, at least LO and at most HI.
TEST(ElasticMembership, TheCooldownDoublesWithEachBlacklistingWithinItsRange) {
  double jitter = 0;
  ElasticMembership m(1, 64, /*reset_limit=*/100,
                      BlacklistCooldown{2, 20, [&jitter] { return jitter; }});
  m.Add("w0", "good");
  std::vector<std::pair<std::string, std::string>> a;
  m.NextGeneration(&a);
  int next = 1;
  // Fails two workers on "bad" at `t`: its next blacklisting.
  auto blacklist = [&](Clock::time_point t) {
    bool reset = false;
    for (int k = 0; k < 2; ++k) {
      const std::string id = "w" + std::to_string(next++);
      m.Add(id, "bad");
      m.NextGeneration(&a);
      EXPECT_EQ(m.Ended(id, /*failed=*/true, t, &reset), "");
    }
  };
  const auto t0 = Clock::now();
  const auto s = [](double v) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(v));
  };
  blacklist(t0);  // the first time: 2 * 2 = 4 s
  EXPECT_TRUE(m.Blacklisted("bad", t0 + s(3.9)));
  EXPECT_FALSE(m.Blacklisted("bad", t0 + s(4.0)));
  jitter = 0.5;
  blacklist(t0);  // the second: 2 * 4 + 0.5 * 2 = 9 s
  EXPECT_TRUE(m.Blacklisted("bad", t0 + s(8.9)));
  EXPECT_FALSE(m.Blacklisted("bad", t0 + s(9.0)));
  blacklist(t0);  // the third: 2 * 8 + 1 = 17 s
  EXPECT_TRUE(m.Blacklisted("bad", t0 + s(16.9)));
  EXPECT_FALSE(m.Blacklisted("bad", t0 + s(17.0)));
  blacklist(t0);  // the fourth: 33 s, but at most 20
  EXPECT_TRUE(m.Blacklisted("bad", t0 + s(19.9)));
  EXPECT_FALSE(m.Blacklisted("bad", t0 + s(20.0)));
  EXPECT_FALSE(m.Blacklisted("good", t0));
}

TEST(ElasticMembership, AWorkerLeftOutOfTheGenerationFailsWithoutAReset) {
  ElasticMembership m(1, 2, 10);
  m.Add("w0", "a");
  m.Add("w1", "a");
  bool reset = true;
  // Not in any generation yet (started, not published): its failure resets nothing.
  EXPECT_EQ(m.Ended("w1", true, Clock::now(), &reset), "");
  EXPECT_FALSE(reset);
}

TEST(HostDiscovery, ParsesHostsAndSlots) {
  std::vector<HostSlots> hosts;
  std::string why;
  ASSERT_TRUE(ParseDiscoveryOutput("# comment\nlocalhost:2\n\n  hostB \n127.0.0.1:3\n", 4, &hosts, &why))
      << why;
  ASSERT_EQ(hosts.size(), 3u);
  EXPECT_EQ(hosts[0].host, "localhost");
  EXPECT_EQ(hosts[0].slots, 2);
  EXPECT_EQ(hosts[1].host, "hostB");
  EXPECT_EQ(hosts[1].slots, 4);
  EXPECT_EQ(hosts[2].slots, 3);
  EXPECT_FALSE(ParseDiscoveryOutput("hostA:0\n", 1, &hosts, &why));
  EXPECT_THAT(why, HasSubstr("hostA:0"));
  EXPECT_FALSE(ParseDiscoveryOutput("hostA:x\n", 1, &hosts, &why));
  EXPECT_FALSE(ParseDiscoveryOutput("host A\n", 1, &hosts, &why));
  EXPECT_EQ(hosts.size(), 3u) << "a failed parse leaves the hosts alone";
}

TEST(HostDiscovery, RunsTheScriptAndReportsItsFailure) {
  std::vector<HostSlots> hosts;
  std::string why;
  EXPECT_FALSE(RunDiscoveryScript("/nonexistent/hosts.sh", 1, &hosts, &why));
  EXPECT_THAT(why, HasSubstr("failed"));
}

// Without -H an elastic job starts on the script's hosts: -np or their slots, the
// fewer, once they have --min-np; until then it waits, bounded, and says what it saw.
TEST(HostDiscovery, TheFirstHostsAreTheScriptsOnceTheyHaveMinNpSlots) {
  char dir[] = "/tmp/hvd-discovery-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string script = std::string(dir) + "/hosts.sh";
  std::ofstream(script) << "#!/bin/sh\necho hostA:2\necho hostB\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  LauncherOptions o;
  o.host_discovery_script = script;
  o.num_ranks = 4;
  o.min_np = 2;
  o.slots_per_host = 1;
  ASSERT_TRUE(DiscoverFirstHosts(5, &o).ok());
  EXPECT_EQ(FormatHostList(o.hosts), "hostA:2,hostB:1");
  EXPECT_EQ(o.num_ranks, 3);

  LauncherOptions too_few = o;
  too_few.hosts.clear();
  too_few.min_np = 4;
  const auto begin = std::chrono::steady_clock::now();
  const Status s = DiscoverFirstHosts(1.5, &too_few);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(4));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "host discovery: no 4 slot(s) for --min-np within 1.5 s (" + script +
                             ": its hosts have 3 slot(s))");
  EXPECT_TRUE(too_few.hosts.empty());
  std::system(("rm -rf " + std::string(dir)).c_str());
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
