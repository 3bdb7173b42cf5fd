// Teardown: the cause of a job's end and the timing of its signals, over a fake clock.
#include "launcher/teardown.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace hvd {
namespace launcher {
namespace {

using Phase = Teardown::Phase;
using std::chrono::milliseconds;
using std::chrono::seconds;

const Teardown::Clock::time_point kT0 = Teardown::Clock::time_point() + seconds(1000);

int Exited(int code) { return W_EXITCODE(code, 0); }
int Killed(int sig) { return W_EXITCODE(0, sig); }

TEST(Teardown, TheFirstFailureIsTheCauseAndDecidesTheExitStatus) {
  Teardown t(5);
  EXPECT_FALSE(t.cause_recorded());
  EXPECT_EQ(t.exit_code(), 0);
  EXPECT_EQ(t.Judge(Killed(SIGKILL), false), ExitVerdict::kCause);
  EXPECT_EQ(t.Fail(137, /*let_others_report=*/true, kT0), 0);
  EXPECT_TRUE(t.cause_recorded());
  EXPECT_EQ(t.exit_code(), 137);
  // A later failure is reported, but the exit status stays the cause's.
  EXPECT_EQ(t.Judge(Exited(1), false), ExitVerdict::kAfterFailure);
  t.Fail(1, true, kT0 + milliseconds(10));
  EXPECT_EQ(t.exit_code(), 137);
}

TEST(Teardown, AFailureGivesTheOthersTheReportWindowThenSigterm) {
  Teardown t(5);
  EXPECT_EQ(t.Fail(3, true, kT0), 0);
  EXPECT_EQ(t.phase(), Phase::kReporting);
  EXPECT_EQ(t.NextDeadline(), kT0 + kReportWindow);
  EXPECT_EQ(t.Tick(kT0 + seconds(1), /*any_running=*/true).signal, 0);
  const Teardown::Due due = t.Tick(kT0 + kReportWindow, true);
  EXPECT_EQ(due.signal, SIGTERM);
  EXPECT_FALSE(due.grace_over);
  EXPECT_EQ(t.phase(), Phase::kTerminating);
  // Exits during the termination are its consequences.
  EXPECT_EQ(t.Judge(Killed(SIGTERM), false), ExitVerdict::kTerminated);
}

TEST(Teardown, TheReportWindowEndsOnceNoRankRuns) {
  Teardown t(5);
  t.Fail(3, true, kT0);
  EXPECT_EQ(t.Tick(kT0 + milliseconds(100), /*any_running=*/false).signal, SIGTERM);
  EXPECT_EQ(t.phase(), Phase::kTerminating);
}

TEST(Teardown, SigkillFollowsAfterTheGracePeriodAndRepeatsUntilGivingUp) {
  Teardown t(2);
  EXPECT_EQ(t.Fail(130, /*let_others_report=*/false, kT0), SIGTERM);
  EXPECT_EQ(t.NextDeadline(), kT0 + seconds(2));
  EXPECT_EQ(t.Tick(kT0 + seconds(1), true).signal, 0);
  Teardown::Due due = t.Tick(kT0 + seconds(2), true);
  EXPECT_TRUE(due.grace_over);
  EXPECT_EQ(due.signal, SIGKILL);
  EXPECT_EQ(t.phase(), Phase::kKilling);
  EXPECT_EQ(t.NextDeadline(), Teardown::Clock::time_point::max());
  due = t.Tick(kT0 + seconds(3), true);
  EXPECT_EQ(due.signal, SIGKILL);  // Again, for anything forked since.
  EXPECT_FALSE(due.grace_over);
  EXPECT_FALSE(due.give_up);
  due = t.Tick(kT0 + seconds(2) + kGiveUpAfterKill, true);
  EXPECT_TRUE(due.give_up);
  EXPECT_TRUE(t.given_up());
}

TEST(Teardown, NoGracePeriodKillsAtOnce) {
  Teardown t(0);
  EXPECT_EQ(t.Fail(1, false, kT0), SIGKILL);
  EXPECT_EQ(t.phase(), Phase::kKilling);
  Teardown reporting(0);
  reporting.Fail(3, true, kT0);
  EXPECT_EQ(reporting.Tick(kT0 + kReportWindow, true).signal, SIGKILL);
  EXPECT_EQ(reporting.phase(), Phase::kKilling);
}

TEST(Teardown, TerminateAndKillActOnce) {
  Teardown t(5);
  EXPECT_EQ(t.Terminate(kT0), SIGTERM);
  EXPECT_EQ(t.Terminate(kT0), 0);
  EXPECT_FALSE(t.cause_recorded());  // Processes left behind are no failure.
  EXPECT_EQ(t.exit_code(), 0);
  EXPECT_EQ(t.Kill(kT0), SIGKILL);
  EXPECT_EQ(t.Kill(kT0), 0);
  EXPECT_EQ(t.Terminate(kT0), 0);
}

TEST(Teardown, AFailureDuringTerminationKeepsThePhase) {
  Teardown t(5);
  t.Terminate(kT0);
  EXPECT_EQ(t.Fail(2, true, kT0), 0);
  EXPECT_EQ(t.phase(), Phase::kTerminating);
  EXPECT_EQ(t.exit_code(), 2);
}

TEST(Teardown, JudgesEachExit) {
  Teardown t(5);
  EXPECT_EQ(t.Judge(Exited(0), false), ExitVerdict::kSucceeded);
  EXPECT_EQ(t.Judge(Exited(255), /*remote_not_started=*/true), ExitVerdict::kUnreachable);
  EXPECT_EQ(t.Judge(Exited(255), false), ExitVerdict::kCause);
  EXPECT_EQ(t.Judge(Exited(254), true), ExitVerdict::kCause);
  EXPECT_EQ(t.Judge(Killed(SIGKILL), true), ExitVerdict::kCause);
  t.Fail(1, false, kT0);
  // Once there is a cause, an unreachable host is a consequence too.
  EXPECT_EQ(t.Judge(Exited(255), true), ExitVerdict::kTerminated);
  EXPECT_EQ(t.Judge(Exited(0), false), ExitVerdict::kSucceeded);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
