// dprun -H across real hosts on one machine: three network namespaces joined by veth
// pairs to a bridge, an sshd with a key made for the test in two of them, and dprun
// itself run inside the third, so every packet stays inside the namespaces:
//
//   hvdt<pid>-a  eth0 (a bridge) 10.231.0.1   dprun, the store; no sshd
//   hvdt<pid>-b  eth0 (veth)     10.231.0.2   sshd
//   hvdt<pid>-c  eth0 (veth)     10.231.0.3   sshd
//
// 10.231.0.9 is assigned nowhere: the unreachable host.
//
// The cluster is built once for the suite and torn down in TearDownTestSuite, which
// kills every process in the namespaces (sshd, sessions, ranks), deletes them and
// removes the keys. The sshds die with the test process (PR_SET_PDEATHSIG); the
// namespaces and the key directory of a killed run (named after a pid that no longer
// exists) are removed at the next setup. The suite skips itself, saying why,
// without root, ip netns, sshd or ssh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "tests/job_runner.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kTopologyJob = std::string(HVD_BUILD_DIR) + "/tests/programs/topology_job";
constexpr char kNetPrefix[] = "hvdt";
const std::string kAddrA = "10.231.0.1", kAddrB = "10.231.0.2", kAddrC = "10.231.0.3";
const std::string kNowhere = "10.231.0.9";

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Runs a setup command; on failure records why in *error.
bool Sh(const std::string& command, std::string* error, seconds timeout = seconds(20)) {
  const CommandResult r = RunCommand(command, timeout);
  if (r.exit_code == 0 && !r.timed_out) return true;
  if (error != nullptr)
    *error = "'" + command + "' " + (r.timed_out ? "timed out" : "failed") + ": " + Trim(r.output);
  return false;
}

bool IsExecutable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

