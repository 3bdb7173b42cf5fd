// Bootstrap (controller/loop/bootstrap.h) boots real runtimes from an environment given as a
// map, without the C API: a job of one, two ranks as threads over a TCP store that
// the test serves (as dprun does), and two torchrun-style ranks where rank 0 serves
// the store and keeps it across a shutdown and a second start.
#include "controller/loop/bootstrap.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "controller/loop/runtime.h"
#include "runtime/common/job_keys.h"
#include "runtime/store/tcp_store.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using Vars = std::map<std::string, std::string>;

// What a Bootstrap set in its environment (it never touches the real one here).
struct SetVars {
  std::mutex mu;
  Vars vars;
};

BootstrapEnv EnvOf(Vars vars, SetVars* set) {
  auto shared = std::make_shared<const Vars>(std::move(vars));
  BootstrapEnv env;
  env.getenv = [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
  env.setenv = [set](const char* name, const char* value) {
    std::lock_guard<std::mutex> lock(set->mu);
    set->vars[name] = value;
  };
  return env;
}

// A port that was free a moment ago on 127.0.0.1.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  HVD_CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
  HVD_CHECK(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A sum over the job: every rank gives rank + 1.
void ExpectSum(Runtime& rt, const std::string& name) {
  float v = static_cast<float>(rt.rank() + 1);
  const Status s = AllreduceSync(rt, name, &v, &v, 1, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(s.ok()) << "rank " << rt.rank() << ": " << s.ToString();
  EXPECT_EQ(v, rt.size() * (rt.size() + 1) / 2.0f) << "rank " << rt.rank();
}

TEST(Bootstrap, JobOfOneStartsAgainAfterShutdown) {
  SetVars set;
  Bootstrap boot(EnvOf({{"HVD_TIMEOUT", "10"}, {"HVD_PROCESS_SETS", "0"}}, &set));
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(boot.generation(), round);
    std::unique_ptr<Runtime> rt;
    const Status s = boot.Start(&rt);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(boot.generation(), round + 1);
    EXPECT_EQ(rt->rank(), 0);
    EXPECT_EQ(rt->size(), 1);
    EXPECT_EQ(rt->options().timeout, std::chrono::seconds(10));
    std::vector<int> ranks;
    ASSERT_TRUE(rt->ProcessSetInfo(1, nullptr, &ranks).ok());  // from HVD_PROCESS_SETS
    EXPECT_EQ(ranks, std::vector<int>{0});
    ExpectSum(*rt, "x");
    EXPECT_TRUE(rt->Shutdown().ok());
  }
  EXPECT_TRUE(set.vars.empty());  // no HVD_GLOO_IFACE: NCCL's interface is left alone
}

TEST(Bootstrap, AMalformedVariableIsNamedAndStartsNothing) {
  const std::vector<std::pair<Vars, std::string>> cases = {
      {{{"HVD_TIMEOUT", "soon"}}, "HVD_TIMEOUT"},
      {{{"HVD_SIZE", "2"}}, "HVD_STORE_ADDR"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "x"}, {"LOCAL_RANK", "0"}}, "WORLD_SIZE"}};
  SetVars set;
  for (const auto& [vars, named] : cases) {
    Bootstrap boot(EnvOf(vars, &set));
    std::unique_ptr<Runtime> rt;
    const Status s = boot.Start(&rt);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(named));
    EXPECT_EQ(rt, nullptr);
    EXPECT_EQ(boot.generation(), 0);
  }
}

TEST(Bootstrap, TwoRanksOverTheStoreDprunServes) {
  TcpStoreServer::Options opts;
  opts.secret = "s3cret";
  std::unique_ptr<TcpStoreServer> server;
  ASSERT_TRUE(TcpStoreServer::Start(opts, &server).ok());
  const std::string addr = "127.0.0.1:" + std::to_string(server->port());
  SetVars set;
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      Bootstrap boot(EnvOf({{"HVD_RANK", std::to_string(r)},
                            {"HVD_SIZE", "2"},
                            {"HVD_LOCAL_RANK", std::to_string(r)},
                            {"HVD_LOCAL_SIZE", "2"},
                            {"HVD_STORE_ADDR", addr},
                            {"HVD_STORE_SECRET", "s3cret"},
                            {"HVD_JOB_ID", "job7"},
                            {"HVD_TIMEOUT", "20"},
                            {"HVD_GLOO_IFACE", "lo"},
                            {"NCCL_SOCKET_IFNAME", "eth9"}},
                           &set));
      std::unique_ptr<Runtime> rt;
      const Status s = boot.Start(&rt);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.ToString();
      EXPECT_EQ(rt->rank(), r);
      EXPECT_EQ(rt->options().local_size, 2);
      ExpectSum(*rt, "dprun.x");
      EXPECT_TRUE(rt->Shutdown().ok());
    });
  }
  for (auto& t : threads) t.join();
  // dprun's --start-timeout watches these, in the launcher's (unscoped) view.
  for (int r = 0; r < 2; ++r) {
    std::string pid;
    ASSERT_TRUE(server->LocalStore()->Get(keys::Started(r), std::chrono::seconds(1), &pid).ok());
    EXPECT_EQ(pid, std::to_string(::getpid()));
  }
  EXPECT_TRUE(set.vars.empty());  // NCCL_SOCKET_IFNAME was already set
}

TEST(Bootstrap, TorchrunRankZeroServesTheStoreAcrossRestarts) {
  // Two "nodes" of one rank each, on loopback; torchrun's own store would hold
  // MASTER_PORT, ours is the port after it.
  const int port = FreePort();
  SetVars set;
  std::vector<std::unique_ptr<Bootstrap>> boots;
  for (int r = 0; r < 2; ++r)
    boots.push_back(std::make_unique<Bootstrap>(EnvOf({{"RANK", std::to_string(r)},
                                                       {"WORLD_SIZE", "2"},
                                                       {"LOCAL_RANK", "0"},
                                                       {"LOCAL_WORLD_SIZE", "1"},
                                                       {"MASTER_ADDR", "127.0.0.1"},
                                                       {"MASTER_PORT", std::to_string(port - 1)},
                                                       {"HVD_GLOO_IFACE", "lo"},
                                                       {"HVD_TIMEOUT", "20"}},
                                                      &set)));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      for (int round = 0; round < 2; ++round) {
        std::unique_ptr<Runtime> rt;
        const Status s = boots[r]->Start(&rt);
        ASSERT_TRUE(s.ok()) << "rank " << r << " round " << round << ": " << s.ToString();
        EXPECT_EQ(rt->rank(), r);
        EXPECT_EQ(rt->options().cross_rank, r);  // exchanged through the store
        EXPECT_EQ(rt->options().cross_size, 2);
        ExpectSum(*rt, "torchrun.x");
        EXPECT_TRUE(rt->Shutdown().ok());
      }
      EXPECT_EQ(boots[r]->generation(), 2);
    });
  }
  for (auto& t : threads) t.join();
  // Rank 0's server outlived both runtimes.
  std::shared_ptr<Store> store;
  ASSERT_TRUE(ConnectTcpStore("127.0.0.1", port, "", std::chrono::seconds(5), &store).ok());
  std::string pid;
  EXPECT_TRUE(store->Get(keys::Started(1), std::chrono::seconds(1), &pid).ok());
  EXPECT_EQ(set.vars["NCCL_SOCKET_IFNAME"], "lo");
}

}  // namespace
}  // namespace testing
}  // namespace hvd
