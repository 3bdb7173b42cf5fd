// A rank killed (SIGKILL) or frozen (SIGSTOP) mid-job: the others fail fast with
// a clear error naming it, dprun ends the job non-zero, and nothing is left behind.
// The bounds are generous: these run on small, loaded machines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/job_runner.h"

namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kLoopJob = std::string(HVD_BUILD_DIR) + "/tests/programs/loop_job";

using hvd::testing::JobRunner;

// Runner options for dprun: `env` added, stdout and stderr merged in the order written.
JobRunner::Options Merged(std::vector<std::string> env) {
  JobRunner::Options o;
  o.env = std::move(env);
  o.merge_output = true;
  return o;
}

// Reads the job's output until `pattern` matches or `timeout` passes.
bool WaitFor(JobRunner& job, const std::regex& pattern, std::chrono::milliseconds timeout,
             std::smatch* m) {
  job.ReadUntil([&] { return std::regex_search(job.out(), *m, pattern); }, timeout);
  return std::regex_search(job.out(), *m, pattern);
}

// Waits for dprun to exit; returns its exit code, or -1 past `timeout`.
int WaitExit(JobRunner& job, std::chrono::milliseconds timeout) {
  return job.Wait(timeout) ? job.exit_code() : -1;
}

bool Alive(int pid) { return hvd::testing::ProcessAlive(pid); }  // a zombie has exited

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Each rank's pid, from loop_job's "rank R pid P" line; -1 where none came.
std::vector<int> RankPids(JobRunner& job, int n) {
  std::vector<int> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    std::smatch m;
    const std::regex re("\\[" + std::to_string(r) + "\\]<stdout>:rank " + std::to_string(r) +
                        " pid ([0-9]+)");
    if (WaitFor(job, re, std::chrono::seconds(30), &m)) pids[r] = std::stoi(m[1]);
  }
  return pids;
}

TEST(Failure, KilledRankFailsTheOthersFastAndIsNamed) {
  const int np = 4, victim = 2;
  JobRunner job(
      JobRunner::Shell(kDprun + " -np " + std::to_string(np) + " " + kLoopJob + " 200000"),
      Merged({}));
  const std::vector<int> pids = RankPids(job, np);
  for (int r = 0; r < np; ++r) ASSERT_GT(pids[r], 0) << "rank " << r << "\n" << job.out();
  std::smatch m;
  ASSERT_TRUE(WaitFor(job, std::regex("rank 0 step 20\\b"), std::chrono::seconds(30), &m))
      << job.out();
  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(pids[victim], SIGKILL), 0);
  // Every survivor names the dead rank as the cause, as dprun recorded it in the store.
  const std::string cause = "rank " + std::to_string(victim) + " \\(pid " +
                            std::to_string(pids[victim]) + "\\) was killed by signal 9";
  for (int r = 0; r < np; ++r) {
    if (r == victim) continue;
    const std::string rank = std::to_string(r);
    const std::regex error("\\[" + rank + "\\]<stdout>:rank " + rank +
                           " failed at step [0-9]+: HVD_REMOTE_ERROR: [^\n]*" + cause);
    EXPECT_TRUE(WaitFor(job, error, std::chrono::seconds(15), &m))
        << "rank " << r << " did not report the cause\n"
        << job.out();
  }
  EXPECT_LT(SecondsSince(killed_at), 10.0) << job.out();
  const int code = WaitExit(job, std::chrono::seconds(30));
  const double seconds = SecondsSince(killed_at);
  ASSERT_NE(code, -1) << "dprun did not exit within 30 s:\n" << job.out();
  EXPECT_EQ(code, 128 + SIGKILL) << job.out();
  EXPECT_LT(seconds, 12.0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: rank 2 (pid " + std::to_string(pids[victim]) +
                                   ") was killed by signal 9 (Killed)\n"));
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " left behind";
}

