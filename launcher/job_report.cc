#include "launcher/job_report.h"

#include <cstdio>
#include <sstream>

#include "launcher/prefixed_line_writer.h"
#include "runtime/common/job_keys.h"

namespace hvd {
namespace launcher {

void Reporter::Message(const std::string& text) const {
  WriteFully(err_fd_, "dprun: " + text + "\n");
}

void Reporter::Verbose(const std::string& text) const {
  if (verbose_) Message(text);
}

std::string NotStartedMessage(const std::vector<int>& ranks, double timeout_s) {
  std::string list;
  for (int rank : ranks) list += (list.empty() ? "" : ", ") + std::to_string(rank);
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", timeout_s);
  return (ranks.size() == 1 ? "rank " : "ranks ") + list + " did not start within " + seconds +
         " s";
}

std::vector<std::string> ReportLines(const std::string& report) {
  std::vector<std::string> lines;
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

void PrintStragglerReport(Store& store, const Reporter& reporter) {
  std::string report;
  if (!store.Get(keys::kStragglerReport, kStragglerReportWait, &report).ok() || report.empty())
    return reporter.Message("no straggler report: rank 0 leaves it in hvd_shutdown, and did not");
  for (const std::string& line : ReportLines(report)) reporter.Message(line);
}

}  // namespace launcher
}  // namespace hvd
