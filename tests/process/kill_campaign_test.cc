// The kill campaign: SIGKILL of a random rank at a random moment of a job, during
// hvd_init included, over and over. Every trial must end within a bound, with dprun
// naming the victim as the cause, every survivor naming it too (from hvd_init or from
// its failed all-reduce), and no process of the job left running.
//
// HVD_KILL_TRIALS (default 8) and HVD_KILL_SEED (default 1) size and seed it; the same
// seed kills the same ranks at the same moments. bench/kill_campaign.sh runs 40 trials
// and prints the counts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/job_runner.h"

namespace {

using Clock = std::chrono::steady_clock;
using hvd::testing::JobRunner;
using std::chrono::milliseconds;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kLoopJob = std::string(HVD_BUILD_DIR) + "/tests/programs/loop_job";

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Counts {
  int trials = 0, during_init = 0, after_init = 0;
  int hangs = 0, dprun_named = 0, exit_137 = 0, leftovers = 0;
  int survivors = 0, survivors_named = 0;
  double worst_end_s = 0;  // from the kill to dprun's exit
};

// One trial; EXPECTs what must hold and counts what happened.
void Trial(int trial, std::mt19937* rng, Counts* c) {
  const int np = 2 + static_cast<int>((*rng)() % 3);
  const int victim = static_cast<int>((*rng)() % np);
  // Half the kills land in the first 60 ms after dprun starts (mostly during the
  // ranks' hvd_init, which takes tens of ms here), half later. Every third job runs
  // over Gloo rather than shared memory.
  const int delay_ms =
      trial % 2 == 0 ? static_cast<int>((*rng)() % 60) : 60 + static_cast<int>((*rng)() % 1940);
  const std::string ops = trial % 3 == 2 ? "gloo" : "shm";
  const std::string marker = "hvd-kill-" + std::to_string(getpid()) + "-" + std::to_string(trial);
  SCOPED_TRACE("trial " + std::to_string(trial) + ": -np " + std::to_string(np) + ", rank " +
               std::to_string(victim) + " killed after " + std::to_string(delay_ms) + " ms, over " + ops);
  JobRunner::Options options;
  options.merge_output = true;
  options.env = {"HVD_CPU_OPERATIONS=" + ops};
  JobRunner job({kDprun, "-np", std::to_string(np), kLoopJob, "100000000", "-1", "0", marker},
                options);
  ASSERT_GT(job.pid(), 0);
  const auto kill_at = Clock::now() + milliseconds(delay_ms);
  job.ReadUntil([&] { return Clock::now() >= kill_at; }, milliseconds(delay_ms + 1));
  // The victim's own process (dprun's child with its rank), once it exists.
  std::vector<pid_t> found;
  const auto give_up = Clock::now() + std::chrono::seconds(20);
  while ((found = hvd::testing::ChildrenWithEnv(job.pid(), "HVD_RANK=" + std::to_string(victim)))
             .empty() &&
         Clock::now() < give_up)
    job.ReadUntil([] { return false; }, milliseconds(5));
  ASSERT_EQ(found.size(), 1u) << job.out();
  const pid_t pid = found[0];
  job.ReadUntil([] { return false; }, milliseconds(0));
  const bool in_init =
      job.out().find("[" + std::to_string(victim) + "]<stdout>:rank " + std::to_string(victim) +
                     " pid") == std::string::npos;
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  const auto killed = Clock::now();
  ++c->trials;
  ++(in_init ? c->during_init : c->after_init);

  if (!job.Wait(std::chrono::seconds(40))) {
    ++c->hangs;
    ADD_FAILURE() << "dprun still running 40 s after the kill:\n" << job.out();
    job.Kill();
  }
  c->worst_end_s = std::max(c->worst_end_s, Seconds(Clock::now() - killed));
  const std::string cause = "rank " + std::to_string(victim) + " \\(pid " + std::to_string(pid) +
                            "\\) was killed by signal 9";
  const std::string& out = job.out();
  if (job.exit_code() == 128 + SIGKILL) ++c->exit_137;
  EXPECT_EQ(job.exit_code(), 128 + SIGKILL) << out;
  const bool named = std::regex_search(out, std::regex("(^|\n)dprun: " + cause + " \\(Killed\\)\n"));
  c->dprun_named += named;
  EXPECT_TRUE(named) << out;
  for (int r = 0; r < np; ++r) {
    if (r == victim) continue;
    const std::string rank = std::to_string(r);
    ++c->survivors;
    // From its failed call (hvd_init or an all-reduce), or, where it waits on a live
    // peer that waits on the victim (Gloo's connect cannot be interrupted), from its
    // heartbeat.
    const bool told =
        std::regex_search(out, std::regex("\\[" + rank + "\\]<stdout>:(rank " + rank +
                                          " failed at step [0-9]+|init failed): [^\n]*" + cause)) ||
        std::regex_search(out, std::regex("\\[" + rank + "\\]<stderr>:hvd: rank " + rank +
                                          ": dprun reports " + cause));
    c->survivors_named += told;
    EXPECT_TRUE(told) << "rank " << r << " did not name the victim\n" << out;
  }
  std::vector<pid_t> left = hvd::testing::ProcessesWithCommandLineContaining(marker);
  for (int i = 0; i < 100 && !left.empty(); ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    left = hvd::testing::ProcessesWithCommandLineContaining(marker);
  }
  for (pid_t p : left) kill(p, SIGKILL);
  c->leftovers += static_cast<int>(left.size());
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left 10 s after dprun exited";
}

TEST(KillCampaign, EveryKillIsNamedByDprunAndTheSurvivorsAndLeavesNothing) {
  const int trials = EnvInt("HVD_KILL_TRIALS", 8);
  const int seed = EnvInt("HVD_KILL_SEED", 1);
  std::mt19937 rng(static_cast<unsigned>(seed));
  Counts c;
  const auto start = Clock::now();
  for (int t = 0; t < trials; ++t) Trial(t, &rng, &c);
  std::printf(
      "kill campaign: %d trials (seed %d) in %.0f s: %d during hvd_init, %d after; dprun named "
      "the victim %d/%d; survivors named it %d/%d; exit status 137 %d/%d; hangs %d; processes "
      "left %d; worst kill-to-exit %.2f s\n",
      c.trials, seed, Seconds(Clock::now() - start), c.during_init, c.after_init, c.dprun_named,
      c.trials, c.survivors_named, c.survivors, c.exit_137, c.trials, c.hangs, c.leftovers,
      c.worst_end_s);
}

}  // namespace