TEST(Failure, FrozenRankTimesOutTheOthersAndIsNamed) {
  JobRunner job(JobRunner::Shell(kDprun + " -np 3 --grace-period 1 " + kLoopJob + " 200000"),
                Merged({"HVD_TIMEOUT=3"}));
  const std::vector<int> pids = RankPids(job, 3);
  for (int r = 0; r < 3; ++r) ASSERT_GT(pids[r], 0) << "rank " << r << "\n" << job.out();
  std::smatch m;
  ASSERT_TRUE(WaitFor(job, std::regex("rank 0 step 20\\b"), std::chrono::seconds(30), &m))
      << job.out();
  const auto frozen_at = Clock::now();
  ASSERT_EQ(kill(pids[1], SIGSTOP), 0);
  const int code = WaitExit(job, std::chrono::seconds(40));
  const double seconds = SecondsSince(frozen_at);
  ASSERT_NE(code, -1) << "dprun did not exit within 40 s:\n" << job.out();
  EXPECT_NE(code, 0);
  // HVD_TIMEOUT (3 s), the diagnosis (2.5 s), dprun's window for the others to report
  // (up to 3 s) and the teardown (SIGTERM with SIGCONT): well short of a hang.
  EXPECT_GT(seconds, 2.5);
  EXPECT_LT(seconds, 20.0) << job.out();
  EXPECT_TRUE(std::regex_search(
      job.out(), m, std::regex("failed at step [0-9]+: HVD_TIMEOUT: rank 1 is gone or frozen")))
      << job.out();
  // dprun's cause line names the frozen rank, as the ranks agreed, not the first rank
  // to exit because of it.
  EXPECT_TRUE(std::regex_search(
      job.out(), m, std::regex("\ndprun: the job failed: HVD_TIMEOUT: rank 1 is gone or frozen[^\n]*; "
                               "then rank [02] \\(pid [0-9]+\\) exited with code 1\n")))
      << job.out();
  // The frozen rank is continued with its SIGTERM, so it need not wait for SIGKILL.
  EXPECT_THAT(job.out(), HasSubstr("dprun: rank 1 (pid " + std::to_string(pids[1]) +
                                   ") terminated by dprun (was killed by signal 15"));
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " left behind";
}

// A rank that leaves early (exits with code 0, or shuts down, while the others still
// all-reduce): the others fail naming it, and so does dprun's cause line.
TEST(Failure, ARankThatLeavesEarlyIsNamedAsTheCause) {
  struct Case {
    const char* how;
    std::string rank_error;  // what the others report
    std::string cause;       // dprun's cause line, up to "; then"
  };
  const std::vector<Case> cases = {
      {"exit", "HVD_REMOTE_ERROR: rank 1 \\(pid [0-9]+\\) exited with code 0 while the job ran",
       "dprun: the job failed: HVD_REMOTE_ERROR: rank 1 \\(pid [0-9]+\\) exited with code 0 "
       "while the job ran"},
      {"shutdown", "HVD_SHUT_DOWN: tensor 'loop' can no longer complete: rank 1 has shut down",
       "dprun: the job failed: HVD_SHUT_DOWN: tensor 'loop' can no longer complete: rank 1 has "
       "shut down"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.how);
    JobRunner job(JobRunner::Shell(kDprun + " -np 3 " + kLoopJob + " 100000"),
                  Merged({std::string("LOOP_LEAVE=1:30:") + c.how, "HVD_TIMEOUT=10"}));
    const int code = WaitExit(job, std::chrono::seconds(60));
    ASSERT_NE(code, -1) << "dprun did not exit within 60 s:\n" << job.out();
    EXPECT_EQ(code, 1) << job.out();
    for (int r : {0, 2}) {
      const std::string rank = std::to_string(r);
      EXPECT_TRUE(std::regex_search(job.out(), std::regex("\\[" + rank + "\\]<stdout>:rank " + rank +
                                                          " failed at step 30: " + c.rank_error)))
          << job.out();
    }
    EXPECT_TRUE(std::regex_search(
        job.out(), std::regex("\n" + c.cause + "[^\n]*; then rank [02] \\(pid [0-9]+\\) exited with code 1\n")))
        << job.out();
  }
}

