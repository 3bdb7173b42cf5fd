// A peer rank in a child process, for the shared-memory tests that need a real
// second process (a peer that dies, cross-process timings).
//
// ForkRank forks *before* starting any thread, then serves a TcpStore in the parent
// and sends its port to the child through a pipe; the child connects and runs
// `child(store)`, and _exits with its return value (it never returns into gtest).
#ifndef HVD_TESTS_MULTIRANK_FORK_RANK_H_
#define HVD_TESTS_MULTIRANK_FORK_RANK_H_

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/store/store.h"
#include "runtime/store/tcp_store.h"

namespace hvd {
namespace testing {

struct ForkedRank {
  pid_t pid = -1;
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> store;  // the parent's view of the store
};

inline ForkedRank ForkRank(const std::function<int(std::shared_ptr<Store>)>& child) {
  ForkedRank f;
  int fds[2];
  if (pipe(fds) != 0) return f;
  f.pid = fork();
  if (f.pid == 0) {
    close(fds[1]);
    int port = 0;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 10000) != 1 || read(fds[0], &port, sizeof(port)) != sizeof(port)) _exit(90);
    std::shared_ptr<Store> store;
    if (!ConnectTcpStore("127.0.0.1", port, "shm-test", std::chrono::milliseconds(10000), &store)
             .ok())
      _exit(91);
    _exit(child(store));
  }
  close(fds[0]);
  TcpStoreServer::Options opts;
  opts.secret = "shm-test";
  opts.log = [](const std::string&) {};
  if (f.pid > 0 && TcpStoreServer::Start(opts, &f.server).ok()) {
    const int port = f.server->port();
    if (write(fds[1], &port, sizeof(port)) == sizeof(port)) f.store = f.server->LocalStore();
  }
  close(fds[1]);
  return f;
}

// Waits up to `timeout` for `pid`, then kills it. Returns the exit code, or
// 128 + signal.
inline int WaitChild(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `body(store, rank)` as rank 1 in a forked child and as rank 0 here; each
// returns "" on success or what went wrong. Expects both to succeed, the child
// within `timeout` (it is killed after that).
inline void ExpectTwoRanksPass(
    const std::function<std::string(std::shared_ptr<Store>, int)>& body,
    std::chrono::milliseconds timeout) {
  ForkedRank child = ForkRank([&](std::shared_ptr<Store> store) {
    const std::string err = body(store, 1);
    if (!err.empty()) std::fprintf(stderr, "child: %s\n", err.c_str());
    return err.empty() ? 0 : 1;
  });
  ASSERT_GT(child.pid, 0);
  ASSERT_TRUE(child.store);
  EXPECT_EQ(body(child.store, 0), "");
  EXPECT_EQ(WaitChild(child.pid, timeout), 0);
}

}  // namespace testing
}  // namespace hvd

#endif  // HVD_TESTS_MULTIRANK_FORK_RANK_H_
