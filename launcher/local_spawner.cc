#include "launcher/local_spawner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

extern char** environ;

namespace hvd {
namespace launcher {
namespace {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs in the child between fork and exec: async-signal-safe calls only. Reports a
// failure's errno through `error_fd` and exits 127.
[[noreturn]] void ExecChild(pid_t parent, int in_fd, int out_fd, int err_fd, int error_fd,
                            const sigset_t& mask, const char* path, char** argv, char** envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // dprun died before prctl took effect.
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
    const int err = errno;
    [[maybe_unused]] ssize_t n = ::write(error_fd, &err, sizeof(err));
    ::_exit(127);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigaction(SIGTERM, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execve(path, argv, envp);
  const int err = errno;
  [[maybe_unused]] ssize_t n = ::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

void CloseAll(std::initializer_list<int> fds) {
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

}  // namespace

Status ResolveCommand(const std::string& name, std::string* path) {
  if (name.empty()) return Status::InvalidArgument("command not found: ''");
  if (name.find('/') != std::string::npos) {
    if (!IsExecutableFile(name))
      return Status::InvalidArgument("command not found or not executable: " + name);
    *path = name;
    return Status::OK();
  }
  const char* env_path = std::getenv("PATH");
  const std::string dirs = env_path != nullptr ? env_path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > start ? dirs.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + name;
    if (IsExecutableFile(candidate)) {
      *path = candidate;
      return Status::OK();
    }
    start = end + 1;
  }
  return Status::InvalidArgument("command not found: " + name);
}

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& vars) {
  std::set<std::string> ours;
  for (const auto& [name, value] : vars) ours.insert(name);
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && ours.count(std::string(*e, static_cast<size_t>(eq - *e))) > 0) continue;
    env.emplace_back(*e);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

Status SpawnLocalRank(const RankPlacement& placement, const std::string& exe_path,
                      const std::vector<std::string>& argv, const sigset_t& child_mask,
                      SpawnedRank* out) {
  SpawnRequest request;
  request.label = "rank " + std::to_string(placement.rank);
  request.exe_path = exe_path;
  request.argv = argv;
  request.env = ChildEnvironment(placement.env);
  return SpawnProcess(request, child_mask, out);
}

Status SpawnProcess(const SpawnRequest& request, const sigset_t& child_mask, SpawnedRank* out) {
  std::vector<std::string> env_strings = request.env;
  std::vector<std::string> argv_strings = request.argv;
  std::vector<char*> envp = CStrings(env_strings);
  std::vector<char*> argvp = CStrings(argv_strings);
  const std::string& exe_path = request.exe_path;

  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1},
      error_pipe[2] = {-1, -1};
  bool ok = true;
  if (request.stdin_pipe) {
    ok = ::pipe2(in_pipe, O_CLOEXEC) == 0;
  } else {
    in_pipe[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    ok = in_pipe[0] >= 0;
  }
  if (!ok || ::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(error_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    CloseAll({in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1],
              error_pipe[0], error_pipe[1]});
    return Status::Internal("cannot create pipes for " + request.label + ": " + ErrnoText(err));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0)
    ExecChild(parent, in_pipe[0], out_pipe[1], err_pipe[1], error_pipe[1], child_mask,
              exe_path.c_str(), argvp.data(), envp.data());
  const int fork_errno = errno;
  CloseAll({in_pipe[0], out_pipe[1], err_pipe[1], error_pipe[1]});
  if (pid < 0) {
    CloseAll({in_pipe[1], out_pipe[0], err_pipe[0], error_pipe[0]});
    return Status::Internal("cannot fork " + request.label + ": " + ErrnoText(fork_errno));
  }
  // Also from the parent, so the group exists before anyone signals it.
  ::setpgid(pid, pid);

  // The error pipe closes on a successful exec; otherwise it carries the child's errno.
  // The child does nothing slow before either, so 10 s bounds a pathological case.
  int child_errno = 0;
  pollfd p{error_pipe[0], POLLIN, 0};
  ssize_t got = 0;
  if (::poll(&p, 1, 10000) > 0) got = ::read(error_pipe[0], &child_errno, sizeof(child_errno));
  ::close(error_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    ::waitpid(pid, nullptr, 0);
    CloseAll({in_pipe[1], out_pipe[0], err_pipe[0]});
    return Status::Internal(request.label + ": cannot execute '" + exe_path +
                            "': " + ErrnoText(child_errno));
  }
  ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err_pipe[0], F_SETFL, O_NONBLOCK);
  out->pid = pid;
  out->stdout_fd = out_pipe[0];
  out->stderr_fd = err_pipe[0];
  out->stdin_fd = in_pipe[1];
  return Status::OK();
}

}  // namespace launcher
}  // namespace hvd
