#include "launcher/launcher.h"

#include <fcntl.h>
#include <sys/prctl.h>

#include <cstdlib>

#include <string>
#include <utility>
#include <vector>

#include "launcher/host_discovery.h"
#include "launcher/host_list.h"
#include "launcher/job_report.h"
#include "launcher/job_setup.h"
#include "launcher/prefixed_line_writer.h"
#include "launcher/signal_scope.h"
#include "launcher/supervisor.h"

namespace hvd {
namespace launcher {

Launcher::Launcher(LauncherOptions options, int out_fd, int err_fd)
    : options_(std::move(options)), out_fd_(out_fd), err_fd_(err_fd) {}

Launcher::~Launcher() = default;

int Launcher::Run() {
  const Reporter reporter(err_fd_, options_.verbose);
  if (options_.num_ranks < 1 || options_.command.empty()) {
    reporter.Message("nothing to run");
    return 2;
  }
  for (const std::string& notice : options_.notices) reporter.Message(notice);
  // Before the signals are taken over: an interrupt while waiting for hosts ends dprun,
  // which has started nothing yet.
  if (!options_.host_discovery_script.empty() && options_.hosts.empty()) {
    const Status found = DiscoverFirstHosts(
        options_.start_timeout_s > 0 ? options_.start_timeout_s : kFirstHostsWaitS, &options_);
    if (!found.ok()) {
      reporter.Message(found.message());
      return 1;
    }
    reporter.Verbose("host discovery: starting " + std::to_string(options_.num_ranks) +
                     " rank(s) on " + FormatHostList(options_.hosts));
  }
  // Declared first, so it outlives the store server's thread.
  SignalScope signals;
  Status s = signals.Init();
  if (!s.ok()) {
    reporter.Message(s.message());
    return 1;
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  JobSetup job;
  int exit_code = 1;
  s = SetUpJob(options_, reporter, &job, &exit_code);
  if (!s.ok()) {
    reporter.Message(s.message());
    return exit_code;
  }
  Supervisor supervisor(options_, std::move(job.ranks), std::move(job.command),
                        job.local_address, signals, *job.store, out_fd_, reporter);
  exit_code = supervisor.Run();
  if (options_.straggler_report) PrintStragglerReport(*job.store, reporter);
  job.server->Stop();
  return exit_code;
}

int DprunMain(int argc, char** argv) {
  // Make sure fds 0-2 exist, so no pipe or socket dprun opens lands on them.
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  LauncherOptions options;
  const Status s = ParseLauncherArgs(args, &options);
  if (!s.ok()) {
    WriteFully(2, "dprun: " + s.message() + "\n\n" + LauncherUsage());
    return 2;
  }
  if (options.help || options.version || options.check_build) {
    WriteFully(1, options.help      ? LauncherUsage()
                  : options.version ? LauncherVersion()
                                    : LauncherBuildCheck());
    return 0;
  }
  // A worker id says "this process is a worker of an elastic job": dprun started by
  // one (hvd.run in an elastic worker) must not hand it to its own ranks, inherited or
  // forwarded, or their hvd_init would wait for a generation that never comes. The
  // outer job's other per-rank variables (rank, store, ...) the placement replaces.
  ::unsetenv("HVD_ELASTIC_ID");
  return Launcher(std::move(options)).Run();
}

}  // namespace launcher
}  // namespace hvd
