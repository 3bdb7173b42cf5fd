// JobRunner: runs one command as a child process for a test, and watches it.
//
// Every test that starts a process goes through it: dprun itself, rank programs started
// without dprun, the remote rank script under /bin/sh, an sshd in a network namespace,
// a one-off setup command (RunCommand, below).
//
// The child runs in its own process group, so the test can signal it and everything it
// started with one kill, and a job's own `kill 0` stays inside it. Its stdin is
// /dev/null, or a pipe the test closes with CloseStdin(). It starts with SIGINT, SIGTERM
// and SIGPIPE at their default actions and no signal blocked, whatever the test has set,
// and gets SIGKILL if the test thread that started it ends (PR_SET_PDEATHSIG), so a
// crashed test leaves no job behind.
//
// Output is collected while the test waits (ReadUntil, Wait): stdout and stderr apart,
// or merged into out() in the order the child wrote them. Every wait is bounded by the
// caller's timeout. A job that outlives its wait keeps running: the caller decides
// whether that fails the test, and Kill() ends it. The destructor kills the process
// group (SIGKILL) and reaps the child if no wait saw it exit.
//
// A child that cannot be started (no such program, no fork) reads as one that exited
// 127, with the reason in err() (out() when merged).
//
// Not thread-safe: one test thread uses a runner. Several runners may run side by side;
// WaitAll waits for a set of them, reading all their pipes, since a child can block on
// a full pipe until the test reads it.
#ifndef HVD_TESTS_JOB_RUNNER_H_
#define HVD_TESTS_JOB_RUNNER_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace hvd {
namespace testing {

class JobRunner {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // "NAME=value" entries added to the test's environment, replacing any of the same
    // name (or, without inherit_env, the child's whole environment).
    std::vector<std::string> env;
    // False: the child gets `env` alone.
    bool inherit_env = true;
    // True: stderr goes into out() with stdout; err() stays empty.
    bool merge_output = false;
    // True: stdin is a pipe the test holds until CloseStdin(); false: /dev/null.
    bool stdin_pipe = false;
  };

  // Starts argv[0], a path or a name looked up on the child's PATH, with `argv`.
  explicit JobRunner(std::vector<std::string> argv);
  JobRunner(std::vector<std::string> argv, Options options);
  // The argv that runs `command` with /bin/sh -c.
  static std::vector<std::string> Shell(const std::string& command);

  ~JobRunner();
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // The child's pid, also its process group's id; -1 if it could not be started.
  pid_t pid() const { return pid_; }

  // What the child wrote so far: stdout (with stderr when merged), and stderr.
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

  // Reads output until done() holds, `timeout` passes, or both pipes have closed (no
  // more can come); returns done().
  bool ReadUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout);
  // ReadUntil out() contains `text`.
  bool WaitForOutput(const std::string& text, std::chrono::milliseconds timeout);

  // Reads output until the child has exited and its pipes have closed (everything that
  // held them is gone), at most `timeout`. Returns whether it finished in time; if not,
  // the child may still run (or have exited while something else holds its pipes).
  bool Wait(std::chrono::milliseconds timeout);
  // Wait for every runner in `runners`, reading all of them, within one `timeout`.
  static bool WaitAll(const std::vector<JobRunner*>& runners, std::chrono::milliseconds timeout);

  // Whether the child has exited (and been reaped).
  bool exited() const { return reaped_; }
  // The raw waitpid status; meaningful once exited().
  int wait_status() const { return status_; }
  // As a shell's $?: the exit code, or 128 + the signal that killed the child; -1 while
  // it runs.
  int exit_code() const;
  // The signal that killed the child; 0 if it exited by itself or still runs.
  int term_signal() const;
  // Seconds from the start until a Wait saw the child finish (or Kill reaped it); while
  // neither has happened, until now.
  double seconds() const;

  // Sends `sig` to the child alone; nothing once it has been reaped.
  void Signal(int sig);
  // Sends `sig` to the child's process group: the child and whatever it started there.
  void SignalGroup(int sig);
  // SIGKILL to the process group, then reaps the child (at once: it cannot survive).
  // Output still unread stays unread. Nothing once the child has been reaped.
  void Kill();
  // Closes the write end of the child's stdin pipe (stdin_pipe), if open.
  void CloseStdin();

  // The live processes of the child's process group (zombies are not counted), from
  // /proc: what the child leaves behind, once it has exited.
  std::vector<pid_t> GroupSurvivors() const;

 private:
  void Start(const std::vector<std::string>& argv, const Options& options);
  void StartFailed(const std::string& why, const Options& options);
  void Reap();
  bool Finished() const { return reaped_ && out_fd_ < 0 && err_fd_ < 0; }
  // Polls the open pipes of `runners` for up to `timeout_ms` and appends what they hold.
  static void ReadSome(const std::vector<JobRunner*>& runners, int timeout_ms);
  void Drain(int* fd, std::string* into);

  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  int out_fd_ = -1, err_fd_ = -1, stdin_fd_ = -1;
  std::string out_, err_;
  Clock::time_point start_, end_;
  bool ended_ = false;
};

// One process as /proc/<pid>/stat shows it.
struct ProcessState {
  char state = 0;  // 'R', 'S', ...; 'Z' for a zombie (dead, not yet reaped).
  pid_t ppid = -1;
  pid_t pgrp = -1;
};
// False if there is no such process (any more).
bool ReadProcessState(pid_t pid, ProcessState* out);
// Whether `pid` exists and is not a zombie. An orphan that died waits for init to reap
// it, which can take a while: this does not wait for that.
bool ProcessAlive(pid_t pid);
// The live processes (this one aside) whose command line contains `text`.
std::vector<pid_t> ProcessesWithCommandLineContaining(const std::string& text);
// The live children of `parent` whose environment holds `entry` ("NAME=value").
std::vector<pid_t> ChildrenWithEnv(pid_t parent, const std::string& entry);

// A command run by /bin/sh -c to its end, stdout and stderr merged.
struct CommandResult {
  int exit_code = -1;  // As JobRunner::exit_code(); 137 after a timeout's SIGKILL.
  bool timed_out = false;
  std::string output;
  double seconds = 0;
};

// Runs `command` through /bin/sh with extra environment `env` ("K=V" entries), capturing
// stdout and stderr together. Past `timeout` it kills the process group and reports
// timed_out.
CommandResult RunCommand(const std::string& command, std::chrono::milliseconds timeout,
                         const std::vector<std::string>& env = {});

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_JOB_RUNNER_H_