// The namespaces, the keys and the sshds.
class Cluster {
 public:
  // Builds everything; returns false with the reason (then Teardown cleans up).
  bool Setup(std::string* why) {
    if (::geteuid() != 0) return Fail(why, "needs root (ip netns, sshd)");
    for (const char* tool : {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"})
      if (!IsExecutable(tool)) return Fail(why, std::string(tool) + " is not installed");
    if (!Sh("ip netns list", why)) return false;
    RemoveStaleNamespaces();
    const std::string tag = kNetPrefix + std::to_string(::getpid());
    ns_a_ = tag + "-a";
    ns_b_ = tag + "-b";
    ns_c_ = tag + "-c";
    std::string dir = "/tmp/" + tag + "-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) return Fail(why, "mkdtemp failed");
    dir_ = dir;
    for (const std::string& ns : {ns_a_, ns_b_, ns_c_}) {
      if (!Sh("ip netns add " + ns, why)) {
        *why = "cannot create network namespaces here: " + *why;
        return false;
      }
      created_.push_back(ns);
      if (!Sh("ip -n " + ns + " link set lo up", why)) return false;
    }
    // A's eth0 is a bridge that B's and C's veth pairs plug into.
    if (!Sh("ip -n " + ns_a_ + " link add eth0 type bridge && ip -n " + ns_a_ + " addr add " +
                kAddrA + "/24 dev eth0 && ip -n " + ns_a_ + " link set eth0 up",
            why))
      return false;
    const std::vector<std::tuple<std::string, std::string, std::string>> hosts = {
        {ns_b_, kAddrB, "vb"}, {ns_c_, kAddrC, "vc"}};
    for (const auto& [ns, addr, peer] : hosts) {
      if (!Sh("ip link add " + peer + " netns " + ns_a_ + " type veth peer name eth0 netns " + ns +
                  " && ip -n " + ns_a_ + " link set " + peer + " master eth0 up && ip -n " + ns +
                  " addr add " + addr + "/24 dev eth0 && ip -n " + ns + " link set eth0 up",
              why))
        return false;
    }
    if (!Sh("ssh-keygen -q -t ed25519 -N '' -f " + dir_ +
                "/host_key && ssh-keygen -q -t ed25519 "
                "-N '' -f " +
                dir_ + "/client_key",
            why))
      return false;
    // sshd refuses to start without its privilege separation directory. It is left in
    // place: it is the directory Debian's own sshd uses, and a concurrent run may need it.
    struct stat st;
    if (::stat("/run/sshd", &st) != 0 && ::mkdir("/run/sshd", 0755) != 0 && errno != EEXIST)
      return Fail(why, "cannot create /run/sshd");
    for (const auto& [ns, addr, peer] : hosts) {
      const std::string conf = dir_ + "/sshd_" + ns + ".conf";
      std::ofstream(conf) << "ListenAddress " << addr << "\n"
                          << "HostKey " << dir_ << "/host_key\n"
                          << "AuthorizedKeysFile " << dir_ << "/client_key.pub\n"
                          << "PermitRootLogin yes\nStrictModes no\nPasswordAuthentication no\n"
                          << "KbdInteractiveAuthentication no\nUsePAM no\nPidFile none\n"
                          << "PrintMotd no\nPrintLastLog no\nUseDNS no\nLogLevel ERROR\n";
      // Each host gets its own /dev/shm (ip netns exec gives it a private mount
      // namespace), as separate machines have: ranks then share memory only with
      // the ranks on their own host.
      // Its log goes to a file: nothing reads its output while the tests run. It dies
      // with the test (JobRunner's PR_SET_PDEATHSIG).
      sshds_.push_back(std::make_unique<JobRunner>(JobRunner::Shell(
          "exec ip netns exec " + ns + " sh -c 'mount -t tmpfs -o size=256m hvd-shm /dev/shm && " +
          "exec /usr/sbin/sshd -D -e -f " + conf + "' >" + dir_ + "/sshd_" + ns + ".log 2>&1")));
    }
    // Ready once each sshd listens (bounded: 100 polls of 50 ms); the tests' first
    // logins then show any key problem in ssh's own words.
    for (const auto& [ns, addr, peer] : hosts) {
      bool up = false;
      for (int i = 0; i < 100 && !up; ++i) {
        const CommandResult r =
            RunCommand("ip netns exec " + ns + " ss -Hltn 'sport = :22'", seconds(5));
        up = r.output.find(addr + ":22") != std::string::npos;
        if (!up) std::this_thread::sleep_for(milliseconds(50));
      }
      if (!up) return Fail(why, "sshd on " + addr + " did not start; its log is in " + dir_);
    }
    return true;
  }

  void Teardown() {
    for (const std::string& ns : created_) {
      // Everything in it: sshd, its sessions, ranks. Bounded: 20 rounds of 50 ms.
      for (int round = 0; round < 20; ++round) {
        const CommandResult pids = RunCommand("ip netns pids " + ns, seconds(5));
        std::istringstream in(pids.output);
        bool any = false;
        for (pid_t pid; in >> pid;) {
          ::kill(pid, SIGKILL);
          any = true;
        }
        if (!any) break;
        std::this_thread::sleep_for(milliseconds(50));
      }
      Sh("ip netns del " + ns, nullptr);
    }
    created_.clear();
    sshds_.clear();  // Kills and reaps what is left of them.
    if (!dir_.empty()) Sh("rm -rf " + dir_, nullptr);
    dir_.clear();
  }

  // `command` run inside namespace A.
  std::string InA(const std::string& command) const {
    return "exec ip netns exec " + ns_a_ + " " + command;
  }

  // dprun's flags for this cluster's ssh.
  std::string DprunSsh() const {
    return "--ssh-identity-file " + dir_ +
           "/client_key --ssh-option StrictHostKeyChecking=no "
           "--ssh-option UserKnownHostsFile=/dev/null --ssh-option LogLevel=ERROR";
  }

  // Processes in `ns` whose command line contains `text`.
  int CountProcesses(const std::string& ns, const std::string& text) const {
    const CommandResult pids = RunCommand("ip netns pids " + ns, seconds(5));
    std::istringstream in(pids.output);
    int n = 0;
    for (pid_t pid; in >> pid;) {
      std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
      std::string cmdline((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      for (char& ch : cmdline)
        if (ch == '\0') ch = ' ';
      if (cmdline.find(text) != std::string::npos) ++n;
    }
    return n;
  }

  const std::string& ns_b() const { return ns_b_; }
  const std::string& ns_c() const { return ns_c_; }
  const std::string& dir() const { return dir_; }

 private:
  static bool Fail(std::string* why, const std::string& reason) {
    *why = reason;
    return false;
  }

  // hvdt<pid>-x namespaces whose pid is gone: a crashed earlier run's.
  static void RemoveStaleNamespaces() {
    const CommandResult list = RunCommand("ip netns list", seconds(5));
    const std::regex name(std::string("^") + kNetPrefix + "([0-9]+)-[abc]");
    std::istringstream in(list.output);
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, name)) continue;
      const pid_t owner = std::stoi(m[1]);
      if (owner == ::getpid() || ::kill(owner, 0) == 0) continue;
      const std::string ns = line.substr(0, line.find(' '));
      Sh("ip netns pids " + ns + " | xargs -r kill -9; ip netns del " + ns + "; rm -rf /tmp/" +
             kNetPrefix + std::to_string(owner) + "-*",
         nullptr);
    }
  }

  std::string ns_a_, ns_b_, ns_c_, dir_;
  std::vector<std::string> created_;
  std::vector<std::unique_ptr<JobRunner>> sshds_;
};

class MultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    cluster_ = new Cluster;
    if (!cluster_->Setup(&skip_reason_)) {
      if (skip_reason_.empty()) skip_reason_ = "cluster setup failed";
      cluster_->Teardown();
    }
  }
  static void TearDownTestSuite() {
    cluster_->Teardown();
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (!skip_reason_.empty()) GTEST_SKIP() << "multi-host tests skipped: " << skip_reason_;
  }

  // dprun in namespace A with this cluster's ssh flags, to completion.
  CommandResult Dprun(const std::string& args, seconds timeout = seconds(40)) {
    return RunCommand(cluster_->InA(kDprun + " " + cluster_->DprunSsh() + " " + args), timeout);
  }

  static Cluster* cluster_;
  static std::string skip_reason_;
};

