// SigpipeGuard (runtime/common/sigpipe_guard.h): a write to a closed socket fails with
// EPIPE instead of killing the process, in the guarded thread and in the threads it
// starts, and nothing is left pending once the guard is gone.
#include "runtime/common/sigpipe_guard.h"

#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include <gtest/gtest.h>

namespace hvd {
namespace {

// Writes to a socket whose peer is closed; returns the write's errno (0 if it worked).
int WriteToClosedPeer() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return -1;
  close(fds[1]);
  const char byte = 1;
  const ssize_t n = write(fds[0], &byte, 1);
  const int err = n < 0 ? errno : 0;
  close(fds[0]);
  return err;
}

bool SigpipePending() {
  sigset_t pending;
  sigpending(&pending);
  return sigismember(&pending, SIGPIPE) == 1;
}

TEST(SigpipeGuard, AWriteToADeadPeerFailsWithEpipeInsteadOfKillingTheProcess) {
  // The default action, as in a C or C++ program (the test would die without the guard).
  struct sigaction dfl = {}, old = {};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &dfl, &old), 0);
  {
    SigpipeGuard guard;
    EXPECT_EQ(WriteToClosedPeer(), EPIPE);
    int in_thread = 0;
    std::thread started([&] { in_thread = WriteToClosedPeer(); });  // inherits the block
    started.join();
    EXPECT_EQ(in_thread, EPIPE);
  }
  EXPECT_FALSE(SigpipePending());  // taken, not delivered later
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_FALSE(sigismember(&mask, SIGPIPE)) << "the caller's mask is restored";
  sigaction(SIGPIPE, &old, nullptr);
}

TEST(SigpipeGuard, ACallerThatBlockedSigpipeItselfKeepsItBlocked) {
  sigset_t pipe, before;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe, &before), 0);
  { SigpipeGuard guard; }
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  EXPECT_TRUE(sigismember(&mask, SIGPIPE));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

}  // namespace
}  // namespace hvd