// dprun SIGKILLed while its ranks run under a wrapper (sh -c) and print nothing: no
// signal reaches them and no pipe breaks, yet each ends itself within seconds, and no
// process of the job is left.
TEST(Failure, RanksUnderAWrapperEndThemselvesWhenDprunIsKilled) {
  char dir_template[] = "/tmp/hvd-orphans-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  JobRunner job({kDprun, "-np", "3", "sh", "-c",
                 kLoopJob + " 100000000 -1 0 " + dir + " >" + dir + "/out.$HVD_RANK 2>&1; true"},
                Merged({}));
  auto file_of = [&](int r) {
    std::ifstream f(dir + "/out." + std::to_string(r));
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < 3; ++r) {
    while (Clock::now() < deadline && file_of(r).find("step 10\n") == std::string::npos)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_NE(file_of(r).find("step 10\n"), std::string::npos) << "rank " << r << ": " << file_of(r);
  }
  ASSERT_EQ(hvd::testing::ProcessesWithCommandLineContaining(dir).size(), 7u) << "dprun, 3 wrappers and 3 ranks";
  job.Signal(SIGKILL);
  ASSERT_TRUE(job.Wait(std::chrono::seconds(10)));
  const auto killed_at = Clock::now();
  std::vector<pid_t> left = hvd::testing::ProcessesWithCommandLineContaining(dir);
  while (!left.empty() && SecondsSince(killed_at) < 20) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = hvd::testing::ProcessesWithCommandLineContaining(dir);
  }
  for (int pid : left) kill(pid, SIGKILL);  // leave nothing behind, even on failure
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) still running 20 s after dprun died";
  // Heartbeat (0.5 s) + the check that the store is really gone (2 s) + SIGTERM.
  EXPECT_LT(SecondsSince(killed_at), 10.0);
  for (int r = 0; r < 3; ++r)
    EXPECT_THAT(file_of(r), HasSubstr("hvd: rank " + std::to_string(r) +
                                      ": the launcher is gone: its store takes no connection"));
  std::system(("rm -rf " + dir).c_str());
}

// A rank killed while the others are in hvd_init: each of them fails hvd_init naming
// it, at once (not after HVD_TIMEOUT), over shared memory and over Gloo.
TEST(Failure, RankKilledDuringInitIsNamedByTheOthers) {
  for (const char* ops : {"shm", "gloo"}) {
    SCOPED_TRACE(ops);
    JobRunner job({kDprun, "-np", "3", "sh", "-c",
                   "if [ \"$HVD_RANK\" = 2 ]; then sleep 0.3; kill -9 $$; fi; exec " + kLoopJob +
                       " 100"},
                  Merged({std::string("HVD_CPU_OPERATIONS=") + ops, "HVD_TIMEOUT=60"}));
    const int code = WaitExit(job, std::chrono::seconds(30));
    ASSERT_NE(code, -1) << job.out();
    EXPECT_EQ(code, 128 + SIGKILL) << job.out();
    EXPECT_LT(job.seconds(), 15.0) << job.out();
    std::smatch m;
    ASSERT_TRUE(std::regex_search(job.out(), m,
                                  std::regex("dprun: rank 2 \\(pid ([0-9]+)\\) was killed by signal 9")))
        << job.out();
    for (int r : {0, 1}) {
      const std::string rank = std::to_string(r);
      EXPECT_THAT(job.out(), HasSubstr("[" + rank + "]<stdout>:init failed: rank 2 (pid " +
                                       m[1].str() + ") was killed by signal 9 (Killed) (rank " +
                                       rank + " in hvd_init"))
          << job.out();
    }
  }
}

}  // namespace
