// LocalSpawner: starts one rank as a child process on this host.
//
// Each rank runs in its own process group (so dprun can signal the rank and everything
// it started with one kill(-pgid)), with stdin from /dev/null (or a pipe, for the ssh
// that runs a remote rank) and stdout/stderr into pipes that dprun reads. The child gets SIGKILL if
// dprun dies (PR_SET_PDEATHSIG), so a crashed launcher does not leave ranks behind.
//
// Everything the child needs is built before fork(), so the child runs only
// async-signal-safe calls between fork and exec: dprun has threads (the store server).
#ifndef HVD_LAUNCHER_LOCAL_SPAWNER_H_
#define HVD_LAUNCHER_LOCAL_SPAWNER_H_

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/rank_placement.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

struct SpawnedRank {
  pid_t pid = -1;      // Also the process group id.
  int stdout_fd = -1;  // Read ends, non-blocking, close-on-exec; the caller closes them.
  int stderr_fd = -1;
  int stdin_fd = -1;  // Write end of the child's stdin if requested, else -1.
};

// One child process to start.
struct SpawnRequest {
  std::string label;     // Names the child in errors, e.g. "rank 3".
  std::string exe_path;  // Already resolved (ResolveCommand).
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value" entries: the child's whole environment.
  bool stdin_pipe = false;       // Give the child a pipe as stdin instead of /dev/null.
};

// Finds `name` the way execvp would: as a path if it contains '/', else on $PATH.
// Returns kInvalidArgument "command not found" if there is no executable file.
Status ResolveCommand(const std::string& name, std::string* path);

// dprun's own environment with `vars` added, replacing any of the same name.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& vars);

// Forks and execs `request` in its own process group. The child's signal mask is set to
// `child_mask` and SIGPIPE, SIGINT and SIGTERM are reset to their defaults. Returns
// kInternal if fork or exec failed; on exec failure the child has already been reaped.
Status SpawnProcess(const SpawnRequest& request, const sigset_t& child_mask, SpawnedRank* out);

// Forks and execs `exe_path` with `argv` for `placement`, whose variables are added to
// (or replace those in) dprun's own environment. The child's signal mask is set to
// `child_mask` and SIGPIPE, SIGINT and SIGTERM are reset to their defaults. Returns
// kInternal if fork or exec failed; on exec failure the child has already been reaped.
Status SpawnLocalRank(const RankPlacement& placement, const std::string& exe_path,
                      const std::vector<std::string>& argv, const sigset_t& child_mask,
                      SpawnedRank* out);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_LOCAL_SPAWNER_H_
