// dprun end to end: the built launcher (HVD_DPRUN_PATH) runs small sh one-liners as
// ranks, and the tests check its output, environment, exit statuses and teardown.
// Every dprun run goes through JobRunner and is bounded: past its limit the test kills
// it and fails.
//
// DprunRank.DISABLED_* are not tests on their own: they are the rank program of the
// tests that need a rank to talk to the store (this binary, run by dprun with
// --gtest_also_run_disabled_tests).
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/common/cpu_binding.h"
#include "runtime/store/tcp_store.h"
#include "tests/job_runner.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

using testing::JobRunner;

// dprun's argv for `args`.
std::vector<std::string> Dprun(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {HVD_DPRUN_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// Runner options that add `env` ("NAME=value") to dprun's environment.
JobRunner::Options WithEnv(std::vector<std::string> env) {
  JobRunner::Options o;
  o.env = std::move(env);
  return o;
}

// Waits for dprun to exit and its pipes to close; returns its exit code, or -1 if a
// signal killed it. Past `timeout` the test fails and dprun's process group is killed.
int Finish(JobRunner& d, seconds timeout = seconds(30)) {
  if (!d.Wait(timeout)) {
    ADD_FAILURE() << "dprun ran past " << timeout.count() << " s; killing it\nstdout:\n"
                  << d.out() << "\nstderr:\n"
                  << d.err();
    d.Kill();
  }
  return d.term_signal() == 0 ? d.exit_code() : -1;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// One relayed line, "[<rank>]<<stream>>:<text>", split up. False if it is not one.
struct RelayedLine {
  int rank = -1;
  std::string stream, text;
};
bool ParseRelayedLine(const std::string& line, RelayedLine* out) {
  const size_t close = line.find(']');
  const size_t colon = line.find(">:");
  if (line.size() < 2 || line[0] != '[' || close == std::string::npos || close < 2 ||
      colon == std::string::npos || colon < close || line[close + 1] != '<')
    return false;
  const std::string rank = line.substr(1, close - 1);
  if (rank.find_first_not_of("0123456789") != std::string::npos) return false;
  out->rank = std::stoi(rank);
  out->stream = line.substr(close + 2, colon - close - 2);
  out->text = line.substr(colon + 2);
  return true;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Each relayed line of `out` as its rank and the words of its text; a line that is not
// a relayed one fails the test.
struct RankWords {
  int rank = -1;
  std::vector<std::string> words;
};
std::vector<RankWords> WordsByRank(const std::string& out) {
  std::vector<RankWords> lines;
  for (const std::string& line : Lines(out)) {
    RelayedLine l;
    EXPECT_TRUE(ParseRelayedLine(line, &l)) << line;
    lines.push_back({l.rank, Words(l.text)});
  }
  return lines;
}

bool IsHex(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Every "pid=N" that ranks printed to stdout, by rank; -1 where a rank printed none.
std::vector<pid_t> RankPids(const std::string& out, int ranks) {
  std::vector<pid_t> pids(ranks, -1);
  for (const std::string& line : Lines(out)) {
    RelayedLine l;
    if (ParseRelayedLine(line, &l) && l.stream == "stdout" && l.rank < ranks &&
        l.text.rfind("pid=", 0) == 0)
      pids[l.rank] = std::stoi(l.text.substr(4));
  }
  return pids;
}

// True once `pid` has exited (a zombie that init has yet to reap counts: under load
// that takes a while), waiting up to 2 s.
bool Gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (!hvd::testing::ProcessAlive(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) ++n;
  return n;
}

// Tests that do not test the start timeout pass this: sh ranks never set the key.
const std::vector<std::string> kNoStartCheck = {"--start-timeout", "1000"};

std::vector<std::string> Args(int np, const std::string& script,
                              std::vector<std::string> extra = kNoStartCheck) {
  std::vector<std::string> a = {"-np", std::to_string(np)};
  a.insert(a.end(), extra.begin(), extra.end());
  a.insert(a.end(), {"sh", "-c", script});
  return a;
}

TEST(DprunTest, PrefixesEachLineWithRankAndStream) {
  JobRunner d(Dprun(Args(2, "echo out$HVD_RANK; echo err$HVD_RANK >&2; printf tail$HVD_RANK")));
  EXPECT_EQ(Finish(d), 0) << d.err();
  for (int r = 0; r < 2; ++r) {
    const std::string tag = "[" + std::to_string(r) + "]";
    EXPECT_TRUE(Contains(d.out(), tag + "<stdout>:out" + std::to_string(r) + "\n")) << d.out();
    EXPECT_TRUE(Contains(d.err(), tag + "<stderr>:err" + std::to_string(r) + "\n")) << d.err();
    // A final line without a newline is flushed when the pipe closes.
    EXPECT_TRUE(Contains(d.out(), tag + "<stdout>:tail" + std::to_string(r) + "\n")) << d.out();
  }
  EXPECT_FALSE(Contains(d.out(), "<stderr>"));
  EXPECT_FALSE(Contains(d.err(), "<stdout>"));
}

TEST(DprunTest, LinesFromManyRanksNeverInterleave) {
  constexpr int kRanks = 4, kLines = 3000;
  JobRunner d(
      Dprun(Args(kRanks, "seq 1 " + std::to_string(kLines) + " | sed \"s/^/r$HVD_RANK-/;s/$/-" +
                             std::string(120, 'x') + "/\"")));
  EXPECT_EQ(Finish(d), 0) << d.err();
  std::vector<int> counts(kRanks, 0);
  int bad = 0;
  for (const std::string& line : Lines(d.out())) {
    RelayedLine l;
    const bool ok = ParseRelayedLine(line, &l) && l.stream == "stdout" && l.rank < kRanks &&
                    l.text.rfind("r" + std::to_string(l.rank) + "-", 0) == 0 &&
                    l.text.size() > 124 &&
                    l.text.substr(l.text.size() - 121) == "-" + std::string(120, 'x');
    if (!ok) {
      if (++bad < 5) ADD_FAILURE() << "mangled line: " << line.substr(0, 200);
      continue;
    }
    ++counts[l.rank];
  }
  EXPECT_EQ(bad, 0);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(counts[r], kLines) << "rank " << r;
}

TEST(DprunTest, EachRankGetsItsEnvironment) {
  constexpr int kRanks = 3;
  JobRunner d(
      Dprun(Args(kRanks,
                 "echo env $HVD_RANK $HVD_SIZE $HVD_LOCAL_RANK $HVD_LOCAL_SIZE $HVD_CROSS_RANK "
                 "$HVD_CROSS_SIZE $HVD_STORE_ADDR $HVD_STORE_SECRET $HVD_GLOO_HOSTNAME $HVD_JOB_ID",
                 {"--start-timeout", "1000", "--verbose"})));
  ASSERT_EQ(Finish(d), 0) << d.err();
  std::set<std::string> addrs, secrets, job_ids;
  int seen = 0;
  for (const auto& [rank, w] : WordsByRank(d.out())) {
    ASSERT_EQ(w.size(), 11u) << d.out();
    ASSERT_EQ(w[0], "env") << d.out();
    ++seen;
    const std::string r = std::to_string(rank);
    EXPECT_EQ(w[1], r) << "HVD_RANK";
    EXPECT_EQ(w[2], std::to_string(kRanks)) << "HVD_SIZE";
    EXPECT_EQ(w[3], r) << "HVD_LOCAL_RANK";
    EXPECT_EQ(w[4], std::to_string(kRanks)) << "HVD_LOCAL_SIZE";
    EXPECT_EQ(w[5], "0") << "HVD_CROSS_RANK";
    EXPECT_EQ(w[6], "1") << "HVD_CROSS_SIZE";
    EXPECT_EQ(w[7].rfind("127.0.0.1:", 0), 0u) << "HVD_STORE_ADDR";
    EXPECT_TRUE(IsHex(w[8]) && w[8].size() == 64) << "HVD_STORE_SECRET: 32 random bytes, hex";
    EXPECT_EQ(w[9], "127.0.0.1") << "HVD_GLOO_HOSTNAME";
    EXPECT_TRUE(IsHex(w[10])) << "HVD_JOB_ID";
    addrs.insert(w[7]);
    secrets.insert(w[8]);
    job_ids.insert(w[10]);
  }
  EXPECT_EQ(seen, kRanks) << d.out();
  ASSERT_EQ(addrs.size(), 1u);
  EXPECT_EQ(secrets.size(), 1u);
  EXPECT_EQ(job_ids.size(), 1u);
  std::string host;
  int port = 0;
  EXPECT_TRUE(ParseHostPort(*addrs.begin(), &host, &port).ok());
  // --verbose names the store address and each rank's pid.
  EXPECT_TRUE(Contains(d.err(), "store listening on " + *addrs.begin())) << d.err();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_TRUE(Contains(d.err(), "rank " + std::to_string(r) + " (pid ")) << d.err();
}

// Scripts written for horovodrun read its variables (Horovod's own tests read
// HOROVOD_RANK before init): each rank has them, with the HVD_ values, and
// HOROVOD_HOSTNAME is the host it was placed on (localhost without -H, as horovodrun).
TEST(DprunTest, EachRankGetsHorovodrunsVariablesToo) {
  const std::string script =
      "echo hv $HOROVOD_RANK $HOROVOD_SIZE $HOROVOD_LOCAL_RANK $HOROVOD_LOCAL_SIZE "
      "$HOROVOD_CROSS_RANK $HOROVOD_CROSS_SIZE $HOROVOD_HOSTNAME $HVD_RANK $HVD_LOCAL_RANK "
      "$HVD_CROSS_RANK";
  // rank, size, local rank, local size, cross rank, cross size, host.
  const std::vector<std::vector<std::string>> want = {{"0", "3", "0", "2", "0", "2", "localhost"},
                                                      {"1", "3", "1", "2", "0", "1", "localhost"},
                                                      {"2", "3", "0", "1", "1", "2", "127.0.0.1"}};
  for (bool two_hosts : {false, true}) {
    std::vector<std::string> extra = kNoStartCheck;
    if (two_hosts) extra.insert(extra.end(), {"-H", "localhost:2,127.0.0.1:1"});
    JobRunner d(Dprun(Args(3, script, extra)));
    ASSERT_EQ(Finish(d), 0) << d.err();
    int seen = 0;
    for (const auto& [rank, w] : WordsByRank(d.out())) {
      ASSERT_EQ(w.size(), 11u) << d.out();
      ++seen;
      const std::string r = std::to_string(rank);
      EXPECT_EQ(w[1], r) << d.out();
      EXPECT_EQ(w[8], r) << d.out();  // HVD_RANK
      if (two_hosts) {
        for (size_t i = 0; i < 7; ++i) EXPECT_EQ(w[i + 1], want[rank][i]) << d.out();
        EXPECT_EQ(w[9], w[3]) << d.out();   // HVD_LOCAL_RANK
        EXPECT_EQ(w[10], w[5]) << d.out();  // HVD_CROSS_RANK
      } else {
        EXPECT_EQ(w[2], "3") << d.out();
        EXPECT_EQ(w[3], r) << d.out();
        EXPECT_EQ(w[7], "localhost") << d.out();
      }
    }
    EXPECT_EQ(seen, 3) << d.out();
  }
}

// dprun run from inside an elastic worker (hvd.run there) gives its ranks no worker
// id of the outer job: they would wait in hvd_init for that job's generation.
TEST(DprunTest, AnOuterElasticWorkersIdDoesNotReachTheRanks) {
  JobRunner d(Dprun(Args(2, "echo id=${HVD_ELASTIC_ID:-none}")), WithEnv({"HVD_ELASTIC_ID=w3"}));
  ASSERT_EQ(Finish(d), 0) << d.err();
  EXPECT_EQ(CountLines(d.out(), "[0]<stdout>:id=none"), 1) << d.out();
  EXPECT_EQ(CountLines(d.out(), "[1]<stdout>:id=none"), 1) << d.out();
}

TEST(DprunTest, AllRanksSucceedingExitsZero) {
  JobRunner d(Dprun(Args(4, "exit 0")));
  EXPECT_EQ(Finish(d), 0) << d.err();
  EXPECT_EQ(d.err(), "");
}

TEST(DprunTest, FailingRankTearsDownTheJobFast) {
  JobRunner d(Dprun(Args(2,
                         "if [ \"$HVD_RANK\" = 1 ]; then sleep 0.5; echo dying >&2; exit 3; fi; "
                         "echo pid=$$; exec sleep 60")));
  EXPECT_EQ(Finish(d), 3) << d.err();
  EXPECT_LT(d.seconds(), 10.0);
  const std::vector<pid_t> pids = RankPids(d.out(), 2);
  ASSERT_GT(pids[0], 0) << d.out();
  const size_t cause = d.err().find("dprun: rank 1 (pid ");
  const size_t consequence =
      d.err().find("dprun: rank 0 (pid " + std::to_string(pids[0]) + ") terminated by dprun");
  ASSERT_NE(cause, std::string::npos) << d.err();
  EXPECT_TRUE(Contains(d.err().substr(cause), ") exited with code 3\n")) << d.err();
  EXPECT_NE(consequence, std::string::npos) << d.err();
  EXPECT_LT(cause, consequence) << d.err();
  // The dying rank's last words come before dprun's verdict on it.
  EXPECT_LT(d.err().find("[1]<stderr>:dying"), cause) << d.err();
  EXPECT_TRUE(Gone(pids[0])) << "rank 0's sleep outlived dprun";
}

TEST(DprunTest, RankKilledBySignal) {
  JobRunner d(Dprun(Args(2,
                         "if [ \"$HVD_RANK\" = 1 ]; then sleep 0.3; kill -9 $$; fi; "
                         "echo pid=$$; exec sleep 60")));
  EXPECT_EQ(Finish(d), 128 + 9) << d.err();
  EXPECT_LT(d.seconds(), 10.0);
  EXPECT_TRUE(Contains(d.err(), ") was killed by signal 9 (Killed)")) << d.err();
  EXPECT_TRUE(Contains(d.err(), "dprun: rank 1 (pid ")) << d.err();
  const std::vector<pid_t> pids = RankPids(d.out(), 2);
  ASSERT_GT(pids[0], 0) << d.out();
  EXPECT_TRUE(Gone(pids[0]));
}

TEST(DprunTest, OtherRanksMayReportAFailureBeforeTheTeardown) {
  // Rank 1 fails; rank 0 still has a second to say something and exit on its own.
  JobRunner d(Dprun(Args(2,
                         "if [ \"$HVD_RANK\" = 1 ]; then sleep 0.3; exit 3; fi; "
                         "sleep 1; echo still-here; exit 1")));
  EXPECT_EQ(Finish(d), 3) << d.err();
  EXPECT_LT(d.seconds(), 10.0);
  EXPECT_TRUE(Contains(d.out(), "[0]<stdout>:still-here\n")) << d.out();
  EXPECT_TRUE(Contains(d.err(), ") exited with code 3\n")) << d.err();
  EXPECT_TRUE(Contains(d.err(), ") exited with code 1 after the failure above\n")) << d.err();
  EXPECT_FALSE(Contains(d.err(), "terminated by dprun")) << d.err();
}

TEST(DprunTest, ProcessesARankLeavesBehindAreTerminated) {
  // Rank 0 starts a background sleep and exits 0 at once; it must not survive dprun.
  JobRunner d(Dprun(Args(1, "sleep 60 & echo pid=$!")));
  EXPECT_EQ(Finish(d), 0) << d.err();
  EXPECT_LT(d.seconds(), 10.0);
  const std::vector<pid_t> pids = RankPids(d.out(), 1);
  ASSERT_GT(pids[0], 0) << d.out();
  EXPECT_TRUE(Gone(pids[0]));
}

class DprunSignalTest : public ::testing::TestWithParam<int> {};

TEST_P(DprunSignalTest, SignalToDprunStopsTheJob) {
  const int sig = GetParam();
  JobRunner d(Dprun(Args(3, "echo pid=$$; exec sleep 60")));
  ASSERT_TRUE(d.ReadUntil([&] { return CountLines(d.out(), "[") == 3; }, milliseconds(10000)))
      << d.out() << d.err();
  const auto sent = Clock::now();
  d.Signal(sig);
  EXPECT_EQ(Finish(d), 128 + sig) << d.err();
  EXPECT_LT(Seconds(Clock::now() - sent), 5.0);
  EXPECT_TRUE(Contains(d.err(), std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM")))
      << d.err();
  for (pid_t pid : RankPids(d.out(), 3)) {
    ASSERT_GT(pid, 0) << d.out();
    EXPECT_TRUE(Gone(pid));
  }
}

INSTANTIATE_TEST_SUITE_P(IntAndTerm, DprunSignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(info.param == SIGINT ? "Sigint" : "Sigterm");
                         });

TEST(DprunTest, RankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  JobRunner d(Dprun(Args(2, "trap '' TERM; echo pid=$$; exec sleep 60",
                         {"--start-timeout", "1000", "--grace-period", "1"})));
  ASSERT_TRUE(d.ReadUntil([&] { return CountLines(d.out(), "[") == 2; }, milliseconds(10000)));
  const auto sent = Clock::now();
  d.Signal(SIGINT);
  EXPECT_EQ(Finish(d), 130) << d.err();
  const double waited = Seconds(Clock::now() - sent);
  EXPECT_GT(waited, 0.8);
  EXPECT_LT(waited, 6.0);
  EXPECT_TRUE(Contains(d.err(), "terminated by dprun (was killed by signal 9 (Killed))"))
      << d.err();
  for (pid_t pid : RankPids(d.out(), 2)) EXPECT_TRUE(Gone(pid));
}

TEST(DprunTest, SecondSigintKillsAtOnce) {
  JobRunner d(Dprun(Args(2, "trap '' TERM; echo pid=$$; exec sleep 60",
                         {"--start-timeout", "1000", "--grace-period", "60"})));
  ASSERT_TRUE(d.ReadUntil([&] { return CountLines(d.out(), "[") == 2; }, milliseconds(10000)));
  const auto sent = Clock::now();
  d.Signal(SIGINT);
  std::this_thread::sleep_for(milliseconds(300));
  d.Signal(SIGINT);
  EXPECT_EQ(Finish(d), 130) << d.err();
  EXPECT_LT(Seconds(Clock::now() - sent), 5.0);
  EXPECT_TRUE(Contains(d.err(), "received SIGINT again")) << d.err();
}

TEST(DprunTest, StartTimeoutNamesTheRanksThatDidNotStart) {
  JobRunner d(Dprun({"-np", "2", "--start-timeout", "1", "sleep", "30"}));
  EXPECT_NE(Finish(d), 0);
  EXPECT_LT(d.seconds(), 8.0);
  EXPECT_TRUE(Contains(d.err(), "dprun: ranks 0, 1 did not start within 1 s")) << d.err();
}

// The rank program for the next tests: connects to the job's store as the runtime
// would and sets hvd/started/<rank>, unless its rank is DPRUN_TEST_SILENT_RANK; then
// stays alive for DPRUN_TEST_LINGER_MS.
TEST(DprunRank, DISABLED_ConnectAndMarkStarted) {
  const char* addr = std::getenv("HVD_STORE_ADDR");
  const char* secret = std::getenv("HVD_STORE_SECRET");
  const char* rank = std::getenv("HVD_RANK");
  ASSERT_TRUE(addr && secret && rank);
  const char* silent = std::getenv("DPRUN_TEST_SILENT_RANK");
  if (silent == nullptr || std::string(silent) != rank) {
    std::string host;
    int port = 0;
    ASSERT_TRUE(ParseHostPort(addr, &host, &port).ok());
    std::shared_ptr<Store> store;
    const Status s = ConnectTcpStore(host, port, secret, milliseconds(10000), &store);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_TRUE(store->Set(std::string("hvd/started/") + rank, "1").ok());
  }
  const char* linger = std::getenv("DPRUN_TEST_LINGER_MS");
  std::this_thread::sleep_for(milliseconds(linger ? std::atoi(linger) : 0));
}

std::string SelfExe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// dprun arguments that run DprunRank.DISABLED_ConnectAndMarkStarted as every rank.
std::vector<std::string> SelfAsRank(int np, const std::string& start_timeout) {
  return {"-np",
          std::to_string(np),
          "--start-timeout",
          start_timeout,
          SelfExe(),
          "--gtest_filter=DprunRank.DISABLED_ConnectAndMarkStarted",
          "--gtest_also_run_disabled_tests"};
}

TEST(DprunTest, RanksThatConnectAndSetTheKeyCountAsStarted) {
  JobRunner d(Dprun(SelfAsRank(3, "1")), WithEnv({"DPRUN_TEST_LINGER_MS=2000"}));
  EXPECT_EQ(Finish(d), 0) << d.out() << d.err();
  EXPECT_FALSE(Contains(d.err(), "did not start")) << d.err();
  EXPECT_EQ(CountLines(d.out(), "[0]<stdout>:[  PASSED  ] 1 test"), 1) << d.out();
}

TEST(DprunTest, OneRankThatNeverConnectsFailsTheJob) {
  JobRunner d(Dprun(SelfAsRank(3, "1")),
              WithEnv({"DPRUN_TEST_LINGER_MS=20000", "DPRUN_TEST_SILENT_RANK=2"}));
  EXPECT_EQ(Finish(d), 1) << d.err();
  EXPECT_LT(d.seconds(), 10.0);
  EXPECT_TRUE(Contains(d.err(), "dprun: rank 2 did not start within 1 s\n")) << d.err();
}

TEST(DprunTest, UsageErrorsExitTwo) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "missing -np N"},
      {{"true"}, "missing -np N"},
      {{"-np", "0", "true"}, "-np must be at least 1"},
      {{"-np", "-3", "true"}, "-np must be at least 1"},
      {{"-np", "x", "true"}, "-np expects an integer, got 'x'"},
      {{"-np", "2"}, "no command to run"},
      {{"-np", "2", "--"}, "no command to run"},
      {{"--bogus", "-np", "1", "true"}, "unknown option '--bogus'"},
      {{"-np", "1", "--start-timeout", "soon", "true"}, "--start-timeout expects a number"},
      {{"-np", "1", "--grace-period"}, "option --grace-period needs a value S"},
      {{"-np", "1", "--verbose=yes", "true"}, "option --verbose takes no value"},
  };
  for (const auto& [args, message] : cases) {
    JobRunner d(Dprun(args));
    EXPECT_EQ(Finish(d), 2) << d.err();
    EXPECT_TRUE(Contains(d.err(), "dprun: " + message)) << d.err();
    EXPECT_TRUE(Contains(d.err(), "usage: dprun -np N")) << d.err();
  }
}

TEST(DprunTest, HelpListsEveryOptionWithItsDefault) {
  for (const char* flag : {"-h", "--help"}) {
    JobRunner d(Dprun({flag}));
    EXPECT_EQ(Finish(d), 0);
    for (const char* text :
         {"usage: dprun", "-np, --num-proc N", "--start-timeout S", "(default: 120)",
          "--grace-period S", "(default: 5)", "--verbose", "--timeline PATH", "--straggler-report",
          "-h, --help", "HVD_STORE_ADDR"})
      EXPECT_TRUE(Contains(d.out(), text)) << text << "\n" << d.out();
  }
}

// A horovodrun command line runs as it is: tuning flags reach every rank as their
// variables, flags with nothing to tune say so once, -cb and -v answer without a job.
TEST(DprunTest, HorovodrunCommandLinesRun) {
  JobRunner d(Dprun({"-np", "2", "--gloo", "--fusion-threshold-mb", "2", "--cycle-time-ms", "3",
                     "--num-nccl-streams", "2", "sh", "-c",
                     "echo r$HVD_RANK $HVD_FUSION_THRESHOLD $HVD_CYCLE_TIME"}));
  EXPECT_EQ(Finish(d), 0) << d.err();
  EXPECT_TRUE(Contains(d.out(), "[0]<stdout>:r0 2097152 3\n")) << d.out();
  EXPECT_TRUE(Contains(d.out(), "[1]<stdout>:r1 2097152 3\n")) << d.out();
  EXPECT_TRUE(Contains(d.err(), "dprun: --num-nccl-streams has no effect: ")) << d.err();
  JobRunner cb(Dprun({"-cb"}));
  EXPECT_EQ(Finish(cb), 0) << cb.err();
  EXPECT_TRUE(Contains(cb.out(), "Available Controllers:\n    [ ] MPI\n    [X] Gloo\n"))
      << cb.out();
  JobRunner v(Dprun({"--version"}));
  EXPECT_EQ(Finish(v), 0) << v.err();
  EXPECT_TRUE(Contains(v.out(), "dprun ")) << v.out();
  JobRunner mpi(Dprun({"-np", "2", "--mpi", "true"}));
  EXPECT_EQ(Finish(mpi), 2);
  EXPECT_TRUE(Contains(mpi.err(), "dprun: --mpi: dprun starts its ranks itself")) << mpi.err();
}

// horovodrun's --output-filename: each rank's lines also in DIR/rank.<r>/stdout and
// stderr, padded to the last rank's digits, the directory made as needed.
TEST(DprunTest, OutputFilenameWritesEachRanksLinesToItsFiles) {
  char tmp[] = "/tmp/dprun-output-XXXXXX";
  ASSERT_NE(::mkdtemp(tmp), nullptr);
  const std::string dir = std::string(tmp) + "/logs/run1";
  JobRunner d(Dprun({"-np", "11", "--output-filename", dir, "sh", "-c",
                     "echo out$HVD_RANK; echo err$HVD_RANK >&2"}));
  EXPECT_EQ(Finish(d), 0) << d.err();
  EXPECT_TRUE(Contains(d.out(), "[10]<stdout>:out10\n")) << d.out();  // still on the console
  auto read = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(read(dir + "/rank.00/stdout"), "[0]<stdout>:out0\n");
  EXPECT_EQ(read(dir + "/rank.10/stdout"), "[10]<stdout>:out10\n");
  EXPECT_EQ(read(dir + "/rank.07/stderr"), "[7]<stderr>:err7\n");
  JobRunner bad(Dprun({"-np", "1", "--output-filename", "/proc/no/such", "true"}));
  EXPECT_EQ(Finish(bad), 1);
  EXPECT_TRUE(Contains(bad.err(), "dprun: --output-filename: cannot create /proc/no")) << bad.err();
  std::filesystem::remove_all(tmp);
}

TEST(DprunTest, OptionsAcceptEqualsFormAndDoubleDash) {
  JobRunner d(Dprun({"-np=2", "--start-timeout=1000", "--", "sh", "-c", "echo r$HVD_RANK"}));
  EXPECT_EQ(Finish(d), 0) << d.err();
  EXPECT_TRUE(Contains(d.out(), "[1]<stdout>:r1\n")) << d.out();
}

TEST(DprunTest, TimelineAndStragglerReportFlags) {
  char dir[] = "/tmp/dprun-timeline-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/timeline.json";
  JobRunner d(Dprun({"-np", "2", "--timeline", path, "--straggler-report",
                     std::string(HVD_BUILD_DIR) + "/tests/programs/loop_job", "30"}));
  EXPECT_EQ(Finish(d), 0) << d.err();
  // Rank 0's report, line by line, after the job.
  EXPECT_TRUE(Contains(d.err(), "dprun: straggler report: ")) << d.err();
  EXPECT_TRUE(Contains(d.err(), "\ndprun:   rank     last")) << d.err();
  EXPECT_TRUE(Contains(d.err(), "\ndprun:      1 ")) << d.err();
  std::ifstream in(path);
  std::stringstream timeline;
  timeline << in.rdbuf();
  EXPECT_TRUE(Contains(timeline.str(), "\"loop\"")) << timeline.str().substr(0, 500);
  ::unlink(path.c_str());
  ::rmdir(dir);

  JobRunner none(Dprun(Args(1, "exit 0", {"--start-timeout", "1000", "--straggler-report"})));
  EXPECT_EQ(Finish(none), 0) << none.err();
  EXPECT_TRUE(Contains(none.err(), "dprun: no straggler report")) << none.err();
}

// This process's CPUs, as the ranks inherit them.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  HVD_CHECK(::sched_getaffinity(0, sizeof(set), &set) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string AffinityLine(int rank, const std::string& cpus) {
  return "[" + std::to_string(rank) + "]<stdout>:affinity rank=" + std::to_string(rank) +
         " local_rank=" + std::to_string(rank) + " main=" + cpus + " early=" + cpus +
         " late=" + cpus + "\n";
}

TEST(DprunTest, BindToCoreGivesEachRankItsBlockOfCpus) {
  const std::string job = std::string(HVD_BUILD_DIR) + "/tests/programs/affinity_job";
  // dprun inherits this thread's CPUs: at most two of them, so that "more ranks
  // than CPUs" below means 3 ranks on any machine.
  const std::vector<int> mine = AllowedCpus();
  cpu_set_t two;
  CPU_ZERO(&two);
  for (size_t i = 0; i < mine.size() && i < 2; ++i) CPU_SET(mine[i], &two);
  ASSERT_EQ(::sched_setaffinity(0, sizeof(two), &two), 0);
  struct Restore {
    std::vector<int> cpus;
    ~Restore() {
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c : cpus) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof(set), &set);
    }
  } restore{mine};
  const std::vector<int> allowed = AllowedCpus();
  ASSERT_LE(allowed.size(), 2u);
  const std::string all = CpuListString(allowed);
  // Threads started before hvd_init are bound too, and so are later ones.
  JobRunner bound(Dprun({"-np", "2", "--bind-to", "core", job}));
  EXPECT_EQ(Finish(bound), 0) << bound.err();
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(
        Contains(bound.out(), AffinityLine(r, CpuListString(CoresForLocalRank(allowed, r, 2)))))
        << bound.out();
  // More ranks than CPUs share them in turn.
  const int many = static_cast<int>(allowed.size()) + 1;
  JobRunner crowded(Dprun({"-np", std::to_string(many), "--bind-to", "core", job}));
  EXPECT_EQ(Finish(crowded), 0) << crowded.err();
  EXPECT_TRUE(Contains(crowded.out(), AffinityLine(many - 1, std::to_string(allowed[0]))))
      << crowded.out();
  // Unbound (the default, and --bind-to none), every rank keeps every CPU.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-np", "2", job}, {"-np", "2", "--bind-to=none", job}}) {
    JobRunner free(Dprun(args));
    EXPECT_EQ(Finish(free), 0) << free.err();
    for (int r = 0; r < 2; ++r)
      EXPECT_TRUE(Contains(free.out(), AffinityLine(r, all))) << free.out();
  }
  // The variable alone does it too, and a bad value fails init, naming it.
  JobRunner by_env(Dprun({"-np", "2", job}), WithEnv({"HVD_BIND_TO=core"}));
  EXPECT_EQ(Finish(by_env), 0) << by_env.err();
  EXPECT_TRUE(
      Contains(by_env.out(), AffinityLine(1, CpuListString(CoresForLocalRank(allowed, 1, 2)))))
      << by_env.out();
  JobRunner bad(Dprun({"-np", "1", job}), WithEnv({"HVD_BIND_TO=socket"}));
  EXPECT_NE(Finish(bad), 0);
  EXPECT_TRUE(Contains(bad.err(), "HVD_BIND_TO='socket'")) << bad.err();
}

TEST(DprunTest, UnknownCommandExits127) {
  JobRunner d(Dprun({"-np", "2", "no-such-command-dprun-test"}));
  EXPECT_EQ(Finish(d), 127);
  EXPECT_TRUE(Contains(d.err(), "command not found: no-such-command-dprun-test")) << d.err();
}

}  // namespace
}  // namespace hvd
