// The remote rank script (remote_spawner.h) run by a local /bin/sh, as sshd would run
// it: the start marker, exit codes, quoting, and teardown when its stdin closes.
// No ssh and no network: the multi-host tests (multihost_test.cc) cover those.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "launcher/remote_spawner.h"
#include "tests/job_runner.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

using hvd::testing::JobRunner;

// The remote script for `command` under /bin/sh, run in /tmp.
std::vector<std::string> Script(const EnvVars& env, const std::vector<std::string>& command,
                                double grace_s = 5) {
  return JobRunner::Shell(RemoteScript(env, "/tmp", command, grace_s));
}

// Its stdin is a pipe, as ssh gives it; closing it is dprun's teardown.
JobRunner::Options AsSshWould() {
  JobRunner::Options o;
  o.stdin_pipe = true;
  return o;
}

// Waits for the script to exit (at most `timeout`); returns its exit code, or -1.
int Wait(JobRunner& s, milliseconds timeout = milliseconds(10000)) {
  return s.Wait(timeout) ? s.exit_code() : -1;
}

bool Gone(pid_t pid, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (!hvd::testing::ProcessAlive(pid)) return true;  // a zombie awaiting init is gone
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

// True once nothing is left in the script's process group, waiting up to `timeout`
// (what the script killed last may still be exiting when it returns).
bool GroupGone(const JobRunner& s, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!s.GroupSurvivors().empty() && Clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  return s.GroupSurvivors().empty();
}

TEST(RemoteScript, PrintsTheMarkerFirstAndReturnsTheExitCode) {
  JobRunner s(Script({{"HVD_RANK", "3"}}, {"sh", "-c", "echo rank=$HVD_RANK cwd=$(pwd); exit 7"}),
              AsSshWould());
  EXPECT_EQ(Wait(s), 7) << s.err();
  EXPECT_EQ(s.out().rfind(std::string(kRemoteStartedMarker) + " ", 0), 0u) << s.out();
  EXPECT_THAT(s.out(), HasSubstr("\nrank=3 cwd=/tmp\n"));
  EXPECT_EQ(s.err(), "");
}

TEST(RemoteScript, PassesArgumentsAndValuesVerbatim) {
  const std::string tricky = "it's \"quoted\" $HOME `date` \\n ; & | * ~";
  JobRunner s(
      Script({{"TRICKY", tricky}},
             {"sh", "-c", "printf '%s|%s|%s\\n' \"$TRICKY\" \"$1\" \"$2\"", "sh", tricky, ""}),
      AsSshWould());
  EXPECT_EQ(Wait(s), 0) << s.err();
  EXPECT_THAT(s.out(), HasSubstr("\n" + tricky + "|" + tricky + "|\n"));
}

TEST(RemoteScript, ASignalledRankExitsWith128PlusTheSignal) {
  JobRunner s(Script({}, {"sh", "-c", "kill -9 $$"}), AsSshWould());
  EXPECT_EQ(Wait(s), 128 + 9);
  EXPECT_EQ(s.err(), "");  // The script does not report the death itself.
}

TEST(RemoteScript, ClosingStdinTerminatesTheRank) {
  JobRunner s(Script({}, {"sh", "-c", "echo pid=$$; exec sleep 60"}), AsSshWould());
  ASSERT_TRUE(s.WaitForOutput("pid=", milliseconds(5000))) << s.out() << s.err();
  const pid_t rank = std::stoi(s.out().substr(s.out().find("pid=") + 4));
  const auto closed = Clock::now();
  s.CloseStdin();
  EXPECT_EQ(Wait(s), 128 + SIGTERM);
  EXPECT_LT(SecondsSince(closed), 3.0);
  EXPECT_TRUE(Gone(rank, milliseconds(2000)));
}

TEST(RemoteScript, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  JobRunner s(Script({}, {"sh", "-c", "trap '' TERM; echo pid=$$; sleep 60; echo survived"}, 0.5),
              AsSshWould());
  ASSERT_TRUE(s.WaitForOutput("pid=", milliseconds(5000))) << s.out() << s.err();
  const pid_t rank = std::stoi(s.out().substr(s.out().find("pid=") + 4));
  const auto closed = Clock::now();
  s.CloseStdin();
  EXPECT_NE(Wait(s), 0);
  const double took = SecondsSince(closed);
  EXPECT_GT(took, 0.4);
  EXPECT_LT(took, 4.0);
  EXPECT_TRUE(Gone(rank, milliseconds(2000)));
  EXPECT_THAT(s.out(), ::testing::Not(HasSubstr("survived")));
}

TEST(RemoteScript, WhatTheRankLeavesBehindIsTerminated) {
  JobRunner s(Script({}, {"sh", "-c", "sleep 60 & echo left=$!"}), AsSshWould());
  EXPECT_EQ(Wait(s), 0) << s.err();
  ASSERT_THAT(s.out(), HasSubstr("left="));
  const pid_t left = std::stoi(s.out().substr(s.out().find("left=") + 5));
  EXPECT_TRUE(Gone(left, milliseconds(3000)));
  EXPECT_TRUE(GroupGone(s, milliseconds(2000)));  // Nor the watcher.
}

TEST(RemoteScript, StdinClosedAtOnceStillReturnsTheRanksStatus) {
  // A teardown right after the start: the watcher's SIGTERM must find the script's
  // trap in place, so that the script returns the rank's status instead of dying of it.
  for (int i = 0; i < 5; ++i) {
    JobRunner s(Script({}, {"sh", "-c", "exec sleep 60"}), AsSshWould());
    ASSERT_TRUE(s.WaitForOutput(kRemoteStartedMarker, milliseconds(5000))) << s.err();
    s.CloseStdin();
    EXPECT_EQ(Wait(s), 128 + SIGTERM);
    EXPECT_EQ(s.term_signal(), 0) << "the script died of signal " << s.term_signal();
    EXPECT_TRUE(GroupGone(s, milliseconds(2000)));
  }
}

TEST(RemoteScript, SshArgvPutsUserOptionsFirst) {
  SshOptions ssh;
  ssh.ssh_path = "/usr/bin/ssh";
  ssh.port = 2222;
  ssh.identity_file = "/k";
  ssh.options = {"ConnectTimeout=1"};
  ssh.connect_timeout_s = 9;
  const std::vector<std::string> argv = SshArgv(ssh, "hostB", "echo hi");
  const std::vector<std::string> want = {"/usr/bin/ssh",
                                         "-T",
                                         "-x",
                                         "-o",
                                         "ConnectTimeout=1",
                                         "-o",
                                         "BatchMode=yes",
                                         "-o",
                                         "ConnectTimeout=9",
                                         "-o",
                                         "ServerAliveInterval=5",
                                         "-o",
                                         "ServerAliveCountMax=3",
                                         "-p",
                                         "2222",
                                         "-i",
                                         "/k",
                                         "--",
                                         "hostB",
                                         "exec sh -c 'echo hi'"};
  EXPECT_EQ(argv, want);
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
