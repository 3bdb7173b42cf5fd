// PlaceRanks, the host-list parsers and the forwarded environment: pure functions.
#include "launcher/rank_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "launcher/host_list.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::string> EnvOf(const RankPlacement& p) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : p.env) m[k] = v;
  return m;
}

struct Layout {
  int local_rank, local_size, cross_rank, cross_size;
  std::string host;
};

std::vector<Layout> Place(int np, const std::vector<HostSlots>& hosts) {
  std::vector<RankPlacement> out;
  const Status s = PlaceRanks(np, hosts, JobEndpoint{"10.0.0.1:5", "sec", "job", ""}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  std::vector<Layout> layout;
  for (const RankPlacement& p : out) {
    auto env = EnvOf(p);
    EXPECT_EQ(env["HVD_RANK"], std::to_string(layout.size()));
    EXPECT_EQ(env["HVD_SIZE"], std::to_string(np));
    layout.push_back({std::stoi(env["HVD_LOCAL_RANK"]), std::stoi(env["HVD_LOCAL_SIZE"]),
                      std::stoi(env["HVD_CROSS_RANK"]), std::stoi(env["HVD_CROSS_SIZE"]), p.host});
  }
  return layout;
}

TEST(RankPlacement, EvenHostsGiveLocalAndCrossRanks) {
  const auto l = Place(8, {{"a", 4, ""}, {"b", 4, ""}});
  ASSERT_EQ(l.size(), 8u);
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(l[r].host, r < 4 ? "a" : "b");
    EXPECT_EQ(l[r].local_rank, r % 4);
    EXPECT_EQ(l[r].local_size, 4);
    EXPECT_EQ(l[r].cross_rank, r / 4);
    EXPECT_EQ(l[r].cross_size, 2);
  }
}

TEST(RankPlacement, UnevenHostsFollowHorovodsCrossRank) {
  // a runs ranks 0-2, b ranks 3-4, c rank 5.
  const auto l = Place(6, {{"a", 3, ""}, {"b", 2, ""}, {"c", 4, ""}});
  const std::vector<std::vector<int>> want = {
      // local_rank, local_size, cross_rank, cross_size
      {0, 3, 0, 3}, {1, 3, 0, 2}, {2, 3, 0, 1}, {0, 2, 1, 3}, {1, 2, 1, 2}, {0, 1, 2, 3}};
  ASSERT_EQ(l.size(), want.size());
  for (size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(l[r].local_rank, want[r][0]) << "rank " << r;
    EXPECT_EQ(l[r].local_size, want[r][1]) << "rank " << r;
    EXPECT_EQ(l[r].cross_rank, want[r][2]) << "rank " << r;
    EXPECT_EQ(l[r].cross_size, want[r][3]) << "rank " << r;
  }
}

TEST(RankPlacement, FewerRanksThanSlotsLeavesLaterHostsUnused) {
  const auto l = Place(3, {{"a", 2, ""}, {"b", 2, ""}, {"c", 2, ""}});
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[2].host, "b");
  EXPECT_EQ(l[2].local_size, 1);
  EXPECT_EQ(l[0].cross_size, 2);  // c has no rank, so it is not counted.
  EXPECT_EQ(l[1].cross_size, 1);
}

TEST(RankPlacement, AddressAndInterfaceVariables) {
  std::vector<RankPlacement> out;
  JobEndpoint job{"10.0.0.1:5", "sec", "job", "eth1"};
  ASSERT_TRUE(PlaceRanks(2, {{"hostA", 1, "10.0.0.2"}, {"hostB", 1, ""}}, job, &out).ok());
  auto a = EnvOf(out[0]), b = EnvOf(out[1]);
  EXPECT_EQ(out[0].host_index, 0);
  EXPECT_EQ(out[1].host_index, 1);
  EXPECT_EQ(a["HVD_GLOO_HOSTNAME"], "10.0.0.2");
  EXPECT_EQ(b["HVD_GLOO_HOSTNAME"], "hostB");  // No address: the name itself.
  EXPECT_EQ(a["HVD_GLOO_IFACE"], "eth1");
  EXPECT_EQ(a["NCCL_SOCKET_IFNAME"], "eth1");
  EXPECT_EQ(a["HVD_STORE_ADDR"], "10.0.0.1:5");
  std::vector<RankPlacement> plain;
  ASSERT_TRUE(PlaceRanks(1, {{"h", 1, ""}}, JobEndpoint{"x:1", "s", "j", ""}, &plain).ok());
  EXPECT_EQ(EnvOf(plain[0]).count("HVD_GLOO_IFACE"), 0u);
}

