// SignalScope: dprun's signals, read from a signalfd for the life of one job.
//
// Init() blocks SIGINT, SIGTERM and SIGCHLD and delivers them through fd(); the
// destructor restores the mask and dispositions. Ignored dispositions are reset first:
// an ignored signal is discarded even while blocked, and an ignored SIGCHLD would make
// the kernel reap the ranks behind dprun's back. SIGPIPE is ignored meanwhile, so a
// write to a closed stdout fails with EPIPE instead of killing the launcher.
//
// Call Init() before any thread starts, so that no other thread takes the signals.
#ifndef HVD_LAUNCHER_SIGNAL_SCOPE_H_
#define HVD_LAUNCHER_SIGNAL_SCOPE_H_

#include <signal.h>

#include <vector>

#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

class SignalScope {
 public:
  SignalScope() = default;
  ~SignalScope();
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  Status Init();

  int fd() const { return fd_; }
  // The mask dprun started with; ranks get it back.
  const sigset_t& original_mask() const { return old_mask_; }

  // The signals that arrived since the last call.
  std::vector<int> Drain();

 private:
  bool installed_ = false;
  int fd_ = -1;
  sigset_t old_mask_;
  struct sigaction old_int_, old_term_, old_chld_, old_pipe_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_SIGNAL_SCOPE_H_
