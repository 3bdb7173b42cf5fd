// DescribeExit, ExitCodeOf and SignalName: pure functions of a waitpid status.
#include "launcher/exit_status.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

namespace hvd {
namespace launcher {
namespace {

int Exited(int code) { return W_EXITCODE(code, 0); }
int Killed(int sig) { return W_EXITCODE(0, sig); }

TEST(ExitStatus, DescribesAnExitCode) {
  EXPECT_EQ(DescribeExit(Exited(0)), "exited with code 0");
  EXPECT_EQ(DescribeExit(Exited(3)), "exited with code 3");
  EXPECT_EQ(DescribeExit(Exited(255)), "exited with code 255");
}

TEST(ExitStatus, DescribesASignalWithItsName) {
  EXPECT_EQ(DescribeExit(Killed(SIGKILL)), "was killed by signal 9 (Killed)");
  EXPECT_EQ(DescribeExit(Killed(SIGTERM)), "was killed by signal 15 (Terminated)");
  EXPECT_EQ(DescribeExit(Killed(SIGSEGV)), "was killed by signal 11 (Segmentation fault)");
}

TEST(ExitStatus, ExitCodeIsTheCodeOr128PlusTheSignal) {
  EXPECT_EQ(ExitCodeOf(Exited(0)), 0);
  EXPECT_EQ(ExitCodeOf(Exited(3)), 3);
  EXPECT_EQ(ExitCodeOf(Killed(SIGKILL)), 137);
  EXPECT_EQ(ExitCodeOf(Killed(SIGINT)), 130);
}

TEST(ExitStatus, NamesTheSignalsDprunActsOn) {
  EXPECT_STREQ(SignalName(SIGINT), "SIGINT");
  EXPECT_STREQ(SignalName(SIGTERM), "SIGTERM");
  EXPECT_STREQ(SignalName(SIGHUP), "a signal");
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
