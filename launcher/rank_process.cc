#include "launcher/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <utility>

#include "launcher/local_spawner.h"

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

std::string RankOutputDir(const std::string& dir, int rank, int digits) {
  std::string r = std::to_string(rank);
  if (static_cast<int>(r.size()) < digits) r.insert(0, digits - r.size(), '0');
  return dir + "/rank." + r;
}

namespace {

// The rank's two output files (or -1s without --output-filename).
Status OpenOutputFiles(const RankCommand& command, int rank, int* out_file, int* err_file) {
  *out_file = *err_file = -1;
  if (command.output_dir.empty()) return Status::OK();
  const std::string dir = RankOutputDir(command.output_dir, rank, command.rank_digits);
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::Internal("--output-filename: cannot create " + dir + ": " + ErrnoText(errno));
  for (auto [name, fd] : {std::pair<const char*, int*>{"stdout", out_file}, {"stderr", err_file}}) {
    const std::string path = dir + "/" + name;
    *fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*fd < 0) {
      const std::string why = ErrnoText(errno);
      if (*out_file >= 0) ::close(*out_file);
      *out_file = *err_file = -1;
      return Status::Internal("--output-filename: cannot open " + path + ": " + why);
    }
  }
  return Status::OK();
}

}  // namespace

Status SpawnRank(const RankCommand& command, const sigset_t& child_mask, int out_fd, int err_fd,
                 RankProcess* rank) {
  int out_file = -1, err_file = -1;
  HVD_RETURN_IF_ERROR(OpenOutputFiles(command, rank->rank(), &out_file, &err_file));
  SpawnedRank child;
  const RankPlacement& p = rank->spec.placement;
  const Status s = rank->spec.remote
                       ? SpawnRemoteRank(p, p.env, command.ssh, command.cwd, command.argv,
                                         command.grace_period_s, child_mask, &child)
                       : SpawnLocalRank(p, command.exe, command.argv, child_mask, &child);
  if (!s.ok()) {
    if (out_file >= 0) ::close(out_file);
    if (err_file >= 0) ::close(err_file);
    return s;
  }
  rank->pid = child.pid;
  rank->stdin_fd = child.stdin_fd;
  rank->running = true;
  const std::string tag = "[" + std::to_string(rank->rank()) + "]";
  rank->out.Open(child.stdout_fd, tag + "<stdout>:", out_fd, rank->spec.remote, out_file,
                 command.stamp_lines);
  rank->err.Open(child.stderr_fd, tag + "<stderr>:", err_fd, false, err_file, command.stamp_lines);
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
