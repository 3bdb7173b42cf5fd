// A rank killed (SIGKILL) or frozen (SIGSTOP) mid-job: the others fail fast with
// a clear error naming it, dprun ends the job non-zero, and nothing is left behind.
// The bounds are generous: these run on small, loaded machines.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kLoopJob = std::string(HVD_BUILD_DIR) + "/tests/programs/loop_job";

// A dprun job run in the background, its output collected as it comes.
class Job {
 public:
  Job(const std::string& command, const std::vector<std::string>& env) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      setpgid(0, 0);
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      close(fds[0]);
      close(fds[1]);
      for (const auto& kv : env) putenv(const_cast<char*>(kv.c_str()));
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(fds[1]);
    fd_ = fds[0];
    fcntl(fd_, F_SETFL, O_NONBLOCK);
  }
  ~Job() {
    if (!reaped_) {
      kill(-pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(fd_);
  }

  // Reads output until `pattern` matches or `timeout` passes.
  bool WaitFor(const std::regex& pattern, std::chrono::milliseconds timeout, std::smatch* m) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      if (std::regex_search(output_, *m, pattern)) return true;
      Read(50);
    }
    return std::regex_search(output_, *m, pattern);
  }

  // Waits for dprun to exit; returns its exit code, or -1 past `timeout`.
  int WaitExit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
      Read(50);
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        for (int i = 0; i < 20; ++i) Read(10);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

  const std::string& output() const { return output_; }

 private:
  void Read(int ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd_, buf, sizeof(buf))) > 0) output_.append(buf, n);
  }

  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string output_;
};

bool Alive(int pid) { return kill(pid, 0) == 0; }

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Each rank's pid, from loop_job's "rank R pid P" line; -1 where none came.
std::vector<int> RankPids(Job& job, int n) {
  std::vector<int> pids(n, -1);
  for (int r = 0; r < n; ++r) {
    std::smatch m;
    const std::regex re("\\[" + std::to_string(r) + "\\]<stdout>:rank " + std::to_string(r) +
                        " pid ([0-9]+)");
    if (job.WaitFor(re, std::chrono::seconds(30), &m)) pids[r] = std::stoi(m[1]);
  }
  return pids;
}

TEST(Failure, KilledRankFailsTheOthersFastAndIsNamed) {
  const int np = 4, victim = 2;
  Job job(kDprun + " -np " + std::to_string(np) + " " + kLoopJob + " 200000", {});
  const std::vector<int> pids = RankPids(job, np);
  for (int r = 0; r < np; ++r) ASSERT_GT(pids[r], 0) << "rank " << r << "\n" << job.output();
  std::smatch m;
  ASSERT_TRUE(job.WaitFor(std::regex("rank 0 step 20\\b"), std::chrono::seconds(30), &m))
      << job.output();
  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(pids[victim], SIGKILL), 0);
  // Every survivor names the dead rank as the cause, as dprun recorded it in the store.
  const std::string cause = "rank " + std::to_string(victim) + " \\(pid " +
                            std::to_string(pids[victim]) + "\\) was killed by signal 9";
  for (int r = 0; r < np; ++r) {
    if (r == victim) continue;
    const std::string rank = std::to_string(r);
    const std::regex error("\\[" + rank + "\\]<stdout>:rank " + rank +
                           " failed at step [0-9]+: HVD_REMOTE_ERROR: [^\n]*" + cause);
    EXPECT_TRUE(job.WaitFor(error, std::chrono::seconds(15), &m))
        << "rank " << r << " did not report the cause\n"
        << job.output();
  }
  EXPECT_LT(SecondsSince(killed_at), 10.0) << job.output();
  const int code = job.WaitExit(std::chrono::seconds(30));
  const double seconds = SecondsSince(killed_at);
  ASSERT_NE(code, -1) << "dprun did not exit within 30 s:\n" << job.output();
  EXPECT_EQ(code, 128 + SIGKILL) << job.output();
  EXPECT_LT(seconds, 12.0) << job.output();
  EXPECT_THAT(job.output(), HasSubstr("dprun: rank 2 (pid " + std::to_string(pids[victim]) +
                                      ") was killed by signal 9 (Killed)\n"));
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " left behind";
}

TEST(Failure, FrozenRankTimesOutTheOthersAndIsNamed) {
  Job job(kDprun + " -np 3 --grace-period 1 " + kLoopJob + " 200000", {"HVD_TIMEOUT=3"});
  const std::vector<int> pids = RankPids(job, 3);
  for (int r = 0; r < 3; ++r) ASSERT_GT(pids[r], 0) << "rank " << r << "\n" << job.output();
  std::smatch m;
  ASSERT_TRUE(job.WaitFor(std::regex("rank 0 step 20\\b"), std::chrono::seconds(30), &m))
      << job.output();
  const auto frozen_at = Clock::now();
  ASSERT_EQ(kill(pids[1], SIGSTOP), 0);
  const int code = job.WaitExit(std::chrono::seconds(40));
  const double seconds = SecondsSince(frozen_at);
  ASSERT_NE(code, -1) << "dprun did not exit within 40 s:\n" << job.output();
  EXPECT_NE(code, 0);
  // HVD_TIMEOUT (3 s), the diagnosis (2.5 s), dprun's window for the others to report
  // (up to 3 s) and the teardown (SIGTERM with SIGCONT): well short of a hang.
  EXPECT_GT(seconds, 2.5);
  EXPECT_LT(seconds, 20.0) << job.output();
  EXPECT_TRUE(std::regex_search(
      job.output(), m, std::regex("failed at step [0-9]+: HVD_TIMEOUT: rank 1 is gone or frozen")))
      << job.output();
  // The frozen rank is continued with its SIGTERM, so it need not wait for SIGKILL.
  EXPECT_THAT(job.output(), HasSubstr("dprun: rank 1 (pid " + std::to_string(pids[1]) +
                                      ") terminated by dprun (was killed by signal 15"));
  for (int pid : pids) EXPECT_FALSE(Alive(pid)) << "pid " << pid << " left behind";
}

}  // namespace
