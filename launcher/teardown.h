// Teardown: how a job ends once it must: which failure is its cause, and when the
// ranks' process groups get SIGTERM and SIGKILL.
//
// The first failure is the cause: it alone decides dprun's exit status, and later
// failures are reported as its consequences. The job then goes through these phases:
//   kRunning      until the job must end.
//   kReporting    after a rank failed: the others get kReportWindow to report it (their
//                 runtimes read the cause from the store) and exit on their own; it ends
//                 early once no rank runs.
//   kTerminating  SIGTERM has gone to every rank; SIGKILL follows after the grace
//                 period (at once, with no grace period).
//   kKilling      SIGKILL has gone to every rank, and goes again on every Tick, for
//                 anything forked since; kGiveUpAfterKill later, dprun gives up on
//                 whatever survives.
//
// Teardown is a pure state machine over time: every call takes `now` and returns the
// signal the caller must send every rank (0 for none); it sends nothing itself.
// Judge() says what one rank's exit means in the current state. Not thread-safe.
#ifndef HVD_LAUNCHER_TEARDOWN_H_
#define HVD_LAUNCHER_TEARDOWN_H_

#include <chrono>

namespace hvd {
namespace launcher {

// After a rank dies, how long the others get to report it and exit before SIGTERM.
constexpr std::chrono::seconds kReportWindow{3};
// How long to wait for processes to vanish after SIGKILL before giving up on them.
constexpr std::chrono::seconds kGiveUpAfterKill{10};

// What one rank's exit means for the job.
enum class ExitVerdict {
  kSucceeded,     // Exit code 0: nothing to report.
  kUnreachable,   // The first failure, and a remote rank's ssh exited 255 before the
                  // rank started: its host could not be reached. The job fails with 1.
  kCause,         // The first failure: the job ends, with the rank's exit status.
  kAfterFailure,  // A failure during the report window, after the cause.
  kTerminated,    // Ended by dprun's teardown.
};

class Teardown {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kRunning, kReporting, kTerminating, kKilling };

  // What fell due at a Tick.
  struct Due {
    int signal = 0;           // To send every rank now: 0, SIGTERM or SIGKILL.
    bool grace_over = false;  // The grace period just ended; `signal` is SIGKILL.
    bool give_up = false;     // kGiveUpAfterKill has passed since SIGKILL: stop waiting.
  };

  // `grace_period_s`: the time between SIGTERM and SIGKILL; 0 or less sends SIGKILL
  // at once.
  explicit Teardown(double grace_period_s);

  // Records a failure that ends the job with `exit_code` (kept only if it is the first)
  // and starts the teardown: with `let_others_report` while the job runs, the report
  // window; otherwise Terminate().
  int Fail(int exit_code, bool let_others_report, Clock::time_point now);

  // Starts termination unless it has started: SIGTERM (then kTerminating), or SIGKILL
  // with no grace period (then kKilling). From kTerminating or kKilling, returns 0.
  int Terminate(Clock::time_point now);

  // Moves to kKilling: SIGKILL, or 0 if already there.
  int Kill(Clock::time_point now);

  // What is due at `now`: the end of the report window (or of every rank, when
  // `any_running` is false), of the grace period, and the repeated SIGKILL.
  Due Tick(Clock::time_point now, bool any_running);

  // What one rank's exit (its waitpid status) means now. `remote_not_started`: the rank
  // is remote and its script's start marker has not arrived.
  ExitVerdict Judge(int wait_status, bool remote_not_started) const;

  // The next deadline of the report window or the grace period; Clock's max when none.
  Clock::time_point NextDeadline() const;

  Phase phase() const { return phase_; }
  bool cause_recorded() const { return cause_recorded_; }
  // The first failure's exit code; 0 while there is none.
  int exit_code() const { return exit_code_; }
  bool given_up() const { return given_up_; }

 private:
  Clock::duration grace_;
  bool grace_enabled_;
  Phase phase_ = Phase::kRunning;
  bool cause_recorded_ = false;
  int exit_code_ = 0;
  bool given_up_ = false;
  Clock::time_point report_deadline_, kill_deadline_, give_up_deadline_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_TEARDOWN_H_
