// A rank killed (SIGKILL) or frozen (SIGSTOP) mid-job: the others fail fast with
// a clear error naming it, dprun ends the job non-zero, and nothing is left behind.
// The bounds are generous: these run on small, loaded machines.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>

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

bool Alive(int pid) { return kill(pid, 0) == 0; }

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
  // The frozen rank is continued with its SIGTERM, so it need not wait for SIGKILL.
  EXPECT_THAT(job.out(), HasSubstr("dprun: rank 1 (pid " + std::to_string(pids[1]) +
                                   ") terminated by dprun (was killed by signal 15"));
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " left behind";
}

}  // namespace
