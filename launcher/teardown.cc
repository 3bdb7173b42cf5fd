#include "launcher/teardown.h"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>

namespace hvd {
namespace launcher {

Teardown::Teardown(double grace_period_s)
    : grace_(std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(std::max(grace_period_s, 0.0)))),
      grace_enabled_(grace_period_s > 0) {}

int Teardown::Fail(int exit_code, bool let_others_report, Clock::time_point now) {
  if (!cause_recorded_) {
    cause_recorded_ = true;
    exit_code_ = exit_code;
  }
  if (let_others_report && phase_ == Phase::kRunning) {
    phase_ = Phase::kReporting;
    report_deadline_ = now + kReportWindow;
    return 0;
  }
  return Terminate(now);
}

int Teardown::Terminate(Clock::time_point now) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kReporting) return 0;
  if (!grace_enabled_) return Kill(now);
  phase_ = Phase::kTerminating;
  kill_deadline_ = now + grace_;
  return SIGTERM;
}

int Teardown::Kill(Clock::time_point now) {
  if (phase_ == Phase::kKilling) return 0;
  phase_ = Phase::kKilling;
  give_up_deadline_ = now + kGiveUpAfterKill;
  return SIGKILL;
}

Teardown::Due Teardown::Tick(Clock::time_point now, bool any_running) {
  Due due;
  if (phase_ == Phase::kReporting && (now >= report_deadline_ || !any_running))
    due.signal = Terminate(now);
  if (phase_ == Phase::kTerminating && now >= kill_deadline_) {
    due.grace_over = true;
    Kill(now);
  }
  if (phase_ == Phase::kKilling) {
    due.signal = SIGKILL;
    if (now >= give_up_deadline_) given_up_ = due.give_up = true;
  }
  return due;
}

ExitVerdict Teardown::Judge(int wait_status, bool remote_not_started) const {
  const bool exited = WIFEXITED(wait_status);
  // ssh exits 255 for its own failures; before the start marker that means the remote
  // script never ran.
  if (!cause_recorded_ && remote_not_started && exited && WEXITSTATUS(wait_status) == 255)
    return ExitVerdict::kUnreachable;
  if (exited && WEXITSTATUS(wait_status) == 0) return ExitVerdict::kSucceeded;
  if (!cause_recorded_) return ExitVerdict::kCause;
  if (phase_ == Phase::kReporting) return ExitVerdict::kAfterFailure;
  return ExitVerdict::kTerminated;
}

Teardown::Clock::time_point Teardown::NextDeadline() const {
  if (phase_ == Phase::kReporting) return report_deadline_;
  if (phase_ == Phase::kTerminating) return kill_deadline_;
  return Clock::time_point::max();
}

}  // namespace launcher
}  // namespace hvd
