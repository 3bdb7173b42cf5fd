// DetectLaunchEnv over injected environments: Open MPI, MPICH/Intel MPI (PMI), Slurm,
// torchrun and Kubeflow PyTorchJob variable sets, the store rule, and the errors that name the
// variable.
#include "controller/loop/launch_env.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <thread>

#include "controller/loop/bootstrap.h"
#include "runtime/store/net_address.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

RuntimeOptions::GetEnv From(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// Detects, then runs FromEnv over the overlay, as hvd_init does.
RuntimeOptions Resolve(const Env& env, LaunchEnv* launch) {
  Status s = DetectLaunchEnv(From(env), launch);
  EXPECT_TRUE(s.ok()) << s.ToString();
  RuntimeOptions o;
  s = RuntimeOptions::FromEnv(&o, launch->Overlay(From(env)));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return o;
}

Status DetectError(const Env& env) {
  LaunchEnv launch;
  return DetectLaunchEnv(From(env), &launch);
}

TEST(LaunchEnv, NothingToDetect) {
  LaunchEnv launch;
  ASSERT_TRUE(DetectLaunchEnv(From({}), &launch).ok());
  EXPECT_EQ(launch.launcher, "");
  EXPECT_TRUE(launch.vars.empty());
  EXPECT_FALSE(launch.serve_store);
}

TEST(LaunchEnv, DprunsVariablesWin) {
  LaunchEnv launch;
  ASSERT_TRUE(DetectLaunchEnv(From({{"HVD_RANK", "1"},
                                    {"OMPI_COMM_WORLD_RANK", "0"},
                                    {"RANK", "3"},
                                    {"WORLD_SIZE", "4"},
                                    {"LOCAL_RANK", "0"}}),
                              &launch)
                  .ok());
  EXPECT_EQ(launch.launcher, "");
  EXPECT_TRUE(launch.vars.empty());
}

TEST(LaunchEnv, OpenMpiSingleNode) {
  const Env env = {{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "2"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"HVD_STORE_PORT", "29600"},         {"HVD_STORE_SECRET", "s"}};
  LaunchEnv launch;
  const RuntimeOptions o = Resolve(env, &launch);
  EXPECT_EQ(launch.launcher, "Open MPI");
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.size, 2);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 2);
  EXPECT_EQ(o.store_addr, "127.0.0.1:29600");
  EXPECT_EQ(o.store_secret, "s");
  EXPECT_FALSE(launch.serve_store);  // Only rank 0 serves.
  EXPECT_TRUE(launch.exchange_cross_ranks);
  EXPECT_FALSE(launch.needs_gloo_address);  // One node: loopback is right.
  EXPECT_EQ(o.gloo_hostname, "127.0.0.1");
}

TEST(LaunchEnv, OpenMpiRankZeroServesAcrossNodes) {
  const Env env = {{"OMPI_COMM_WORLD_RANK", "0"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"HVD_STORE_ADDR", "10.1.2.3:29600"}};
  LaunchEnv launch;
  const RuntimeOptions o = Resolve(env, &launch);
  EXPECT_TRUE(launch.serve_store);
  EXPECT_EQ(launch.listen_host, "10.1.2.3");
  EXPECT_EQ(launch.listen_port, 29600);
  EXPECT_EQ(o.store_addr, "10.1.2.3:29600");
  EXPECT_EQ(o.store_secret, "");  // Allowed without dprun.
  EXPECT_TRUE(launch.needs_gloo_address);
  EXPECT_EQ(launch.store_host, "10.1.2.3");
}

