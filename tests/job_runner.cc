#include "tests/job_runner.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

extern char** environ;

namespace hvd {
namespace testing {
namespace {

using std::chrono::milliseconds;

// Output is polled at least this often while a wait runs.
constexpr int kPollMs = 50;

std::string NameOf(const std::string& entry) { return entry.substr(0, entry.find('=')); }

// The child's environment: the test's (unless !inherit) with `env` replacing or adding.
std::vector<std::string> ChildEnvironment(const JobRunner::Options& options) {
  std::vector<std::string> out;
  if (options.inherit_env) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      const std::string entry = *e;
      const bool replaced =
          std::any_of(options.env.begin(), options.env.end(),
                      [&](const std::string& kv) { return NameOf(kv) == NameOf(entry); });
      if (!replaced) out.push_back(entry);
    }
  }
  out.insert(out.end(), options.env.begin(), options.env.end());
  return out;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// `name` as execvp finds it, on the PATH of `env` (or the test's, or /usr/bin:/bin);
// found before fork, since the child may only make async-signal-safe calls.
std::string ResolveProgram(const std::string& name, const std::vector<std::string>& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
  for (const std::string& kv : env)
    if (NameOf(kv) == "PATH") path = kv.substr(5);
  std::istringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (IsExecutableFile(candidate)) return candidate;
  }
  return name;  // execve fails, and the runner reports it.
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void CloseIfOpen(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Runs in the child between fork and exec: async-signal-safe calls only. An exec
// failure's errno goes back through `error_fd`.
[[noreturn]] void ExecChild(pid_t parent, int in_fd, int out_fd, int err_fd, int error_fd,
                            const char* path, char** argv, char** envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // The test died before prctl took effect.
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
    const int err = errno;
    [[maybe_unused]] ssize_t n = ::write(error_fd, &err, sizeof(err));
    ::_exit(127);
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD}) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(path, argv, envp);
  const int err = errno;
  [[maybe_unused]] ssize_t n = ::write(error_fd, &err, sizeof(err));
  ::_exit(127);
}

}  // namespace

JobRunner::JobRunner(std::vector<std::string> argv) : JobRunner(std::move(argv), Options()) {}

JobRunner::JobRunner(std::vector<std::string> argv, Options options) {
  start_ = Clock::now();
  if (argv.empty())
    StartFailed("no command", options);
  else
    Start(argv, options);
}

std::vector<std::string> JobRunner::Shell(const std::string& command) {
  return {"/bin/sh", "-c", command};
}

JobRunner::~JobRunner() {
  Kill();
  CloseIfOpen(&out_fd_);
  CloseIfOpen(&err_fd_);
  CloseIfOpen(&stdin_fd_);
}

void JobRunner::Start(const std::vector<std::string>& argv, const Options& options) {
  std::vector<std::string> env_strings = ChildEnvironment(options);
  std::vector<std::string> argv_strings = argv;
  const std::string path = ResolveProgram(argv[0], env_strings);
  std::vector<char*> envp = CStrings(env_strings);
  std::vector<char*> argvp = CStrings(argv_strings);

  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, error[2] = {-1, -1};
  bool ok = options.stdin_pipe ? ::pipe2(in, O_CLOEXEC) == 0
                               : (in[0] = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;
  ok = ok && ::pipe2(out, O_CLOEXEC) == 0 && ::pipe2(error, O_CLOEXEC) == 0;
  if (ok && !options.merge_output) ok = ::pipe2(err, O_CLOEXEC) == 0;
  if (ok) {
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0)
      ExecChild(parent, in[0], out[1], options.merge_output ? out[1] : err[1], error[1],
                path.c_str(), argvp.data(), envp.data());
  }
  const int saved_errno = errno;
  for (int* fd : {&in[0], &out[1], &err[1], &error[1]}) CloseIfOpen(fd);
  if (!ok || pid_ < 0) {
    for (int* fd : {&in[1], &out[0], &err[0], &error[0]}) CloseIfOpen(fd);
    pid_ = -1;
    return StartFailed(
        std::string(ok ? "cannot fork: " : "cannot make pipes: ") + std::strerror(saved_errno),
        options);
  }
  ::setpgid(pid_, pid_);  // Also here, so the group exists before the test signals it.
  stdin_fd_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
  for (int fd : {out_fd_, err_fd_})
    if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);

  // The error pipe closes at a successful exec, or carries the child's errno; the child
  // does nothing slow before either.
  int child_errno = 0;
  pollfd p{error[0], POLLIN, 0};
  ssize_t got = 0;
  if (::poll(&p, 1, 10000) > 0) got = ::read(error[0], &child_errno, sizeof(child_errno));
  ::close(error[0]);
  if (got == static_cast<ssize_t>(sizeof(child_errno))) {
    ::waitpid(pid_, &status_, 0);
    reaped_ = true;
    (options.merge_output ? out_ : err_) +=
        "job_runner: cannot execute '" + argv[0] + "': " + std::strerror(child_errno) + "\n";
  }
}