Cluster* MultiHost::cluster_ = nullptr;
std::string MultiHost::skip_reason_;

std::string HostsBC() { return "-H " + kAddrB + ":2," + kAddrC + ":2"; }

// topology_job at 4 ranks on B and C (HVD_TIMEOUT 8 s, grace period 2 s), once its
// rank 2 (on C) has done 10 steps. HVD_TIMEOUT also bounds the start-up rendezvous: 4 s
// was too short there when ctest ran this next to the ssh-heavy tests.
std::unique_ptr<JobRunner> StartLongJobOnBC(const Cluster& cluster) {
  JobRunner::Options merged;
  merged.merge_output = true;
  auto job = std::make_unique<JobRunner>(
      JobRunner::Shell(cluster.InA(kDprun + " " + cluster.DprunSsh() + " -np 4 " + HostsBC() +
                                   " -x HVD_TIMEOUT=8 --grace-period 2 " + kTopologyJob +
                                   " 100000 20")),
      merged);
  EXPECT_TRUE(job->WaitForOutput("[2]<stdout>:step 10 ok", milliseconds(30000))) << job->out();
  return job;
}

// "topology rank=R ..." as relayed by dprun for rank R.
std::string TopologyLine(int rank, int size, int local_rank, int local_size, int cross_rank,
                         int cross_size) {
  const std::string r = std::to_string(rank);
  return "[" + r + "]<stdout>:topology rank=" + r + " size=" + std::to_string(size) +
         " local_rank=" + std::to_string(local_rank) + " local_size=" + std::to_string(local_size) +
         " cross_rank=" + std::to_string(cross_rank) + " cross_size=" + std::to_string(cross_size) +
         "\n";
}

TEST_F(MultiHost, AllreduceAcrossTwoHostsWithLocalAndCrossRanks) {
  const CommandResult r = Dprun("-np 4 " + HostsBC() + " " + kTopologyJob + " 5");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.output, HasSubstr(TopologyLine(rank, 4, rank % 2, 2, rank / 2, 2)));
    EXPECT_THAT(r.output, HasSubstr("[" + std::to_string(rank) + "]<stdout>:step 4 ok\n"));
    EXPECT_THAT(r.output, HasSubstr("[" + std::to_string(rank) + "]<stdout>:done\n"));
  }
  // The start marker is dprun's business, never the job's output.
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("dprun-remote-started"))) << r.output;
}