TEST(RankPlacement, HorovodrunsVariablesRepeatTheTopologyAndNameTheHost) {
  std::vector<RankPlacement> out;
  ASSERT_TRUE(PlaceRanks(3, {{"a", 2, "10.0.0.2"}, {"b", 2, ""}}, {}, &out).ok());
  for (const RankPlacement& p : out) {
    auto env = EnvOf(p);
    for (const char* name :
         {"RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE"})
      EXPECT_EQ(env[std::string("HOROVOD_") + name], env[std::string("HVD_") + name])
          << name << " of rank " << p.rank;
    EXPECT_EQ(env["HOROVOD_HOSTNAME"], p.rank < 2 ? "a" : "b");  // the name, not the address
  }
  EXPECT_EQ(EnvOf(out[2])["HOROVOD_RANK"], "2");
  EXPECT_EQ(EnvOf(out[2])["HOROVOD_CROSS_RANK"], "1");
  const EnvVars v = TopologyVariables({5, 8, 1, 4, 1, 2}, "h");
  EXPECT_EQ(v.size(), 17u);
  EXPECT_EQ(v.front(), (std::pair<std::string, std::string>("HVD_RANK", "5")));
  EXPECT_EQ(v[12], (std::pair<std::string, std::string>("HOROVOD_HOSTNAME", "h")));
}

TEST(RankPlacement, TorchrunsVariablesLetTorchDistributedRendezvous) {
  std::vector<RankPlacement> out;
  JobEndpoint job{"10.0.0.1:5", "sec", "job", "", "10.0.0.2", "29511"};
  ASSERT_TRUE(PlaceRanks(3, {{"a", 2, "10.0.0.2"}, {"b", 2, ""}}, job, &out).ok());
  for (const RankPlacement& p : out) {
    auto env = EnvOf(p);
    EXPECT_EQ(env["RANK"], std::to_string(p.rank));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_RANK"], env["HVD_LOCAL_RANK"]);
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], p.rank < 2 ? "2" : "1");
    EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.2");  // rank 0's host
    EXPECT_EQ(env["MASTER_PORT"], "29511");
  }
  // Not chosen by dprun (the user's own carry over): not set.
  ASSERT_TRUE(PlaceRanks(1, {{"a", 1, ""}}, JobEndpoint{"x:1", "s", "j", ""}, &out).ok());
  EXPECT_EQ(EnvOf(out[0]).count("MASTER_ADDR"), 0u);
  EXPECT_EQ(EnvOf(out[0]).count("MASTER_PORT"), 0u);
}

TEST(RankPlacement, RejectsTooFewSlotsAndEmptyHosts) {
  std::vector<RankPlacement> out;
  Status s = PlaceRanks(5, {{"a", 2, ""}, {"b", 2, ""}}, {}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("5 ranks do not fit in the 4 slots of 2 host(s)"));
  s = PlaceRanks(1, {{"a", 0, ""}}, {}, &out);
  EXPECT_THAT(s.message(), HasSubstr("host 'a' has 0 slots"));
}

TEST(HostList, ParsesHostsAndSlots) {
  std::vector<HostSlots> h;
  ASSERT_TRUE(ParseHostList("hostA:4,hostB:2,10.0.0.3,[fd00::1]:3,[fd00::2]", &h).ok());
  ASSERT_EQ(h.size(), 5u);
  EXPECT_EQ(h[0].host, "hostA");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].slots, 2);
  EXPECT_EQ(h[2].host, "10.0.0.3");
  EXPECT_EQ(h[2].slots, 1);
  EXPECT_EQ(h[3].host, "fd00::1");
  EXPECT_EQ(h[3].slots, 3);
  EXPECT_EQ(h[4].host, "fd00::2");
  EXPECT_EQ(h[4].slots, 1);
}

TEST(HostList, FormatsWhatItParses) {
  const std::string list = "hostA:4,10.0.0.3:1,[fd00::1]:3";
  std::vector<HostSlots> h;
  ASSERT_TRUE(ParseHostList(list, &h).ok());
  EXPECT_EQ(FormatHostList(h), list);
}

TEST(HostList, RejectsBadEntries) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "empty entry"},
      {"a:2,,b", "empty entry"},
      {"a:0", "slots must be a number"},
      {"a:x", "slots must be a number"},
      {"a:", "slots must be a number"},
      {"a:2,a:3", "host 'a' is listed twice"},
      {"-oProxyCommand=x", "is not a host name"},
      {"a b:2", "is not a host name"},
      {"fd00::1:2", "IPv6 address must be in brackets"},
      {"[fd00::1", "missing ']'"},
  };
  for (const auto& [list, message] : cases) {
    std::vector<HostSlots> h;
    const Status s = ParseHostList(list, &h);
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << list;
    EXPECT_THAT(s.message(), HasSubstr(message)) << list;
  }
}