void JobRunner::StartFailed(const std::string& why, const Options& options) {
  (options.merge_output ? out_ : err_) += "job_runner: " + why + "\n";
  reaped_ = true;
  status_ = W_EXITCODE(127, 0);
}

void JobRunner::Reap() {
  if (reaped_ || pid_ <= 0) return;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
}

bool JobRunner::ReadUntil(const std::function<bool()>& done, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done() && Clock::now() < deadline && (out_fd_ >= 0 || err_fd_ >= 0)) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    ReadSome({this}, static_cast<int>(std::clamp<int64_t>(left, 0, kPollMs)));
    Reap();
  }
  return done();
}

bool JobRunner::WaitForOutput(const std::string& text, milliseconds timeout) {
  return ReadUntil([&] { return out_.find(text) != std::string::npos; }, timeout);
}

bool JobRunner::Wait(milliseconds timeout) { return WaitAll({this}, timeout); }

bool JobRunner::WaitAll(const std::vector<JobRunner*>& runners, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool all = true;
    for (JobRunner* r : runners) {
      r->Reap();
      if (r->Finished() && !r->ended_) {
        r->ended_ = true;
        r->end_ = Clock::now();
      }
      all = all && r->Finished();
    }
    if (all) return true;
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    ReadSome(runners, static_cast<int>(std::min<int64_t>(left, kPollMs)));
  }
}

void JobRunner::ReadSome(const std::vector<JobRunner*>& runners, int timeout_ms) {
  std::vector<pollfd> fds;
  std::vector<std::pair<JobRunner*, bool>> owners;  // The runner, and whether stderr.
  for (JobRunner* r : runners) {
    if (r->out_fd_ >= 0) {
      fds.push_back({r->out_fd_, POLLIN, 0});
      owners.emplace_back(r, false);
    }
    if (r->err_fd_ >= 0) {
      fds.push_back({r->err_fd_, POLLIN, 0});
      owners.emplace_back(r, true);
    }
  }
  if (fds.empty()) {
    // Nothing to read: the children hold no pipe; wait briefly for their exit.
    std::this_thread::sleep_for(milliseconds(std::min(timeout_ms, 10)));
    return;
  }
  if (::poll(fds.data(), fds.size(), timeout_ms) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    JobRunner* r = owners[i].first;
    if (owners[i].second)
      r->Drain(&r->err_fd_, &r->err_);
    else
      r->Drain(&r->out_fd_, &r->out_);
  }
}

// Reads what `*fd` holds now (a bounded number of reads); closes it at end of stream.
void JobRunner::Drain(int* fd, std::string* into) {
  char buf[65536];
  for (int i = 0; i < 16 && *fd >= 0; ++i) {
    const ssize_t n = ::read(*fd, buf, sizeof(buf));
    if (n > 0)
      into->append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR)
      continue;
    else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return;
    else
      CloseIfOpen(fd);  // End of stream, or an error that ends it.
  }
}