TEST_F(MultiHost, RanksRunOnTheirHostsWithThePlacementsEnvironment) {
  const CommandResult r = Dprun(
      "-np 3 -H " + kAddrB + ":2," + kAddrC +
      ":1 -x FOO=bar --start-timeout 0 sh -c '"
      "echo r=$HVD_RANK on=$(ip -4 -o addr show dev eth0 | sed \"s/.*inet \\([0-9.]*\\).*/\\1/\") "
      "g=$HVD_GLOO_HOSTNAME s=$HVD_STORE_ADDR foo=$FOO pwd=$(pwd); echo err$HVD_RANK >&2'");
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  const std::regex line(
      R"(\[(\d)\]<stdout>:r=(\d) on=([0-9.]+) g=([0-9.]+) s=([0-9.]+):(\d+) foo=(\w+) pwd=(\S+))");
  std::set<int> seen;
  std::set<std::string> stores;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it) {
    const std::smatch& m = *it;
    const int rank = std::stoi(m[1]);
    seen.insert(rank);
    const std::string host = rank < 2 ? kAddrB : kAddrC;
    EXPECT_EQ(m[2], std::to_string(rank));
    EXPECT_EQ(m[3], host) << "rank " << rank << " ran on the wrong host";
    EXPECT_EQ(m[4], host) << "HVD_GLOO_HOSTNAME";
    EXPECT_EQ(m[5], kAddrA) << "the store listens on A's address toward B";
    EXPECT_EQ(m[7], "bar") << "-x FOO=bar";
    EXPECT_EQ(m[8], cwd) << "remote ranks start in dprun's directory";
    stores.insert(m[6]);
    EXPECT_THAT(r.output, HasSubstr("[" + std::to_string(rank) + "]<stderr>:err" +
                                    std::to_string(rank) + "\n"));
  }
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2})) << r.output;
  EXPECT_EQ(stores.size(), 1u);
}

// As horovodrun: remote ranks get dprun's environment (a virtualenv's PATH, a
// PYTHONPATH, the job's own settings) but not what belongs to this login or machine.
TEST_F(MultiHost, RemoteRanksGetDprunsEnvironmentButTheLogins) {
  const CommandResult r = RunCommand(
      cluster_->InA("env JOB_SETTING=42 HOSTNAME=dprun-side CUDA_VISIBLE_DEVICES=7 " + kDprun +
                    " " + cluster_->DprunSsh() + " -np 2 -H " + kAddrB + ":1," + kAddrC +
                    ":1 --start-timeout 0 sh -c 'echo setting=${JOB_SETTING:-unset} "
                    "host=${HOSTNAME:-unset} gpus=${CUDA_VISIBLE_DEVICES:-unset}'"),
      seconds(40));
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* rank : {"[0]", "[1]"})
    EXPECT_THAT(r.output, HasSubstr(std::string(rank) +
                                    "<stdout>:setting=42 host=unset gpus=unset"));
}

// An environment too large for one ssh command line (130 kB here: ssh could not even
// be started): its largest variables stay behind, named, and the job runs.
TEST_F(MultiHost, AnEnvironmentTooLargeForSshLeavesItsLargestVariablesBehind) {
  const CommandResult r = RunCommand(
      cluster_->InA("env BIG1=$(head -c 100000 /dev/zero | tr '\\0' x) BIG2=$(head -c 30000 "
                    "/dev/zero | tr '\\0' y) " + kDprun + " " + cluster_->DprunSsh() +
                    " -np 2 -H " + kAddrB + ":1," + kAddrC +
                    ":1 --start-timeout 0 sh -c 'echo sizes=${#BIG1},${#BIG2}'"),
      seconds(40));
  ASSERT_FALSE(r.timed_out) << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dprun: not passing BIG1 to the remote ranks: dprun's "
                                  "environment is over the 64 KiB"));
  for (const char* rank : {"[0]", "[1]"})
    EXPECT_THAT(r.output, HasSubstr(std::string(rank) + "<stdout>:sizes=0,30000"));
}

