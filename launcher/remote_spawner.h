// RemoteSpawner: starts one rank on another host, over ssh.
//
// dprun runs one `ssh host 'exec sh -c SCRIPT'` per remote rank and relays its output
// like a local rank's. ssh runs in BatchMode (no password or passphrase prompts, so an
// unreachable or misconfigured host fails within --ssh-connect-timeout instead of
// waiting for input) with ServerAlive probes, so a host that vanishes mid-run ends its
// ssh within kServerAliveSeconds * kServerAliveCount seconds.
//
// The remote script (POSIX sh; see RemoteScript) cds to dprun's working directory,
// prints kRemoteStartedMarker and its pid as its first stdout line (dprun strips it: a
// rank whose ssh exits 255 before the marker never started, so its host could not be
// reached), runs the command with the rank's variables, and keeps a watcher on its
// stdin, which is a pipe from dprun. No remote process is left behind on any path:
//   - teardown: dprun closes the pipe; the watcher sees EOF and sends SIGTERM to the
//     remote process group, then SIGKILL after the grace period;
//   - dprun dies: its ssh gets SIGKILL (PR_SET_PDEATHSIG), the connection closes, and
//     the watcher sees EOF the same way;
//   - the rank exits: the script sends SIGTERM to what the rank left in its process
//     group and exits with the rank's code (128+N if a signal killed it), which ssh
//     returns to dprun.
// (ssh -tt would make sshd hang up the remote side instead, but needs a terminal and
// mixes stderr into stdout.)
#ifndef HVD_LAUNCHER_REMOTE_SPAWNER_H_
#define HVD_LAUNCHER_REMOTE_SPAWNER_H_

#include <signal.h>

#include <string>
#include <utility>
#include <vector>

#include "launcher/local_spawner.h"
#include "launcher/rank_placement.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

constexpr char kRemoteStartedMarker[] = "dprun-remote-started";
constexpr int kServerAliveSeconds = 5;
constexpr int kServerAliveCount = 3;
// dprun has at most this many ssh logins to one host in progress at once: sshd's default
// MaxStartups (10:30:100) starts dropping unauthenticated connections past 10.
constexpr int kMaxStartingSshPerHost = 8;

struct SshOptions {
  std::string ssh_path = "ssh";
  int port = 0;                      // 0: ssh's default.
  std::string identity_file;         // Empty: ssh's default keys.
  std::vector<std::string> options;  // Each passed as -o OPT, before dprun's own.
  int connect_timeout_s = 10;
};

// `s` quoted for a POSIX shell: 'it'\''s'.
std::string ShellQuote(const std::string& s);

// The script that runs one rank on the remote host (see the header comment).
std::string RemoteScript(const std::vector<std::pair<std::string, std::string>>& env,
                         const std::string& cwd, const std::vector<std::string>& command,
                         double grace_period_s);

// ssh's argv (argv[0] is ssh_path) to run `script` on `host`.
std::vector<std::string> SshArgv(const SshOptions& ssh, const std::string& host,
                                 const std::string& script);

// Starts `placement` on placement.host: ssh in its own process group, with dprun's
// environment, a stdin pipe (SpawnedRank::stdin_fd; close it to tear the rank down)
// and stdout/stderr pipes. `env` is every variable the rank gets.
Status SpawnRemoteRank(const RankPlacement& placement,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       const SshOptions& ssh, const std::string& cwd,
                       const std::vector<std::string>& command, double grace_period_s,
                       const sigset_t& child_mask, SpawnedRank* out);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_REMOTE_SPAWNER_H_
