// SigpipeGuard: the runtime's socket writes never kill the process with SIGPIPE.
//
// Gloo writes to its peers' sockets without MSG_NOSIGNAL, so a write to a peer that
// has just died raises SIGPIPE in the writing thread, and a program that keeps the
// default action (any C or C++ program; Python ignores it) dies of "Broken pipe"
// instead of getting the error that names the dead rank. The runtime does not change
// the process's disposition; it blocks SIGPIPE in the threads that write: a blocked,
// thread-directed SIGPIPE stays pending and the write fails with EPIPE.
//
// While a guard lives, the calling thread has SIGPIPE blocked, and every thread it
// starts (the loop, the heartbeat, Gloo's own) inherits that for life. On
// destruction the guard takes any SIGPIPE left pending on the calling thread (a
// write it made meanwhile) and restores its mask. Not shared between threads.
#ifndef HVD_RUNTIME_COMMON_SIGPIPE_GUARD_H_
#define HVD_RUNTIME_COMMON_SIGPIPE_GUARD_H_

#include <signal.h>
#include <time.h>

namespace hvd {

class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, &old_);
  }
  ~SigpipeGuard() {
    if (!sigismember(&old_, SIGPIPE)) {
      sigset_t pipe;
      sigemptyset(&pipe);
      sigaddset(&pipe, SIGPIPE);
      const timespec now = {0, 0};
      while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  sigset_t old_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_SIGPIPE_GUARD_H_