TEST_F(MultiHost, NetworkInterfaceSelectsGlooNcclAndTheStoreAddress) {
  const CommandResult r =
      Dprun("-np 2 -H " + kAddrB + "," + kAddrC + " --network-interface eth0 --verbose " +
            "sh -c 'echo iface=$HVD_GLOO_IFACE nccl=$NCCL_SOCKET_IFNAME; "
            "exec " +
            kTopologyJob + " 2'");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dprun: store listening on " + kAddrA + ":"));
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(r.output,
                HasSubstr("[" + std::to_string(rank) + "]<stdout>:iface=eth0 nccl=eth0\n"));
    EXPECT_THAT(r.output, HasSubstr(TopologyLine(rank, 2, 0, 1, rank, 2)));
  }
}

TEST_F(MultiHost, LocalAndRemoteRanksInOneJob) {
  // A is dprun's own host: its rank starts without ssh.
  const CommandResult r =
      Dprun("-np 3 -H " + kAddrA + ":1," + kAddrB + ":2 --verbose " + kTopologyJob + " 3");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(TopologyLine(0, 3, 0, 1, 0, 2)));
  EXPECT_THAT(r.output, HasSubstr(TopologyLine(1, 3, 0, 2, 1, 2)));
  EXPECT_THAT(r.output, HasSubstr(TopologyLine(2, 3, 1, 2, 0, 1)));
  EXPECT_THAT(r.output, HasSubstr("dprun: rank 0 (pid "));
  EXPECT_THAT(r.output, HasSubstr(" on " + kAddrA + ") launched\n"));
  EXPECT_THAT(r.output, HasSubstr("dprun: rank 1 (on " + kAddrB + ") launched over ssh"));
}

TEST_F(MultiHost, ManyRanksOnOneHostStayWithinSshdsStartupLimit) {
  // More ranks than sshd accepts unauthenticated connections at once (MaxStartups 10).
  const CommandResult r =
      Dprun("-np 14 -H " + kAddrB + ":14 --start-timeout 0 sh -c 'echo r=$HVD_RANK'");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 14; ++rank)
    EXPECT_THAT(r.output, HasSubstr("[" + std::to_string(rank) +
                                    "]<stdout>:r=" + std::to_string(rank) + "\n"));
}

TEST_F(MultiHost, UnreachableHostFailsTheJobFastNamingIt) {
  const CommandResult r = Dprun("-np 3 -H " + kAddrB + ":2," + kNowhere +
                                ":1 --ssh-connect-timeout 2 --start-timeout 0 sh -c "
                                "'echo started; exec sleep 30'");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_LT(r.seconds, 10.0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dprun: cannot reach host " + kNowhere +
                                  " for rank 2: ssh exited with code 255"));
  // The ranks that did start on B are gone too. Their teardown goes through ssh
  // and sshd (dprun closes ssh's stdin; the remote watcher kills the rank), which
  // took up to ~4 s on a loaded 2-core machine: allow 15.
  int left = -1;
  for (int i = 0; i < 150 && left != 0; ++i) {
    left = cluster_->CountProcesses(cluster_->ns_b(), "sleep 30");
    if (left != 0) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(left, 0) << "ranks left behind on B";
}

TEST_F(MultiHost, FailingRemoteRankTearsDownTheOthers) {
  const CommandResult r = Dprun("-np 4 " + HostsBC() + " --start-timeout 0 --grace-period 1 " +
                                "sh -c 'if [ $HVD_RANK = 3 ]; then sleep 0.5; echo bye >&2; "
                                "exit 5; fi; exec sleep 30'");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 5) << r.output;
  EXPECT_LT(r.seconds, 15.0);
  EXPECT_THAT(r.output, HasSubstr("[3]<stderr>:bye\n"));
  EXPECT_THAT(r.output, HasSubstr("on " + kAddrC + ") exited with code 5\n"));
  EXPECT_THAT(r.output, HasSubstr("terminated by dprun"));
  int left = -1;
  for (int i = 0; i < 150 && left != 0; ++i) {  // up to 15 s, as above
    left = cluster_->CountProcesses(cluster_->ns_b(), "sleep 30") +
           cluster_->CountProcesses(cluster_->ns_c(), "sleep 30");
    if (left != 0) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(left, 0) << "ranks left behind";
}

