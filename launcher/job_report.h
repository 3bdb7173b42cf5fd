// Reporter: what dprun says about the job itself, on its stderr.
//
// Every line dprun writes of its own starts "dprun: " and goes to the launcher's
// err_fd, interleaved whole with the ranks' relayed stderr lines (all writes happen on
// the supervising thread; see prefixed_line_writer.h). Verbose lines (--verbose) are
// written only when asked for. The texts that need no I/O, the start timeout's verdict
// and the straggler report split into lines, are pure functions, kept apart so a test
// can check them without a job.
//
// Not thread-safe: used by the launcher's main thread only (the store server's log
// callback writes to the fd directly; see job_setup.cc).
#ifndef HVD_LAUNCHER_JOB_REPORT_H_
#define HVD_LAUNCHER_JOB_REPORT_H_

#include <chrono>
#include <string>
#include <vector>

#include "runtime/store/store.h"

namespace hvd {
namespace launcher {

// How long to wait for rank 0's straggler report once every rank has exited.
constexpr std::chrono::milliseconds kStragglerReportWait{500};

class Reporter {
 public:
  Reporter(int err_fd, bool verbose) : err_fd_(err_fd), verbose_(verbose) {}

  // Writes "dprun: <text>\n".
  void Message(const std::string& text) const;
  // Message(text), only with --verbose.
  void Verbose(const std::string& text) const;

  bool verbose() const { return verbose_; }
  int fd() const { return err_fd_; }

 private:
  int err_fd_;
  bool verbose_;
};

// "rank 2 did not start within 1 s", or "ranks 0, 1 did not start within 1.5 s" for
// several. `ranks` must not be empty.
std::string NotStartedMessage(const std::vector<int>& ranks, double timeout_s);

// The lines of a straggler report as rank 0 stored it; empty for an empty report.
std::vector<std::string> ReportLines(const std::string& report);

// Prints rank 0's straggler report (store key keys::kStragglerReport), one message per
// line, waiting up to kStragglerReportWait for it; says so if there is none.
void PrintStragglerReport(Store& store, const Reporter& reporter);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_REPORT_H_
