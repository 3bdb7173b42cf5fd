// Ranks started without dprun: the test starts the processes itself with Open MPI's,
// Slurm's or torchrun's variables (each in a clean environment), and once
// through a real mpirun. Rank 0 serves the store on 127.0.0.1; every rank runs
// tests/programs/topology_job and prints its layout as the runtime sees it. The ranks
// run side by side through JobRunner, the setup commands through RunCommand.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>

#include "runtime/common/status.h"
#include "tests/job_runner.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

const std::string kTopologyJob = std::string(HVD_BUILD_DIR) + "/tests/programs/topology_job";

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

// Runs one process per entry of `envs`, concurrently, each with only that environment
// (plus PATH and short timeouts), stdout and stderr merged.
std::vector<CommandResult> RunRanks(const std::vector<Env>& envs) {
  std::vector<std::unique_ptr<JobRunner>> ranks;
  for (const Env& rank_env : envs) {
    Env env = {{"HVD_TIMEOUT", "10"}};
    for (const auto& [k, v] : rank_env) env[k] = v;
    JobRunner::Options o;
    o.inherit_env = false;
    o.merge_output = true;
    o.env = {"PATH=/usr/bin:/bin"};
    for (const auto& [k, v] : env) o.env.push_back(k + "=" + v);
    ranks.push_back(std::make_unique<JobRunner>(std::vector<std::string>{kTopologyJob, "3"}, o));
  }
  std::vector<JobRunner*> all;
  for (auto& r : ranks) all.push_back(r.get());
  JobRunner::WaitAll(all, seconds(60));
  std::vector<CommandResult> results;
  for (auto& r : ranks) {
    CommandResult res;
    res.timed_out = !r->Wait(milliseconds(0));
    if (res.timed_out) r->Kill();
    res.exit_code = r->exit_code();
    res.output = r->out();
    res.seconds = r->seconds();
    results.push_back(res);
  }
  return results;
}

std::string Topology(int rank, int size, int local_rank, int local_size, int cross_rank,
                     int cross_size) {
  return "topology rank=" + std::to_string(rank) + " size=" + std::to_string(size) +
         " local_rank=" + std::to_string(local_rank) + " local_size=" + std::to_string(local_size) +
         " cross_rank=" + std::to_string(cross_rank) + " cross_size=" + std::to_string(cross_size) +
         "\n";
}

void ExpectRanks(const std::vector<CommandResult>& results,
                 const std::vector<std::vector<int>>& layout) {
  ASSERT_EQ(results.size(), layout.size());
  const int size = static_cast<int>(layout.size());
  for (int r = 0; r < size; ++r) {
    const CommandResult& res = results[r];
    ASSERT_FALSE(res.timed_out) << "rank " << r << ":\n" << res.output;
    EXPECT_EQ(res.exit_code, 0) << "rank " << r << ":\n" << res.output;
    EXPECT_THAT(res.output, HasSubstr(Topology(r, size, layout[r][0], layout[r][1], layout[r][2],
                                               layout[r][3])))
        << "rank " << r;
    EXPECT_THAT(res.output, HasSubstr("step 2 ok\ndone\n")) << "rank " << r;
  }
}

Env OpenMpi(int rank, int size, int local_rank, int local_size) {
  return {{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)}};
}

TEST(SchedulerLaunch, OpenMpiVariablesOnOneNode) {
  const std::string port = std::to_string(FreePort());
  std::vector<Env> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back(OpenMpi(r, 2, r, 2));
    envs.back()["HVD_STORE_PORT"] = port;
  }
  // local_rank, local_size, cross_rank, cross_size
  ExpectRanks(RunRanks(envs), {{0, 2, 0, 1}, {1, 2, 0, 1}});
}

TEST(SchedulerLaunch, OpenMpiCrossRanksAreExchangedThroughTheStore) {
  // Two "nodes" of two ranks each, all on loopback: Open MPI gives no node index.
  const std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<Env> envs;
  for (int r = 0; r < 4; ++r) {
    envs.push_back(OpenMpi(r, 4, r % 2, 2));
    envs.back()["HVD_STORE_ADDR"] = addr;
    envs.back()["HVD_GLOO_HOSTNAME"] = "127.0.0.1";
    envs.back()["HVD_STORE_SECRET"] = "shared";
  }
  ExpectRanks(RunRanks(envs), {{0, 2, 0, 2}, {1, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 1, 2}});
}

TEST(SchedulerLaunch, AcrossNodesALoopbackRouteAsksForAnInterface) {
  const std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  std::vector<Env> envs;
  for (int r = 0; r < 2; ++r) {
    envs.push_back(OpenMpi(r, 2, 0, 1));
    envs.back()["HVD_STORE_ADDR"] = addr;
  }
  for (const CommandResult& res : RunRanks(envs)) {
    EXPECT_EQ(res.exit_code, 2) << res.output;
    EXPECT_THAT(res.output, HasSubstr("is over loopback (127.0.0.1), which other nodes cannot "
                                      "reach: set HVD_GLOO_IFACE"));
  }
}