// Last in the file: it cuts C's link (and restores it).
TEST_F(MultiHost, CuttingAHostsLinkMidRunFailsClearlyWithoutHanging) {
  std::unique_ptr<JobRunner> started = StartLongJobOnBC(*cluster_);
  JobRunner& job = *started;
  const auto cut = Clock::now();
  std::string error;
  ASSERT_TRUE(Sh("ip -n " + cluster_->ns_c() + " link set eth0 down", &error)) << error;
  const int code = job.Wait(milliseconds(40000)) ? job.exit_code() : -1;
  const double after_cut = std::chrono::duration<double>(Clock::now() - cut).count();
  Sh("ip -n " + cluster_->ns_c() + " link set eth0 up", nullptr);
  const std::string out = job.out();
  ASSERT_NE(code, -1) << "dprun hung after the link was cut\n" << out;
  EXPECT_NE(code, 0) << out;
  // HVD_TIMEOUT (8 s) for the ranks on B to give up on C, the 2 s grace period, then
  // the kill of the ssh sessions to C (15.6 s in all on an idle machine).
  EXPECT_LT(after_cut, 30.0) << out;
  // The ranks on B report the failure (a timeout naming the lost ranks); dprun reports
  // which rank failed first, and on which host.
  EXPECT_THAT(out, HasSubstr("HVD_TIMEOUT")) << out;
  EXPECT_TRUE(
      std::regex_search(out, std::regex(R"(dprun: rank \d \(pid \d+ on 10\.231\.0\.[23]\) )")))
      << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("step 99999 ok")));
  // The lost host is named as such, not as a rank that "exited with code 255" (ssh's
  // code when its connection dies).
  EXPECT_THAT(out, HasSubstr("lost contact with host 10.231.0.3")) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex(R"(on 10\.231\.0\.3\) exited with code 255)")))
      << out;
}

TEST_F(MultiHost, AnSshSessionThatDiesIsReportedAsTheHostLost) {
  std::unique_ptr<JobRunner> started = StartLongJobOnBC(*cluster_);
  JobRunner& job = *started;
  // The sessions' sshd processes on C (not the listener, "sshd -D"): their clients on A
  // see the connection end and exit with 255.
  std::string error;
  ASSERT_TRUE(Sh("for p in $(ip netns pids " + cluster_->ns_c() +
                     "); do case \"$(tr '\\0' ' ' < /proc/$p/cmdline)\" in 'sshd: '*) kill -9 $p;; "
                     "esac; done",
                 &error))
      << error;
  ASSERT_TRUE(job.Wait(milliseconds(40000))) << "dprun hung\n" << job.out();
  EXPECT_NE(job.exit_code(), 0) << job.out();
  EXPECT_TRUE(std::regex_search(
      job.out(), std::regex(R"(dprun: lost contact with host 10\.231\.0\.3 \(rank [23] \(pid \d+ on 10\.231\.0\.3\)\): its ssh connection ended \(exit code 255)")))
      << job.out();
  EXPECT_FALSE(std::regex_search(job.out(), std::regex(R"(on 10\.231\.0\.3\) exited with code 255)")))
      << job.out();
}

// hvd.run (horovod.run) across hosts: the function reaches the ranks on B and C in a
// variable, their return values come back through their output (no shared files),
// and PYTHONPATH goes along so that they import hvd.
TEST_F(MultiHost, HvdRunReturnsTheValuesOfRanksOnOtherHosts) {
  const std::string script =
      "import os, shlex, hvd\n"
      "def f(x):\n"
      "    hvd.init()\n"
      "    return hvd.rank(), hvd.size(), os.environ['HVD_GLOO_HOSTNAME'], 2 * x\n"
      "print('results', hvd.run(f, args=(21,), num_proc=3, hosts='" + kAddrB + ":2," + kAddrC +
      ":1', dprun_args=shlex.split(os.environ['SSH_FLAGS'])))\n";
  const std::string path = cluster_->dir() + "/hvd_run.py";
  std::ofstream(path) << script;
  const CommandResult r = RunCommand(
      cluster_->InA("env SSH_FLAGS='" + cluster_->DprunSsh() + "' PYTHONPATH=" +
                    std::string(HVD_SOURCE_DIR) + "/bindings/python HVD_LIBRARY=" +
                    std::string(HVD_BUILD_DIR) + "/libhvd.so /usr/bin/python3 " + path),
      seconds(60));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("results [(0, 3, '" + kAddrB + "', 42), (1, 3, '" + kAddrB +
                                  "', 42), (2, 3, '" + kAddrC + "', 42)]"));
}

