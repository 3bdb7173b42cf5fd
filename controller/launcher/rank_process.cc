#include "controller/launcher/rank_process.h"

#include <signal.h>
#include <unistd.h>

#include <map>

#include "controller/launcher/local_spawner.h"

namespace hvd {
namespace launcher {

std::string RankProcess::Name() const {
  const std::string name = "rank " + std::to_string(rank());
  if (spec.host.empty()) return name + " (pid " + std::to_string(pid) + ")";
  const pid_t shown = spec.remote ? out.remote_pid() : pid;
  return name + " (" + (shown > 0 ? "pid " + std::to_string(shown) + " " : "") + "on " + spec.host +
         ")";
}

bool RankProcess::GroupAlive() const { return pid > 0 && ::kill(-pid, 0) == 0; }

void RankProcess::CloseStdin() {
  if (stdin_fd < 0) return;
  ::close(stdin_fd);
  stdin_fd = -1;
}

void RankProcess::CloseAll() {
  out.Close();
  err.Close();
  CloseStdin();
}

Status SpawnRank(const RankCommand& command, const sigset_t& child_mask, int out_fd, int err_fd,
                 RankProcess* rank) {
  SpawnedRank child;
  const RankPlacement& p = rank->spec.placement;
  HVD_RETURN_IF_ERROR(rank->spec.remote
                          ? SpawnRemoteRank(p, p.env, command.ssh, command.cwd, command.argv,
                                            command.grace_period_s, child_mask, &child)
                          : SpawnLocalRank(p, command.exe, command.argv, child_mask, &child));
  rank->pid = child.pid;
  rank->stdin_fd = child.stdin_fd;
  rank->running = true;
  const std::string tag = "[" + std::to_string(rank->rank()) + "]";
  rank->out.Open(child.stdout_fd, tag + "<stdout>:", out_fd, rank->spec.remote);
  rank->err.Open(child.stderr_fd, tag + "<stderr>:", err_fd, false);
  return Status::OK();
}

std::vector<size_t> RanksToSpawn(const std::vector<RankProcess>& ranks) {
  std::map<std::string, int> logging_in;
  for (const RankProcess& r : ranks)
    if (r.LoggingIn()) ++logging_in[r.spec.placement.host];
  std::vector<size_t> chosen;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const RankProcess& r = ranks[i];
    if (!r.pending) continue;
    if (r.spec.remote) {
      int& n = logging_in[r.spec.placement.host];
      if (n >= kMaxStartingSshPerHost) continue;
      ++n;
    }
    chosen.push_back(i);
  }
  return chosen;
}

}  // namespace launcher
}  // namespace hvd