int JobRunner::exit_code() const {
  if (!reaped_) return -1;
  return WIFSIGNALED(status_) ? 128 + WTERMSIG(status_) : WEXITSTATUS(status_);
}

int JobRunner::term_signal() const {
  return reaped_ && WIFSIGNALED(status_) ? WTERMSIG(status_) : 0;
}

double JobRunner::seconds() const {
  return std::chrono::duration<double>((ended_ ? end_ : Clock::now()) - start_).count();
}

void JobRunner::Signal(int sig) {
  if (pid_ > 0 && !reaped_) ::kill(pid_, sig);
}

void JobRunner::SignalGroup(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

void JobRunner::Kill() {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);  // In case it left its group.
  while (::waitpid(pid_, &status_, 0) < 0 && errno == EINTR) {
  }
  reaped_ = true;
  if (!ended_) {
    ended_ = true;
    end_ = Clock::now();
  }
}

void JobRunner::CloseStdin() { CloseIfOpen(&stdin_fd_); }

std::vector<pid_t> JobRunner::GroupSurvivors() const {
  std::vector<pid_t> survivors;
  if (pid_ <= 0) return survivors;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return survivors;
  while (const dirent* e = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    ProcessState state;
    if (pid > 0 && ReadProcessState(pid, &state) && state.pgrp == pid_ && state.state != 'Z')
      survivors.push_back(pid);
  }
  ::closedir(proc);
  return survivors;
}

bool ReadProcessState(pid_t pid, ProcessState* out) {
  // /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may hold anything. Read
  // with plain read(): the process may vanish meanwhile.
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return false;
  const std::string stat(buf, static_cast<size_t>(n));
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 1));
  long ppid = 0, pgrp = 0;
  if (!(fields >> out->state >> ppid >> pgrp)) return false;
  out->ppid = static_cast<pid_t>(ppid);
  out->pgrp = static_cast<pid_t>(pgrp);
  return true;
}

namespace {

// /proc/<pid>/<file>, whole; empty if unreadable.
std::string ReadProcFile(pid_t pid, const char* file) {
  const int fd = ::open(("/proc/" + std::to_string(pid) + "/" + file).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

// Every live process but this one, for which `keep` is true.
template <typename F>
std::vector<pid_t> ScanProcesses(F&& keep) {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* d = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(d->d_name));
    if (pid <= 0 || pid == ::getpid()) continue;
    if (keep(pid) && ProcessAlive(pid)) pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

}  // namespace

std::vector<pid_t> ProcessesWithCommandLineContaining(const std::string& text) {
  return ScanProcesses(
      [&](pid_t pid) { return ReadProcFile(pid, "cmdline").find(text) != std::string::npos; });
}

std::vector<pid_t> ChildrenWithEnv(pid_t parent, const std::string& entry) {
  return ScanProcesses([&](pid_t pid) {
    ProcessState state;
    if (!ReadProcessState(pid, &state) || state.ppid != parent) return false;
    const std::string env = ReadProcFile(pid, "environ");
    const std::string needle = entry + '\0';
    return env.compare(0, needle.size(), needle) == 0 ||
           env.find('\0' + needle) != std::string::npos;
  });
}

bool ProcessAlive(pid_t pid) {
  ProcessState state;
  return ReadProcessState(pid, &state) && state.state != 'Z';
}

CommandResult RunCommand(const std::string& command, milliseconds timeout,
                         const std::vector<std::string>& env) {
  JobRunner::Options options;
  options.env = env;
  options.merge_output = true;
  JobRunner job(JobRunner::Shell(command), options);
  CommandResult result;
  if (!job.Wait(timeout)) {
    result.timed_out = true;
    job.Kill();
  }
  result.exit_code = job.exit_code();
  result.output = job.out();
  result.seconds = job.seconds();
  return result;
}

}  // namespace testing
}  // namespace hvd