// An elastic job as an MPI Operator's elastic MPIJob starts it: dprun in A (the
// launcher pod, which runs no rank), no -H, and a discover_hosts.sh listing the
// workers. The first rank starts over ssh on the host listed (B; -np 2 but 1 slot); a
// host that appears (C) gets a rank in a new generation; one that vanishes has its rank
// stopped (its ssh's stdin closed) and the job trains on.
TEST_F(MultiHost, AnElasticJobStartsGrowsAndShrinksOnDiscoveredHosts) {
  const std::string dir = cluster_->dir() + "/elastic";
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  const std::string script = dir + "/discover_hosts.sh";
  std::ofstream(script) << "#!/bin/sh\necho " << kAddrB << ":1\n[ -e " << dir << "/c ] && echo "
                        << kAddrC << ":1\nexit 0\n";
  ASSERT_EQ(::chmod(script.c_str(), 0755), 0);
  JobRunner::Options merged;
  merged.merge_output = true;
  JobRunner job(
      JobRunner::Shell(cluster_->InA(
          "env ELASTIC_LOG=" + dir + " ELASTIC_EPOCHS=5 ELASTIC_STEP_SLEEP=0.05 HVD_TIMEOUT=20 "
          "OMP_NUM_THREADS=1 PYTHONPATH=" + std::string(HVD_SOURCE_DIR) +
          "/bindings/python HVD_LIBRARY=" + std::string(HVD_BUILD_DIR) + "/libhvd.so " + kDprun +
          " " + cluster_->DprunSsh() + " -np 2 --min-np 1 --max-np 2 --host-discovery-script " +
          script + " /usr/bin/python3 " + std::string(HVD_SOURCE_DIR) +
          "/examples/elastic/train_elastic.py")),
      merged);
  ASSERT_TRUE(job.WaitForOutput("on 1 rank(s)", milliseconds(120000))) << job.out();
  std::ofstream(dir + "/c") << "1";
  ASSERT_TRUE(job.WaitForOutput("on 2 rank(s)", milliseconds(120000))) << job.out();
  EXPECT_GE(cluster_->CountProcesses(cluster_->ns_c(), "train_elastic"), 1);  // runs on C
  ASSERT_EQ(::unlink((dir + "/c").c_str()), 0);
  ASSERT_TRUE(job.Wait(milliseconds(240000))) << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: generation 1: 2 rank(s)"));
  EXPECT_THAT(job.out(), HasSubstr("dprun: host " + kAddrC + " is gone: stopping rank 1"));
  // Each worker ran on its host, and w0 ended alone.
  std::ifstream w0(dir + "/w0.log"), w1(dir + "/w1.log");
  const std::string log0((std::istreambuf_iterator<char>(w0)), std::istreambuf_iterator<char>());
  const std::string log1((std::istreambuf_iterator<char>(w1)), std::istreambuf_iterator<char>());
  EXPECT_THAT(log0, HasSubstr("host " + kAddrB + "\n")) << log0;
  EXPECT_THAT(log1, HasSubstr("host " + kAddrC + "\n")) << log1;
  EXPECT_THAT(log0, ::testing::ContainsRegex("final [^\n]* size 1\n")) << log0;
  EXPECT_THAT(log1, ::testing::Not(HasSubstr("final"))) << log1;
  EXPECT_EQ(cluster_->CountProcesses(cluster_->ns_c(), "train_elastic"), 0);
}

}  // namespace
}  // namespace testing
}  // namespace hvd
