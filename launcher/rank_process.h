// RankProcess: one rank of a job as dprun supervises it, from its spec to its exit.
//
// SetUpJob (job_setup.h) decides what each rank is (a RankSpec) and what every rank
// runs (a RankCommand); SpawnRank starts one rank, on this machine (local_spawner.h) or
// over ssh (remote_spawner.h), and attaches its output streams (rank_output.h). The
// supervisor (supervisor.h) owns the RankProcesses and changes their state; a rank is
// pending until spawned, then running until reaped.
//
// A remote rank is "logging in" from its ssh's start until the remote script's start
// marker arrives. dprun keeps at most kMaxStartingSshPerHost logins to one host in
// progress (RanksToSpawn), so a host with many slots does not hit sshd's MaxStartups
// limit, which drops connections beyond 10 unauthenticated ones.
#ifndef HVD_LAUNCHER_RANK_PROCESS_H_
#define HVD_LAUNCHER_RANK_PROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/rank_output.h"
#include "launcher/rank_placement.h"
#include "launcher/remote_spawner.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

// What one rank is.
struct RankSpec {
  RankPlacement placement;  // placement.env: every variable the rank gets.
  bool remote = false;      // Runs over ssh.
  std::string host;         // Names the rank's host in messages; empty in a job without -H.
};

// What every rank of the job runs, and how.
struct RankCommand {
  std::vector<std::string> argv;  // The command and its arguments.
  std::string exe;                // argv[0], resolved (ResolveCommand), for local ranks.
  SshOptions ssh;                 // For remote ranks.
  std::string cwd;                // Where remote ranks start: dprun's working directory.
  double grace_period_s = 5;      // The remote script's wait between SIGTERM and SIGKILL.
  // --output-filename: each rank's lines also go to <output_dir>/rank.<r>/stdout and
  // stderr, r zero-padded to the digits of the job's last rank (horovodrun's layout).
  std::string output_dir;
  int rank_digits = 1;
  // --prefix-output-with-timestamp: each relayed line starts with the local time.
  bool stamp_lines = false;
};

// "<dir>/rank.<r>" with r padded to `digits` (RankCommand::output_dir). Pure.
std::string RankOutputDir(const std::string& dir, int rank, int digits);

struct RankProcess {
  RankSpec spec;
  bool pending = true;   // Not spawned yet.
  pid_t pid = -1;        // Also its process group; remote: ssh's. -1 until spawned.
  bool running = false;  // Spawned and not reaped yet.
  RankOutput out, err;
  int stdin_fd = -1;  // Remote: the write end of ssh's stdin; closing it ends the rank.

  int rank() const { return spec.placement.rank; }

  // "rank 2 (pid 123)"; in a job with -H, "rank 2 (pid 123 on hostB)", where a remote
  // rank's pid is the remote script's, and is left out until the script has started.
  std::string Name() const;

  // A remote rank whose ssh runs but whose script has not printed its start marker.
  bool LoggingIn() const { return spec.remote && running && out.remote_pid() < 0; }

  // Whether anything is left in its process group (false before it was spawned).
  bool GroupAlive() const;

  // Closes ssh's stdin, if open; for a remote rank, that is its SIGTERM.
  void CloseStdin();

  // Closes stdin and both output streams, writing what they hold.
  void CloseAll();
};

// Starts `rank` with `command`, its signal mask set to `child_mask`, its stdout lines
// relayed to `out_fd` and its stderr lines to `err_fd` (and to their files under
// command.output_dir, truncated, if set); marks it running. Returns kInternal
// (pipes, fork, exec, a file that cannot be made) and leaves the rank not running if
// it cannot start.
Status SpawnRank(const RankCommand& command, const sigset_t& child_mask, int out_fd, int err_fd,
                 RankProcess* rank);

// The indices of the pending ranks to spawn now, in rank order: every local one, and a
// remote one while fewer than kMaxStartingSshPerHost logins to its host are in
// progress, counting those chosen before it. Pure.
std::vector<size_t> RanksToSpawn(const std::vector<RankProcess>& ranks);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_RANK_PROCESS_H_