TEST(SchedulerLaunch, SlurmVariablesAcrossTwoNodes) {
  const std::string port = std::to_string(FreePort());
  std::vector<Env> envs;
  for (int r = 0; r < 4; ++r) {
    envs.push_back({{"SLURM_PROCID", std::to_string(r)},
                    {"SLURM_LOCALID", std::to_string(r % 2)},
                    {"SLURM_NODEID", std::to_string(r / 2)},
                    {"SLURM_NTASKS", "4"},
                    {"SLURM_TASKS_PER_NODE", "2(x2)"},
                    {"SLURM_JOB_NODELIST", "localhost,otherhost"},
                    {"SLURM_JOB_ID", "77"},
                    {"HVD_STORE_PORT", port},
                    {"HVD_GLOO_HOSTNAME", "127.0.0.1"}});
  }
  ExpectRanks(RunRanks(envs), {{0, 2, 0, 2}, {1, 2, 0, 2}, {0, 2, 1, 2}, {1, 2, 1, 2}});
}

TEST(SchedulerLaunch, TorchrunVariables) {
  const int port = FreePort();
  std::vector<Env> envs;
  for (int r = 0; r < 3; ++r) {
    envs.push_back({{"RANK", std::to_string(r)},
                    {"WORLD_SIZE", "3"},
                    {"LOCAL_RANK", std::to_string(r)},
                    {"LOCAL_WORLD_SIZE", "3"},
                    {"GROUP_RANK", "0"},
                    {"GROUP_WORLD_SIZE", "1"},
                    {"MASTER_ADDR", "127.0.0.1"},
                    // torchrun's own store holds MASTER_PORT; ours is the port after it.
                    {"MASTER_PORT", std::to_string(port - 1)}});
  }
  ExpectRanks(RunRanks(envs), {{0, 3, 0, 1}, {1, 3, 0, 1}, {2, 3, 0, 1}});
}

TEST(SchedulerLaunch, WrongSecretIsRefused) {
  const std::string port = std::to_string(FreePort());
  std::vector<Env> envs = {OpenMpi(0, 2, 0, 2), OpenMpi(1, 2, 1, 2)};
  for (Env& e : envs) {
    e["HVD_STORE_PORT"] = port;
    e["HVD_TIMEOUT"] = "2";  // Rank 0 waits that long for rank 1, then gives up.
  }
  envs[0]["HVD_STORE_SECRET"] = "right";
  envs[1]["HVD_STORE_SECRET"] = "wrong";
  const std::vector<CommandResult> results = RunRanks(envs);
  EXPECT_EQ(results[1].exit_code, 2) << results[1].output;
  EXPECT_THAT(results[1].output, HasSubstr("wrong secret")) << results[1].output;
  EXPECT_NE(results[0].exit_code, 0) << results[0].output;
}

// A real mpirun, inside a network namespace that has only loopback when the machine
// allows it, so neither mpirun nor the ranks can reach any other address; otherwise
// with Open MPI's transports pinned to lo.
TEST(SchedulerLaunch, RealMpirun) {
  if (::access("/usr/bin/mpirun.openmpi", X_OK) != 0)
    GTEST_SKIP() << "Open MPI (mpirun.openmpi) is not installed";
  const std::string ns = "hvdt" + std::to_string(::getpid()) + "-mpi";
  const bool isolated =
      ::geteuid() == 0 &&
      RunCommand("ip netns add " + ns + " && ip -n " + ns + " link set lo up", seconds(10))
              .exit_code == 0;
  const std::string prefix = isolated ? "ip netns exec " + ns + " " : "";
  const CommandResult r =
      RunCommand(prefix +
                     "mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp "
                     "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -x HVD_STORE_PORT=" +
                     std::to_string(FreePort()) + " -x HVD_TIMEOUT=10 " + kTopologyJob + " 3",
                 seconds(60));
  if (isolated)
    RunCommand("ip netns pids " + ns + " | xargs -r kill -9; ip netns del " + ns, seconds(10));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(Topology(0, 2, 0, 2, 0, 1)));
  EXPECT_THAT(r.output, HasSubstr(Topology(1, 2, 1, 2, 0, 1)));
  int done = 0;
  for (size_t p = r.output.find("done\n"); p != std::string::npos;
       p = r.output.find("done\n", p + 1))
    ++done;
  EXPECT_EQ(done, 2) << r.output;
}

}  // namespace
}  // namespace testing
}  // namespace hvd