TEST(LaunchEnv, OpenMpiAcrossNodesNeedsTheStoreAddress) {
  const Status s = DetectError({{"OMPI_COMM_WORLD_RANK", "0"},
                                {"OMPI_COMM_WORLD_SIZE", "4"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("Open MPI launch across nodes: set MASTER_ADDR to rank 0's "
                        "node (and MASTER_PORT, or HVD_STORE_PORT), or HVD_STORE_ADDR"));
  const Status p = DetectError({{"OMPI_COMM_WORLD_RANK", "0"},
                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_THAT(p.message(), HasSubstr("set HVD_STORE_PORT (or HVD_STORE_ADDR)"));
}

// `mpirun -np N prog` on one host needs no variable of ours: the port comes from the
// job id mpirun gives every rank of the job (a numeric OMPI_MCA_ess_base_jobid, or
// PMIX_NAMESPACE's text), the same on every rank and different for the next job.
TEST(LaunchEnv, OpenMpiDerivesTheStorePortFromItsJobId) {
  const Env base = {{"OMPI_COMM_WORLD_RANK", "1"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  Env env = base;
  env["OMPI_MCA_ess_base_jobid"] = "692649985";
  LaunchEnv launch;
  RuntimeOptions o = Resolve(env, &launch);
  EXPECT_EQ(o.store_addr, "127.0.0.1:" + std::to_string(20000 + 692649985 % 10000));
  env["OMPI_MCA_ess_base_jobid"] = "692649986";
  EXPECT_EQ(Resolve(env, &launch).store_addr,
            "127.0.0.1:" + std::to_string(20000 + 692649986 % 10000));
  Env pmix = base;
  pmix["PMIX_NAMESPACE"] = "prterun-node1-4242@1";
  const std::string a = Resolve(pmix, &launch).store_addr;
  EXPECT_EQ(Resolve(pmix, &launch).store_addr, a) << "the same id, the same port";
  pmix["PMIX_NAMESPACE"] = "prterun-node1-4243@1";
  EXPECT_NE(Resolve(pmix, &launch).store_addr, a);
  int port = 0;
  std::string host;
  ASSERT_TRUE(ParseHostPort(a, &host, &port).ok());
  EXPECT_GE(port, 20000);
  EXPECT_LT(port, 30000);
  env["HVD_STORE_PORT"] = "29600";  // an explicit port wins
  EXPECT_EQ(Resolve(env, &launch).store_addr, "127.0.0.1:29600");
}

TEST(LaunchEnv, MalformedAndMissingVariablesAreNamed) {
  const Env base = {{"OMPI_COMM_WORLD_RANK", "0"},
                    {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                    {"HVD_STORE_PORT", "1"}};
  Env e = base;
  e["OMPI_COMM_WORLD_SIZE"] = "two";
  EXPECT_THAT(DetectError(e).message(),
              HasSubstr("OMPI_COMM_WORLD_SIZE='two' is not a non-negative integer"));
  e = base;
  e.erase("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_THAT(DetectError(e).message(),
              HasSubstr("Open MPI launch detected but OMPI_COMM_WORLD_LOCAL_SIZE is not set"));
  e = base;
  e["OMPI_COMM_WORLD_RANK"] = "2";
  EXPECT_THAT(DetectError(e).message(), HasSubstr("rank 2 is not below size 2"));
  e = base;
  e["HVD_STORE_PORT"] = "70000";
  EXPECT_THAT(DetectError(e).message(), HasSubstr("HVD_STORE_PORT='70000'"));
  e = base;
  e["HVD_STORE_ADDR"] = "nope";
  EXPECT_THAT(DetectError(e).message(), HasSubstr("HVD_STORE_ADDR: bad host:port 'nope'"));
}

Env SlurmEnv(int procid, int localid, int nodeid) {
  return {{"SLURM_PROCID", std::to_string(procid)},
          {"SLURM_LOCALID", std::to_string(localid)},
          {"SLURM_NODEID", std::to_string(nodeid)},
          {"SLURM_NTASKS", "99"},  // The allocation's; the step's count wins.
          {"SLURM_STEP_NUM_TASKS", "5"},
          {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"},
          {"SLURM_STEP_NODELIST", "gpu[07-09]"},
          {"SLURM_JOB_ID", "4242"},
          {"SLURM_STEP_ID", "3"}};
}

TEST(LaunchEnv, SlurmLayoutFromTasksPerNode) {
  // Ranks 0,1 on node 0; 2,3 on node 1; 4 on node 2.
  const std::vector<std::vector<int>> cases = {
      // procid, localid, nodeid, local_size, cross_rank, cross_size
      {0, 0, 0, 2, 0, 3},
      {1, 1, 0, 2, 0, 2},
      {3, 1, 1, 2, 1, 2},
      {4, 0, 2, 1, 2, 3}};
  for (const auto& c : cases) {
    LaunchEnv launch;
    const RuntimeOptions o = Resolve(SlurmEnv(c[0], c[1], c[2]), &launch);
    EXPECT_EQ(launch.launcher, "Slurm");
    EXPECT_EQ(o.rank, c[0]);
    EXPECT_EQ(o.size, 5);
    EXPECT_EQ(o.local_rank, c[1]);
    EXPECT_EQ(o.local_size, c[3]) << "rank " << c[0];
    EXPECT_EQ(o.cross_rank, c[4]) << "rank " << c[0];
    EXPECT_EQ(o.cross_size, c[5]) << "rank " << c[0];
    EXPECT_FALSE(launch.exchange_cross_ranks);
    // The store: the step's first node, port 20000 + (4242 * 10 + 3) % 10000.
    EXPECT_EQ(o.store_addr, "gpu07:22423");
    EXPECT_EQ(launch.listen_host, "0.0.0.0");  // A name: every interface.
    EXPECT_EQ(launch.serve_store, c[0] == 0);
  }
}

TEST(LaunchEnv, SlurmInconsistencies) {
  Env e = SlurmEnv(0, 0, 0);
  e["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  EXPECT_THAT(DetectError(e).message(),
              HasSubstr("SLURM_STEP_TASKS_PER_NODE='2(x2)' adds up to 4 tasks but "
                        "SLURM_STEP_NUM_TASKS is 5"));
  e = SlurmEnv(0, 0, 3);
  EXPECT_THAT(DetectError(e).message(), HasSubstr("SLURM_NODEID=3 but"));
  e = SlurmEnv(4, 1, 2);
  EXPECT_THAT(DetectError(e).message(), HasSubstr("SLURM_LOCALID=1 is not below"));
  e = SlurmEnv(0, 0, 0);
  e.erase("SLURM_STEP_TASKS_PER_NODE");
  EXPECT_THAT(DetectError(e).message(), HasSubstr("SLURM_TASKS_PER_NODE is not set"));
  e = SlurmEnv(0, 0, 0);
  e["HVD_STORE_PORT"] = "31000";
  LaunchEnv launch;
  EXPECT_EQ(Resolve(e, &launch).store_addr, "gpu07:31000");
  // A step on one node uses loopback, not the node's name (which need not resolve).
  e = {{"SLURM_PROCID", "1"},
       {"SLURM_LOCALID", "1"},
       {"SLURM_NODEID", "0"},
       {"SLURM_STEP_NUM_TASKS", "2"},
       {"SLURM_STEP_TASKS_PER_NODE", "2"},
       {"SLURM_STEP_NODELIST", "hvdnode"},
       {"SLURM_JOB_ID", "7"},
       {"SLURM_STEP_ID", "0"}};
  EXPECT_EQ(Resolve(e, &launch).store_addr, "127.0.0.1:20070");
}

TEST(LaunchEnv, TorchrunUsesMasterPortPlusOne) {
  const Env env = {{"RANK", "3"},
                   {"WORLD_SIZE", "4"},
                   {"LOCAL_RANK", "1"},
                   {"LOCAL_WORLD_SIZE", "2"},
                   {"GROUP_RANK", "1"},
                   {"GROUP_WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "10.0.0.5"},
                   {"MASTER_PORT", "29500"}};
  LaunchEnv launch;
  const RuntimeOptions o = Resolve(env, &launch);
  EXPECT_EQ(launch.launcher, "torchrun");
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 2);
  EXPECT_EQ(o.cross_rank, 1);
  EXPECT_EQ(o.cross_size, 2);
  EXPECT_EQ(o.store_addr, "10.0.0.5:29501");
  EXPECT_FALSE(launch.exchange_cross_ranks);
  Env without_group = env;
  without_group.erase("GROUP_RANK");
  LaunchEnv l2;
  Resolve(without_group, &l2);
  EXPECT_TRUE(l2.exchange_cross_ranks);
  Env local = env;
  local["MASTER_ADDR"] = "localhost";
  local["RANK"] = "0";
  LaunchEnv l3;
  Resolve(local, &l3);
  EXPECT_EQ(l3.listen_host, "127.0.0.1");
  EXPECT_TRUE(l3.serve_store);
}

TEST(LaunchEnv, TorchrunBeatsTheSlurmItRunsUnder) {
  Env env = SlurmEnv(0, 0, 0);
  env.insert({{"RANK", "1"},
              {"WORLD_SIZE", "2"},
              {"LOCAL_RANK", "1"},
              {"LOCAL_WORLD_SIZE", "2"},
              {"MASTER_ADDR", "127.0.0.1"},
              {"MASTER_PORT", "29500"}});
  LaunchEnv launch;
  const RuntimeOptions o = Resolve(env, &launch);
  EXPECT_EQ(launch.launcher, "torchrun");
  EXPECT_EQ(o.rank, 1);
  const Status s = DetectError({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}});
  EXPECT_THAT(s.message(), HasSubstr("torchrun launch detected but LOCAL_WORLD_SIZE is not set"));
}

TEST(LaunchEnv, SingleProcessUnderALauncherNeedsNoStore) {
  LaunchEnv launch;
  const RuntimeOptions o = Resolve({{"OMPI_COMM_WORLD_RANK", "0"},
                                    {"OMPI_COMM_WORLD_SIZE", "1"},
                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}},
                                   &launch);
  EXPECT_EQ(o.size, 1);
  EXPECT_EQ(o.store_addr, "");
  EXPECT_FALSE(launch.serve_store);
  EXPECT_FALSE(launch.exchange_cross_ranks);
}

TEST(LaunchEnv, CrossRanksByLocalRank) {
  // Nodes of 3, 2 and 1 ranks, in rank order.
  const std::vector<int> local = {0, 1, 2, 0, 1, 0};
  const std::vector<std::pair<int, int>> want = {{0, 3}, {0, 2}, {0, 1}, {1, 3}, {1, 2}, {2, 3}};
  for (int r = 0; r < 6; ++r) {
    int cr = -1, cs = -1;
    CrossRanks(local, r, &cr, &cs);
    EXPECT_EQ(std::make_pair(cr, cs), want[r]) << "rank " << r;
  }
}

TEST(LaunchEnv, SlurmListsParse) {
  std::vector<int> c;
  ASSERT_TRUE(ParseSlurmTasksPerNode("2(x3),1", &c).ok());
  EXPECT_EQ(c, (std::vector<int>{2, 2, 2, 1}));
  ASSERT_TRUE(ParseSlurmTasksPerNode("4", &c).ok());
  EXPECT_EQ(c, (std::vector<int>{4}));
  for (const char* bad : {"", "x", "2(x)", "2(x3", "0", "2,,1"})
    EXPECT_FALSE(ParseSlurmTasksPerNode(bad, &c).ok()) << bad;
  EXPECT_EQ(FirstSlurmHost("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(FirstSlurmHost("a,b"), "a");
  EXPECT_EQ(FirstSlurmHost("n[3]"), "n3");
  EXPECT_EQ(FirstSlurmHost("rack[2-3]-n[010-011]"), "rack2-n010");
  EXPECT_EQ(FirstSlurmHost("single"), "single");
  EXPECT_EQ(FirstSlurmHost(""), "");
}

TEST(LaunchEnv, ExchangeCrossRanksThroughTheStore) {
  // Four ranks as threads over one store: local ranks 0,1 on one "node", 0,1 on another.
  std::shared_ptr<Store> store = NewInMemoryStore();
  std::vector<RuntimeOptions> out(4);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      LaunchEnv launch;
      launch.launcher = "Open MPI";
      launch.exchange_cross_ranks = true;
      RuntimeOptions o;
      o.rank = r;
      o.size = 4;
      o.local_rank = r % 2;
      o.local_size = 2;
      o.timeout = std::chrono::milliseconds(5000);
      const Status s = ExchangeCrossRanks(launch, *store, &o);
      EXPECT_TRUE(s.ok()) << s.ToString();
      out[r] = o;
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(out[r].cross_rank, r / 2) << "rank " << r;
    EXPECT_EQ(out[r].cross_size, 2) << "rank " << r;
  }
}

TEST(LaunchEnv, AddressHelpersOnLoopback) {
  std::string a;
  ASSERT_TRUE(InterfaceAddress("lo", &a).ok());
  EXPECT_EQ(a, "127.0.0.1");
  const Status missing = InterfaceAddress("no-such-if0", &a);
  EXPECT_THAT(missing.message(), HasSubstr("no interface named 'no-such-if0' (there are: lo"));
  ASSERT_TRUE(SourceAddressToward("127.0.0.1", &a).ok());
  EXPECT_EQ(a, "127.0.0.1");
  ASSERT_TRUE(ResolveAddress("10.9.8.7", &a).ok());
  EXPECT_EQ(a, "10.9.8.7");
  EXPECT_TRUE(IsLocalHost("localhost"));
  EXPECT_TRUE(IsLocalHost("127.0.0.1"));
  EXPECT_TRUE(IsLocalHost("127.1.2.3"));
  EXPECT_FALSE(IsLocalHost("192.0.2.1"));  // TEST-NET-1: never assigned here.
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_FALSE(IsLoopbackAddress("10.0.0.1"));
  EXPECT_EQ(JoinStoreAddress("fd00::1", 5), "[fd00::1]:5");
  EXPECT_EQ(JoinStoreAddress("h", 5), "h:5");
}

TEST(LaunchEnv, ChooseGlooAddressRejectsLoopbackAcrossNodes) {
  LaunchEnv launch;
  launch.needs_gloo_address = true;
  launch.store_host = "127.0.0.1";
  RuntimeOptions o;
  const Status s = ChooseGlooAddress(launch, &o);
  EXPECT_THAT(s.message(), HasSubstr("is over loopback (127.0.0.1)"));
  launch.needs_gloo_address = false;
  EXPECT_TRUE(ChooseGlooAddress(launch, &o).ok());
  EXPECT_EQ(o.gloo_hostname, "127.0.0.1");
}

// torch.distributed's MASTER_ADDR and MASTER_PORT place the store under any
// launcher, not only torchrun (MASTER_PORT + 1: the port itself is torch's).
TEST(LaunchEnv, MasterAddrAndPortWorkUnderEveryLauncher) {
  Env ompi = {{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
              {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
              {"MASTER_ADDR", "10.0.0.7"},         {"MASTER_PORT", "29500"},
              {"OMPI_MCA_ess_base_jobid", "77"}};
  LaunchEnv launch;
  EXPECT_EQ(Resolve(ompi, &launch).store_addr, "10.0.0.7:29501");
  EXPECT_EQ(launch.store_host, "10.0.0.7");
  Env slurm = SlurmEnv(0, 0, 0);
  slurm["MASTER_ADDR"] = "10.0.0.8";
  slurm["MASTER_PORT"] = "40000";
  EXPECT_EQ(Resolve(slurm, &launch).store_addr, "10.0.0.8:40001");
}

// ---- MPICH / Intel MPI (Hydra), srun --mpi=pmi2, Kubeflow's PyTorchJob, hostfiles.

LaunchProbes Probes(int proxy_pid, std::map<std::string, std::string> files = {}) {
  LaunchProbes p;
  p.ancestor_pid = [proxy_pid](const std::vector<std::string>& names) {
    EXPECT_NE(std::find(names.begin(), names.end(), "hydra_pmi_proxy"), names.end());
    return proxy_pid;
  };
  p.read_file = [files](const std::string& path, std::string* text) {
    auto it = files.find(path);
    if (it == files.end()) return false;
    *text = it->second;
    return true;
  };
  return p;
}

RuntimeOptions ResolveWith(const Env& env, const LaunchProbes& probes, LaunchEnv* launch) {
  Status s = DetectLaunchEnv(From(env), launch, probes);
  EXPECT_TRUE(s.ok()) << s.ToString();
  RuntimeOptions o;
  s = RuntimeOptions::FromEnv(&o, launch->Overlay(From(env)));
  EXPECT_TRUE(s.ok()) << s.ToString();
  return o;
}

// What `mpiexec.hydra -n 2` (MPICH 4) gives each rank, as seen here with `env`.
Env HydraEnv(int rank, int size, int local_rank, int local_size) {
  return {{"PMI_RANK", std::to_string(rank)},
          {"PMI_SIZE", std::to_string(size)},
          {"MPI_LOCALRANKID", std::to_string(local_rank)},
          {"MPI_LOCALNRANKS", std::to_string(local_size)},
          {"PMI_FD", "6"},
          {"HYDI_CONTROL_FD", "7"}};
}

TEST(LaunchEnv, HydraOneNodeDerivesThePortFromItsProxy) {
  for (int r = 0; r < 2; ++r) {
    LaunchEnv launch;
    const RuntimeOptions o = ResolveWith(HydraEnv(r, 2, r, 2), Probes(41234), &launch);
    EXPECT_EQ(launch.launcher, "PMI");
    EXPECT_EQ(o.rank, r);
    EXPECT_EQ(o.size, 2);
    EXPECT_EQ(o.local_rank, r);
    EXPECT_EQ(o.local_size, 2);
    EXPECT_EQ(o.store_addr, "127.0.0.1:21234");  // 20000 + 41234 % 10000
    EXPECT_EQ(launch.serve_store, r == 0);
    EXPECT_TRUE(launch.exchange_cross_ranks);
  }
  // No proxy among the ancestors (a rank started some other way): ask for the port.
  LaunchEnv launch;
  const Status s = DetectLaunchEnv(From(HydraEnv(0, 2, 0, 2)), &launch, Probes(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("PMI launch: set HVD_STORE_PORT"));
}

TEST(LaunchEnv, HydraAcrossNodes) {
  // Two nodes, two ranks each, without MASTER_ADDR: one line says what to set.
  Status s = DetectError(HydraEnv(2, 4, 0, 2));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("PMI launch across nodes: set MASTER_ADDR"));
  EXPECT_THAT(s.message(), HasSubstr("this is rank 2 of 4, 2 on this node"));
  // MASTER_ADDR and MASTER_PORT, passed with mpiexec -genv.
  Env env = HydraEnv(2, 4, 0, 2);
  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "29500";
  LaunchEnv launch;
  const RuntimeOptions o = ResolveWith(env, Probes(1), &launch);
  EXPECT_EQ(o.store_addr, "10.0.0.1:29501");
  EXPECT_TRUE(launch.needs_gloo_address);
  // HYDRA_HOST_FILE (mpiexec's hostfile in the environment) names rank 0's node.
  env = HydraEnv(3, 4, 1, 2);
  env["HYDRA_HOST_FILE"] = "/hosts";
  env["HVD_STORE_PORT"] = "29600";
  const RuntimeOptions h =
      ResolveWith(env, Probes(1, {{"/hosts", "# nodes\nnodeA:2\nnodeB:2\n"}}), &launch);
  EXPECT_EQ(h.store_addr, "nodeA:29600");
  // Missing local variables are named.
  env = HydraEnv(0, 2, 0, 2);
  env.erase("MPI_LOCALNRANKS");
  EXPECT_THAT(DetectError(env).message(), HasSubstr("MPI_LOCALNRANKS is not set"));
  env = HydraEnv(0, 2, 0, 2);
  env["PMI_SIZE"] = "two";
  EXPECT_THAT(DetectError(env).message(), HasSubstr("PMI_SIZE='two'"));
}

TEST(LaunchEnv, HydraInsideAnSbatchScriptIsNotSlurm) {
  // mpiexec in a batch script: every rank inherits the batch step's SLURM_PROCID=0.
  Env env = SlurmEnv(0, 0, 0);
  for (const auto& [k, v] : HydraEnv(3, 8, 1, 4)) env[k] = v;
  env["MASTER_ADDR"] = "10.0.0.1";
  env["MASTER_PORT"] = "29500";
  LaunchEnv launch;
  const RuntimeOptions o = ResolveWith(env, Probes(1), &launch);
  EXPECT_EQ(launch.launcher, "PMI");
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.size, 8);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.local_size, 4);
}

TEST(LaunchEnv, SrunPmi2IsSlurm) {
  // srun --mpi=pmi2 adds PMI_RANK, PMI_SIZE and PMI_FD to Slurm's own variables.
  Env env = SlurmEnv(3, 1, 1);
  env["PMI_RANK"] = "3";
  env["PMI_SIZE"] = env["SLURM_STEP_NUM_TASKS"];
  env["PMI_FD"] = "5";
  LaunchEnv launch;
  const RuntimeOptions o = ResolveWith(env, Probes(1), &launch);
  const RuntimeOptions plain = Resolve(SlurmEnv(3, 1, 1), &launch);
  EXPECT_EQ(launch.launcher, "Slurm");
  EXPECT_EQ(o.rank, plain.rank);
  EXPECT_EQ(o.size, plain.size);
  EXPECT_EQ(o.local_rank, plain.local_rank);
  EXPECT_EQ(o.local_size, plain.local_size);
  EXPECT_EQ(o.cross_rank, plain.cross_rank);
  EXPECT_EQ(o.store_addr, plain.store_addr);
  env["PMI_RANK"] = "0";
  EXPECT_THAT(DetectError(env).message(), HasSubstr("PMI_RANK=0 differs from SLURM_PROCID=3"));
}

TEST(LaunchEnv, KubeflowPyTorchJobIsOneProcessPerPod) {
  // What the training operator gives the pods of a PyTorchJob with 1 master, 3 workers.
  for (int r = 0; r < 4; ++r) {
    const Env env = {
        {"MASTER_ADDR", "mnist-master-0"}, {"MASTER_PORT", "23456"},  {"WORLD_SIZE", "4"},
        {"RANK", std::to_string(r)},       {"PYTHONUNBUFFERED", "1"}, {"HVD_STORE_SECRET", "k"}};
    LaunchEnv launch;
    const RuntimeOptions o = Resolve(env, &launch);
    EXPECT_EQ(launch.launcher, "PyTorchJob");
    EXPECT_EQ(o.rank, r);
    EXPECT_EQ(o.size, 4);
    EXPECT_EQ(o.local_rank, 0);
    EXPECT_EQ(o.local_size, 1);
    EXPECT_EQ(o.cross_rank, r);
    EXPECT_EQ(o.cross_size, 4);
    EXPECT_FALSE(launch.exchange_cross_ranks);
    EXPECT_EQ(o.store_addr, "mnist-master-0:23457");
    EXPECT_EQ(launch.serve_store, r == 0);
    EXPECT_EQ(launch.listen_host, "0.0.0.0");  // a name: every interface
    EXPECT_TRUE(launch.needs_gloo_address);
  }
  // Without MASTER_ADDR, a pod cannot find rank 0: one line says so.
  EXPECT_THAT(DetectError({{"RANK", "1"}, {"WORLD_SIZE", "2"}}).message(),
              HasSubstr("PyTorchJob launch across nodes: set MASTER_ADDR"));
  EXPECT_THAT(
      DetectError({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}, {"MASTER_PORT", "1"}})
          .message(),
      HasSubstr("rank 2 is not below size 2"));
}

TEST(LaunchEnv, MpiOperatorHostfileNamesRankZerosNode) {
  // An MPIJob's launcher runs mpirun with OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile,
  // which mpirun passes on to every rank; rank 0 runs on its first host.
  const std::string hostfile =
      "job-worker-0.job-worker.default.svc slots=2\n"
      "job-worker-1.job-worker.default.svc slots=2\n";
  Env env = {
      {"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
      {"OMPI_MCA_ess_base_jobid", "7"},    {"OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"}};
  LaunchEnv launch;
  const RuntimeOptions o = ResolveWith(env, Probes(1, {{"/etc/mpi/hostfile", hostfile}}), &launch);
  EXPECT_EQ(o.store_addr, "job-worker-0.job-worker.default.svc:20007");
  EXPECT_TRUE(launch.needs_gloo_address);
  // A node that cannot read it: the error names the variable.
  const Status s = DetectLaunchEnv(From(env), &launch, Probes(1));
  EXPECT_THAT(s.message(), HasSubstr("set MASTER_ADDR"));
  EXPECT_THAT(s.message(),
              HasSubstr("OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile is not readable here"));
  // MASTER_ADDR wins over the hostfile.
  env["MASTER_ADDR"] = "10.1.1.1";
  EXPECT_EQ(ResolveWith(env, Probes(1, {{"/etc/mpi/hostfile", hostfile}}), &launch).store_addr,
            "10.1.1.1:20007");
}

TEST(LaunchEnv, HostfilesParse) {
  EXPECT_EQ(FirstHostfileHost("# c\n\n  nodeA slots=4 max_slots=8\nnodeB\n"), "nodeA");
  EXPECT_EQ(FirstHostfileHost("nodeA:4\n"), "nodeA");
  EXPECT_EQ(FirstHostfileHost("[fd00::2]:4\n"), "fd00::2");
  EXPECT_EQ(FirstHostfileHost("# only a comment\n"), "");
}

}  // namespace
}  // namespace hvd
