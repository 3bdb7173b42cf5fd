// 64 ranks on one host through dprun (label "scale"; .ci/test runs these in a step of
// their own): every result exact on every rank, over shared memory (tree cycles on
// the shared-memory channel) and over Gloo (tree cycles by recursive doubling, the
// fused small tensors by halving-doubling, the large one by the ring); and a rank
// killed mid-job fails the other 63 within a bound, each naming it. The machine is
// oversubscribed (64 ranks on a few cores): the bounds are on failing, never on speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "tests/job_runner.h"

namespace {

using ::testing::HasSubstr;
using hvd::testing::JobRunner;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 64;
const std::string kDprun = HVD_DPRUN_PATH;
const std::string kScaleJob = std::string(HVD_BUILD_DIR) + "/tests/programs/scale_job";

JobRunner::Options Merged(std::vector<std::string> env) {
  JobRunner::Options o;
  o.env = std::move(env);
  o.merge_output = true;
  return o;
}

bool WaitFor(JobRunner& job, const std::regex& pattern, std::chrono::milliseconds timeout,
             std::smatch* m) {
  job.ReadUntil([&] { return std::regex_search(job.out(), *m, pattern); }, timeout);
  return std::regex_search(job.out(), *m, pattern);
}

// Runs scale_job at 64 ranks to its end and checks that every rank finished, exact.
void ExpectEveryRankExact(const std::vector<std::string>& env, int steps) {
  JobRunner job(JobRunner::Shell(kDprun + " -np " + std::to_string(kRanks) + " " + kScaleJob + " " +
                                 std::to_string(steps)),
                Merged(env));
  ASSERT_TRUE(job.Wait(std::chrono::seconds(240))) << "not done in 240 s:\n" << job.out();
  EXPECT_EQ(job.exit_code(), 0) << job.out();
  for (int r = 0; r < kRanks; ++r)
    EXPECT_THAT(job.out(), HasSubstr("[" + std::to_string(r) + "]<stdout>:rank " +
                                     std::to_string(r) + " done\n"))
        << job.out();
  EXPECT_THAT(job.out(), ::testing::Not(HasSubstr("wrong result")));
}

TEST(Scale64, EveryResultExactOverSharedMemory) { ExpectEveryRankExact({}, 6); }

TEST(Scale64, EveryResultExactOverGloo) { ExpectEveryRankExact({"HVD_CPU_OPERATIONS=gloo"}, 3); }

TEST(Scale64, AKilledRankFailsTheOthersWithinABound) {
  constexpr int kVictim = 37;
  JobRunner job(JobRunner::Shell(kDprun + " -np " + std::to_string(kRanks) + " " + kScaleJob +
                                 " 100000"),
                Merged({}));
  std::smatch m;
  const std::regex pid_line("\\[37\\]<stdout>:rank 37 pid ([0-9]+)");
  ASSERT_TRUE(WaitFor(job, pid_line, std::chrono::seconds(120), &m)) << job.out();
  const int pid = std::stoi(m[1]);
  ASSERT_TRUE(WaitFor(job, std::regex("rank 0 step 5\\b"), std::chrono::seconds(120), &m))
      << job.out();
  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(job.Wait(std::chrono::seconds(60))) << "dprun did not exit within 60 s:\n" << job.out();
  const double seconds = std::chrono::duration<double>(Clock::now() - killed_at).count();
  EXPECT_EQ(job.exit_code(), 128 + SIGKILL) << job.out();
  EXPECT_LT(seconds, 30.0) << job.out();
  EXPECT_THAT(job.out(), HasSubstr("dprun: rank " + std::to_string(kVictim) + " (pid " +
                                   std::to_string(pid) + ") was killed by signal 9 (Killed)\n"));
  // Every rank that reported a failure names the dead rank as its cause.
  const std::regex failed("rank [0-9]+ failed at step [0-9]+: ([^\n]*)");
  int reports = 0;
  for (std::sregex_iterator it(job.out().begin(), job.out().end(), failed), end; it != end; ++it) {
    ++reports;
    EXPECT_THAT((*it)[1].str(), HasSubstr("rank 37 (pid " + std::to_string(pid) + ")"));
  }
  EXPECT_GT(reports, 0) << job.out();
}

}  // namespace
