#include "launcher/signal_scope.h"

#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>

namespace hvd {
namespace launcher {

SignalScope::~SignalScope() {
  if (!installed_) return;
  Drain();
  ::close(fd_);
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::sigaction(SIGPIPE, &old_pipe_, nullptr);
  ::pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

Status SignalScope::Init() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  if (::pthread_sigmask(SIG_BLOCK, &set, &old_mask_) != 0)
    return Status::Internal("cannot block signals");
  struct sigaction dfl {
  }, ign{};
  dfl.sa_handler = SIG_DFL;
  ign.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &dfl, &old_int_);
  ::sigaction(SIGTERM, &dfl, &old_term_);
  ::sigaction(SIGCHLD, &dfl, &old_chld_);
  ::sigaction(SIGPIPE, &ign, &old_pipe_);
  installed_ = true;
  fd_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) return Status::Internal("signalfd failed: " + ErrnoText(errno));
  return Status::OK();
}

std::vector<int> SignalScope::Drain() {
  std::vector<int> sigs;
  signalfd_siginfo info;
  for (int i = 0; i < 64 && ::read(fd_, &info, sizeof(info)) == sizeof(info); ++i)
    sigs.push_back(static_cast<int>(info.ssi_signo));
  return sigs;
}

}  // namespace launcher
}  // namespace hvd
