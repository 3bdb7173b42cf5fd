// JobRunner, the process tests' one way to run a job: output capture, environment,
// bounded waits, signals, the process group and exit statuses, on small sh commands.
#include "tests/job_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

JobRunner::Options Merged() {
  JobRunner::Options o;
  o.merge_output = true;
  return o;
}

// True once `pid` has died (a zombie counts: orphans here wait for init), waiting up
// to 2 s.
bool Gone(pid_t pid) {
  for (int i = 0; i < 200; ++i) {
    if (!ProcessAlive(pid)) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(JobRunner, CapturesStdoutAndStderrApartAndTheExitCode) {
  JobRunner job(JobRunner::Shell("echo out; echo err >&2; printf tail; exit 3"));
  ASSERT_TRUE(job.Wait(milliseconds(10000)));
  EXPECT_TRUE(job.exited());
  EXPECT_EQ(job.exit_code(), 3);
  EXPECT_EQ(job.term_signal(), 0);
  EXPECT_EQ(job.out(), "out\ntail");
  EXPECT_EQ(job.err(), "err\n");
  EXPECT_GT(job.seconds(), 0);
}

TEST(JobRunner, MergedOutputKeepsTheOrderWritten) {
  JobRunner job(JobRunner::Shell("echo 1; echo 2 >&2; echo 3"), Merged());
  ASSERT_TRUE(job.Wait(milliseconds(10000)));
  EXPECT_EQ(job.out(), "1\n2\n3\n");
  EXPECT_EQ(job.err(), "");
}

TEST(JobRunner, EnvironmentIsAddedOrGivenWhole) {
  ::setenv("JOB_RUNNER_TEST_KEPT", "kept", 1);
  ::setenv("JOB_RUNNER_TEST_REPLACED", "old", 1);
  JobRunner::Options o;
  o.env = {"JOB_RUNNER_TEST_REPLACED=new", "JOB_RUNNER_TEST_ADDED=a b"};
  JobRunner added(JobRunner::Shell("echo $JOB_RUNNER_TEST_KEPT $JOB_RUNNER_TEST_REPLACED "
                                   "$JOB_RUNNER_TEST_ADDED"),
                  o);
  ASSERT_TRUE(added.Wait(milliseconds(10000)));
  EXPECT_EQ(added.out(), "kept new a b\n");
  o.inherit_env = false;
  o.env = {"ONLY=this"};
  JobRunner whole({"/usr/bin/env"}, o);
  ASSERT_TRUE(whole.Wait(milliseconds(10000)));
  EXPECT_EQ(whole.out(), "ONLY=this\n");
}

TEST(JobRunner, FindsTheProgramOnPath) {
  JobRunner job({"echo", "found"});
  ASSERT_TRUE(job.Wait(milliseconds(10000)));
  EXPECT_EQ(job.out(), "found\n");
}

TEST(JobRunner, AProgramThatCannotStartReadsAsExit127) {
  JobRunner job({"no-such-program-job-runner-test"});
  ASSERT_TRUE(job.Wait(milliseconds(10000)));
  EXPECT_EQ(job.exit_code(), 127);
  EXPECT_THAT(job.err(), HasSubstr("cannot execute 'no-such-program-job-runner-test'"));
}

TEST(JobRunner, WaitsAreBoundedAndKillEndsTheJob) {
  JobRunner job(JobRunner::Shell("echo started; exec sleep 30"));
  EXPECT_TRUE(job.WaitForOutput("started\n", milliseconds(10000)));
  EXPECT_FALSE(job.WaitForOutput("never", milliseconds(100)));
  EXPECT_FALSE(job.Wait(milliseconds(100)));
  EXPECT_FALSE(job.exited());
  EXPECT_EQ(job.exit_code(), -1);
  job.Kill();
  EXPECT_TRUE(job.exited());
  EXPECT_EQ(job.term_signal(), SIGKILL);
  EXPECT_EQ(job.exit_code(), 128 + SIGKILL);
  EXPECT_LT(job.seconds(), 5.0);
}

TEST(JobRunner, SignalsReachTheChildOrItsGroup) {
  // The child starts with SIGTERM's default action even where the test ignores it.
  struct sigaction ignore {
  }, old{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGTERM, &ignore, &old);
  JobRunner job(JobRunner::Shell("sleep 30 & echo left=$!; wait"));
  ::sigaction(SIGTERM, &old, nullptr);
  ASSERT_TRUE(job.WaitForOutput("\n", milliseconds(10000)));
  const pid_t left = std::stoi(job.out().substr(job.out().find('=') + 1));
  EXPECT_THAT(job.GroupSurvivors(), ::testing::UnorderedElementsAre(job.pid(), left));
  job.Signal(SIGTERM);  // The shell alone: its sleep stays, and holds the pipes.
  EXPECT_FALSE(job.Wait(milliseconds(200)));
  for (int i = 0; i < 500 && !job.exited(); ++i) job.Wait(milliseconds(10));
  EXPECT_EQ(job.term_signal(), SIGTERM);
  EXPECT_THAT(job.GroupSurvivors(), ::testing::ElementsAre(left));
  job.SignalGroup(SIGKILL);
  EXPECT_TRUE(Gone(left));
  EXPECT_TRUE(job.Wait(milliseconds(10000)));  // Its pipes close with it.
  EXPECT_TRUE(job.GroupSurvivors().empty());
}

TEST(JobRunner, ClosingStdinEndsInput) {
  JobRunner::Options o;
  o.stdin_pipe = true;
  JobRunner job(JobRunner::Shell("cat; echo eof"), o);
  EXPECT_FALSE(job.Wait(milliseconds(100)));
  job.CloseStdin();
  ASSERT_TRUE(job.Wait(milliseconds(10000)));
  EXPECT_EQ(job.out(), "eof\n");
  JobRunner null_stdin(JobRunner::Shell("cat; echo eof"));
  ASSERT_TRUE(null_stdin.Wait(milliseconds(10000)));
  EXPECT_EQ(null_stdin.out(), "eof\n");
}

TEST(JobRunner, WaitAllReadsEveryJobSoNoneBlocksOnAFullPipe) {
  // Each writes more than a pipe holds, then waits for the other to finish writing.
  JobRunner a(JobRunner::Shell("head -c 300000 /dev/zero; echo done"));
  JobRunner b(JobRunner::Shell("head -c 300000 /dev/zero >&2; echo done"));
  ASSERT_TRUE(JobRunner::WaitAll({&a, &b}, milliseconds(10000)));
  EXPECT_EQ(a.out().size(), 300005u);
  EXPECT_EQ(b.err().size(), 300000u);
  EXPECT_EQ(b.out(), "done\n");
}

TEST(JobRunner, TheDestructorKillsTheProcessGroup) {
  pid_t left = -1;
  {
    JobRunner job(JobRunner::Shell("sleep 30 & echo left=$!; exec sleep 30"));
    ASSERT_TRUE(job.WaitForOutput("\n", milliseconds(10000)));
    left = std::stoi(job.out().substr(job.out().find('=') + 1));
  }
  EXPECT_TRUE(Gone(left));
}

TEST(JobRunner, RunCommandRunsToTheEndOrTimesOut) {
  CommandResult r = RunCommand("echo $X; echo e >&2; exit 4", milliseconds(10000), {"X=x"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.output, "x\ne\n");
  r = RunCommand("exec sleep 30", milliseconds(200));
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
  EXPECT_LT(r.seconds, 5.0);
}

}  // namespace
}  // namespace testing
}  // namespace hvd
