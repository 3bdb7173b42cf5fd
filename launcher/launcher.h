// Launcher: runs one dprun job, on this host or across -H hosts, and supervises it
// until every rank is gone. It is the thin orchestrator of the parts below.
//
// Run() does, in order:
//   0. For an elastic job with --host-discovery-script and no -H, waits for the script
//      to list --min-np slots (at most --start-timeout) and starts on those hosts
//      (host_discovery.h), as horovodrun does.
//   1. Blocks SIGINT, SIGTERM and SIGCHLD and reads them from a signalfd (signal_scope.h,
//      before any thread starts, so no other thread takes them), and makes dprun a
//      child subreaper so processes that ranks leave behind are re-parented to it.
//   2. Sets the job up (job_setup.h): its secret, the addresses, the TcpStoreServer,
//      the ranks' placement (rank_placement.h) and environment, the resolved command.
//   3. Supervises it (supervisor.h): spawns each rank on this machine (local_spawner.h)
//      or over ssh (remote_spawner.h), relays output lines (rank_output.h), reaps, checks
//      the start timeout, and tears the job down when it must (teardown.h).
//   4. With --straggler-report, prints the report rank 0 left in the store (job_report.h).
//
// Teardown (teardown.h, supervisor.h): the first rank to exit non-zero or by a signal is
// the cause and is reported as such. dprun records it in the store under
// keys::kLauncherAbortReason (runtime/common/job_keys.h), "rank 2 (pid 41) was killed by
// signal 9 (Killed)" (exit_status.h), where the other ranks' runtimes look when they lose
// a peer, so each reports the real cause; it gives them up to 3 s to do so and exit
// (less once every rank has exited). Then dprun sends SIGTERM to every rank's process
// group, SIGKILL after the grace period, and reports later exits as consequences
// ("terminated by dprun"). For a remote rank, SIGTERM is the close of its ssh's stdin
// (the remote side then terminates the rank) and SIGKILL goes to its ssh. A remote rank
// whose ssh fails before the rank started fails the job with exit status 1, naming the
// host. A first SIGINT/SIGTERM to dprun starts the same teardown; a second one sends
// SIGKILL at once. Run() returns only after every rank is reaped, its process group is
// empty and its pipes are drained (or, if something survives SIGKILL, after a bounded
// wait).
//
// Run() owns the calling process's children while it runs: it reaps any child that
// exits. It is meant for a launcher's main thread, once per process.
#ifndef HVD_LAUNCHER_LAUNCHER_H_
#define HVD_LAUNCHER_LAUNCHER_H_

#include <memory>

#include "launcher/launcher_options.h"

namespace hvd {
namespace launcher {

class Launcher {
 public:
  // Relayed rank output and dprun's own messages go to `out_fd` (stdout lines) and
  // `err_fd` (stderr lines and every "dprun: ..." message).
  Launcher(LauncherOptions options, int out_fd = 1, int err_fd = 2);
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Runs the job to the end and returns dprun's exit status (see LauncherUsage()).
  int Run();

 private:
  LauncherOptions options_;
  int out_fd_;
  int err_fd_;
};

// dprun's main: parses argv, prints usage errors (exit 2) or help (exit 0), runs.
int DprunMain(int argc, char** argv);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_LAUNCHER_H_