TEST(HostList, ParsesHostfiles) {
  std::vector<HostSlots> h;
  ASSERT_TRUE(ParseHostfile("# cluster\nnode1 slots=4\n\n  node2   slots=2  # spare\nnode3\n",
                            "hosts.txt", &h)
                  .ok());
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].host, "node1");
  EXPECT_EQ(h[0].slots, 4);
  EXPECT_EQ(h[1].host, "node2");
  EXPECT_EQ(h[1].slots, 2);
  EXPECT_EQ(h[2].slots, 1);

  Status s = ParseHostfile("node1 slots=4\nnode2 max=3\n", "hosts.txt", &h);
  EXPECT_THAT(s.message(), HasSubstr("hosts.txt:2: expected 'host slots=N', got 'max=3'"));
  s = ParseHostfile("node1 slots=-1\n", "f", &h);
  EXPECT_THAT(s.message(), HasSubstr("f:1: slots must be a number"));
  s = ParseHostfile("# nothing\n", "f", &h);
  EXPECT_THAT(s.message(), HasSubstr("f lists no hosts"));
  s = ParseHostfile("n1\nn1 slots=2\n", "f", &h);
  EXPECT_THAT(s.message(), HasSubstr("f:2: host 'n1' is listed twice"));
}

// As horovodrun: the whole environment but what belongs to this login and machine;
// -x adds, replaces, and can name one of those.
TEST(ForwardedVariables, TheEnvironmentButTheLoginsAndXFlags) {
  const std::vector<std::string> environment = {
      "PATH=/bin",         "HVD_TIMEOUT=5",   "HOROVOD_CYCLE_TIME=2", "NCCL_DEBUG=INFO",
      "FOO=foo",           "HOME=/root",      "PWD=/work",            "OLDPWD=/",
      "SHLVL=2",           "_=/usr/bin/env",  "HOSTNAME=here",        "USER=me",
      "TERM=xterm",        "SSH_AUTH_SOCK=/s", "CUDA_VISIBLE_DEVICES=0", "NV_CUDA_VISIBLE_DEVICES=1",
      "BASH_FUNC_f%%=() { :; }", "LD_LIBRARY_PATH=/l", "BAD-NAME=1"};
  const EnvVars v =
      ForwardedVariables({"FOO", "BAR=bar", "UNSET", "HVD_TIMEOUT=9", "HOME"}, environment);
  const EnvVars want = {{"PATH", "/bin"},        {"HVD_TIMEOUT", "9"},
                        {"HOROVOD_CYCLE_TIME", "2"}, {"NCCL_DEBUG", "INFO"},
                        {"FOO", "foo"},          {"LD_LIBRARY_PATH", "/l"},
                        {"BAR", "bar"},          {"HOME", "/root"}};
  EXPECT_EQ(v, want);
}

// Over the budget (remote ranks: one ssh command line), the environment's largest
// variables stay behind, named; dprun's own and -x's never do.
TEST(ForwardedVariables, TheLargestOfTheEnvironmentStayBehindOverTheBudget) {
  const std::vector<std::string> environment = {
      "BIG1=" + std::string(3000, 'a'), "BIG2=" + std::string(2000, 'b'),
      "HVD_X=" + std::string(5000, 'c'), "SMALL=1"};
  std::vector<std::string> left_out;
  const EnvVars v = ForwardedVariables({"BIG2"}, environment, 4000, &left_out);
  EXPECT_EQ(left_out, (std::vector<std::string>{"BIG1", "SMALL"}));
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].first, "BIG2");
  EXPECT_EQ(v[1].first, "HVD_X");
  left_out.clear();
  EXPECT_EQ(ForwardedVariables({}, environment, 20000, &left_out).size(), 4u);
  EXPECT_TRUE(left_out.empty());
}

TEST(ForwardedVariables, PlacementWinsOnMerge) {
  const EnvVars merged =
      MergeVariables({{"HVD_RANK", "7"}, {"FOO", "1"}}, {{"HVD_RANK", "0"}, {"HVD_SIZE", "2"}});
  const EnvVars want = {{"FOO", "1"}, {"HVD_RANK", "0"}, {"HVD_SIZE", "2"}};
  EXPECT_EQ(merged, want);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
