// The remote rank script (remote_spawner.h) run by a local /bin/sh, as sshd would run
// it: the start marker, exit codes, quoting, and teardown when its stdin closes.
// No ssh and no network: the multi-host tests (multihost_test.cc) cover those.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "controller/launcher/remote_spawner.h"

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The script under /bin/sh with a stdin pipe; output collected until it exits.
class Script {
 public:
  Script(const EnvVars& env, const std::vector<std::string>& command, double grace_s = 5) {
    SpawnRequest req;
    req.label = "script";
    req.exe_path = "/bin/sh";
    req.argv = {"sh", "-c", RemoteScript(env, "/tmp", command, grace_s)};
    req.env = ChildEnvironment({});
    req.stdin_pipe = true;
    sigset_t mask;
    sigemptyset(&mask);
    const Status s = SpawnProcess(req, mask, &child_);
    HVD_CHECK_MSG(s.ok(), s.ToString());
  }
  ~Script() {
    if (child_.pid > 0 && !reaped_) {
      ::kill(-child_.pid, SIGKILL);
      ::waitpid(child_.pid, nullptr, 0);
    }
    CloseStdin();
    for (int fd : {child_.stdout_fd, child_.stderr_fd})
      if (fd >= 0) ::close(fd);
  }

  void CloseStdin() {
    if (child_.stdin_fd >= 0) ::close(child_.stdin_fd);
    child_.stdin_fd = -1;
  }

  // Reads until stdout holds `text` or `timeout` passes.
  bool WaitFor(const std::string& text, milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (out.find(text) == std::string::npos && Clock::now() < deadline) Read(50);
    return out.find(text) != std::string::npos;
  }

  // Waits for the script to exit (at most `timeout`); returns its exit code, or -1.
  int Wait(milliseconds timeout = milliseconds(10000)) {
    const auto deadline = Clock::now() + timeout;
    int status = 0;
    while (Clock::now() < deadline) {
      Read(20);
      if (::waitpid(child_.pid, &status, WNOHANG) == child_.pid) {
        reaped_ = true;
        Read(0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

  pid_t pid() const { return child_.pid; }
  std::string out, err;

 private:
  void Read(int timeout_ms) {
    pollfd fds[2] = {{child_.stdout_fd, POLLIN, 0}, {child_.stderr_fd, POLLIN, 0}};
    if (::poll(fds, 2, timeout_ms) <= 0) return;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n > 0) (i == 0 ? out : err).append(buf, static_cast<size_t>(n));
    }
  }

  SpawnedRank child_;
  bool reaped_ = false;
};

bool Gone(pid_t pid, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (::kill(pid, 0) != 0) return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return false;
}

TEST(RemoteScript, PrintsTheMarkerFirstAndReturnsTheExitCode) {
  Script s({{"HVD_RANK", "3"}}, {"sh", "-c", "echo rank=$HVD_RANK cwd=$(pwd); exit 7"});
  EXPECT_EQ(s.Wait(), 7) << s.err;
  EXPECT_EQ(s.out.rfind(std::string(kRemoteStartedMarker) + " ", 0), 0u) << s.out;
  EXPECT_THAT(s.out, HasSubstr("\nrank=3 cwd=/tmp\n"));
  EXPECT_EQ(s.err, "");
}

TEST(RemoteScript, PassesArgumentsAndValuesVerbatim) {
  const std::string tricky = "it's \"quoted\" $HOME `date` \\n ; & | * ~";
  Script s({{"TRICKY", tricky}},
           {"sh", "-c", "printf '%s|%s|%s\\n' \"$TRICKY\" \"$1\" \"$2\"", "sh", tricky, ""});
  EXPECT_EQ(s.Wait(), 0) << s.err;
  EXPECT_THAT(s.out, HasSubstr("\n" + tricky + "|" + tricky + "|\n"));
}

TEST(RemoteScript, ASignalledRankExitsWith128PlusTheSignal) {
  Script s({}, {"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(s.Wait(), 128 + 9);
  EXPECT_EQ(s.err, "");  // The script does not report the death itself.
}

TEST(RemoteScript, ClosingStdinTerminatesTheRank) {
  Script s({}, {"sh", "-c", "echo pid=$$; exec sleep 60"});
  ASSERT_TRUE(s.WaitFor("pid=", milliseconds(5000))) << s.out << s.err;
  const pid_t rank = std::stoi(s.out.substr(s.out.find("pid=") + 4));
  const auto closed = Clock::now();
  s.CloseStdin();
  EXPECT_EQ(s.Wait(), 128 + SIGTERM);
  EXPECT_LT(SecondsSince(closed), 3.0);
  EXPECT_TRUE(Gone(rank, milliseconds(2000)));
}

TEST(RemoteScript, ARankIgnoringSigtermIsKilledAfterTheGracePeriod) {
  Script s({}, {"sh", "-c", "trap '' TERM; echo pid=$$; sleep 60; echo survived"}, 0.5);
  ASSERT_TRUE(s.WaitFor("pid=", milliseconds(5000))) << s.out << s.err;
  const pid_t rank = std::stoi(s.out.substr(s.out.find("pid=") + 4));
  const auto closed = Clock::now();
  s.CloseStdin();
  EXPECT_NE(s.Wait(), 0);
  const double took = SecondsSince(closed);
  EXPECT_GT(took, 0.4);
  EXPECT_LT(took, 4.0);
  EXPECT_TRUE(Gone(rank, milliseconds(2000)));
  EXPECT_THAT(s.out, ::testing::Not(HasSubstr("survived")));
}

TEST(RemoteScript, WhatTheRankLeavesBehindIsTerminated) {
  Script s({}, {"sh", "-c", "sleep 60 & echo left=$!"});
  EXPECT_EQ(s.Wait(), 0) << s.err;
  ASSERT_THAT(s.out, HasSubstr("left="));
  const pid_t left = std::stoi(s.out.substr(s.out.find("left=") + 5));
  EXPECT_TRUE(Gone(left, milliseconds(3000)));
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
