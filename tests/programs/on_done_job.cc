// Rank program: completion callbacks (hvd_handle_on_done) across the job's ranks,
// as a framework's asynchronous kernels use them: no thread blocks per collective.
//
//   on_done_job            every check below, then "rank R: N callback checks passed"
//   on_done_job kill       the last rank exits mid-collective (_exit, as if killed);
//                          each other rank prints the status and detail its pending
//                          callback got, then "rank R: callback saw the lost rank"
//   on_done_job flush      one allreduce whose callback is registered at once; prints
//                          "rank R: callback after N ms" (run with a long
//                          HVD_CYCLE_TIME: registering starts the cycle at once)
//
// Checks: each of many in-flight allreduces calls back once with its final result
// already in the output, on another thread than the enqueuing one; a callback
// reads an allgather's result and releases its handle itself; callbacks enqueue
// the next collective of a chain from inside the callback (re-entry from the
// background thread); a handle released before completion still calls back;
// ranks that disagree about a tensor call back with HVD_MISMATCH and the detail.
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "hvd.h"

static int g_rank = 0, g_checks = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    ++g_checks;                                                                                \
    if (!(cond)) {                                                                             \
      std::printf("rank %d: check failed at line %d: %s (last error: %s)\n", g_rank, __LINE__, \
                  #cond, hvd_last_error());                                                    \
      return 1;                                                                                \
    }                                                                                          \
  } while (0)

namespace {

// Waits (bounded) until `counter` reaches `target`.
bool WaitFor(const std::atomic<int>& counter, int target, int seconds = 20) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (counter.load() < target) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// One allreduce's callback record.
struct Pending {
  std::vector<float> data;
  hvd_handle_t* handle = nullptr;
  std::atomic<int> calls{0};
  hvd_status_t status = HVD_INTERNAL;
  std::string detail;
  float first = -1;  // data[0] as the callback saw it
  bool other_thread = false;
  pthread_t enqueuer{};
};

void Record(void* arg, hvd_status_t status, const char* detail) {
  auto* p = static_cast<Pending*>(arg);
  p->status = status;
  p->detail = detail;
  p->first = p->data.empty() ? -1 : p->data[0];
  p->other_thread = !pthread_equal(pthread_self(), p->enqueuer);
  p->calls.fetch_add(1);
}

// A chain: each callback enqueues the next link until `links` are done.
struct Chain {
  int links = 0;
  std::vector<double> buf = std::vector<double>(3, 1.0);
  std::atomic<int> done{0};
  std::atomic<int> failed{0};
  std::string error;
};

void NextLink(void* arg, hvd_status_t status, const char* detail);

bool StartLink(Chain* c) {
  const std::string name = "od.chain." + std::to_string(c->done.load());
  hvd_handle_t* h = nullptr;
  if (hvd_allreduce_async(name.c_str(), c->buf.data(), c->buf.data(), 3, HVD_FLOAT64, HVD_SUM,
                          &h) != HVD_SUCCESS ||
      hvd_handle_on_done(h, NextLink, c) != HVD_SUCCESS) {
    c->error = hvd_last_error();
    return false;
  }
  hvd_handle_release(h);  // before completion: the callback still comes
  return true;
}

void NextLink(void* arg, hvd_status_t status, const char* detail) {
  auto* c = static_cast<Chain*>(arg);
  if (status != HVD_SUCCESS) {
    c->error = detail;
    c->failed.store(1);
    return;
  }
  // Read before counting: once the last link counts, the waiting thread may end
  // the Chain.
  const int links = c->links;
  if (c->done.fetch_add(1) + 1 < links && !StartLink(c)) c->failed.store(1);
}

struct Gathered {
  hvd_handle_t* handle = nullptr;
  std::atomic<int> calls{0};
  int64_t rows = -1;
  int32_t last = -1;
};

void ReadGather(void* arg, hvd_status_t status, const char* detail) {
  auto* g = static_cast<Gathered*>(arg);
  const void* data = nullptr;
  const int64_t* shape = nullptr;
  int ndim = 0;
  int64_t nbytes = 0;
  if (status == HVD_SUCCESS &&
      hvd_handle_result(g->handle, &data, &nbytes, &ndim, &shape) == HVD_SUCCESS && ndim == 1) {
    g->rows = shape[0];
    g->last = static_cast<const int32_t*>(data)[shape[0] - 1];
  }
  hvd_handle_release(g->handle);
  g->calls.fetch_add(1);
}

int KillRun(int rank, int size) {
  // Everyone enqueues; the last rank dies instead, so the others' callbacks get
  // the failure, naming it.
  Pending p;
  p.data.assign(4, 1.0f);
  p.enqueuer = pthread_self();
  if (rank == size - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::fflush(stdout);
    _exit(9);
  }
  CHECK(hvd_allreduce_async("od.lost", p.data.data(), p.data.data(), 4, HVD_FLOAT32, HVD_SUM,
                            &p.handle) == HVD_SUCCESS);
  CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_SUCCESS);
  CHECK(WaitFor(p.calls, 1, 60));
  std::printf("rank %d: callback status %s: %s\n", rank, hvd_status_string(p.status),
              p.detail.c_str());
  CHECK(p.calls.load() == 1);
  CHECK(p.status == HVD_REMOTE_ERROR || p.status == HVD_TIMEOUT || p.status == HVD_SHUT_DOWN);
  CHECK(p.detail.find("rank " + std::to_string(size - 1)) != std::string::npos);
  hvd_handle_release(p.handle);
  std::printf("rank %d: callback saw the lost rank\n", rank);
  std::fflush(stdout);
  _exit(0);  // the job is broken: no shutdown handshake with a dead rank
}

int FlushRun(int rank) {
  Pending p;
  p.data.assign(4, 1.0f);
  p.enqueuer = pthread_self();
  const auto start = std::chrono::steady_clock::now();
  CHECK(hvd_allreduce_async("od.flush", p.data.data(), p.data.data(), 4, HVD_FLOAT32, HVD_SUM,
                            &p.handle) == HVD_SUCCESS);
  CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_SUCCESS);
  CHECK(WaitFor(p.calls, 1, 60));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  CHECK(p.status == HVD_SUCCESS);
  hvd_handle_release(p.handle);
  std::printf("rank %d: callback after %lld ms\n", rank, static_cast<long long>(ms));
  return hvd_shutdown() == HVD_SUCCESS ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (hvd_init() != HVD_SUCCESS) {
    std::printf("init failed: %s\n", hvd_last_error());
    return 2;
  }
  int size = 0;
  hvd_rank(&g_rank);
  hvd_size(&size);
  const int rank = g_rank;
  if (argc > 1 && std::strcmp(argv[1], "kill") == 0) return KillRun(rank, size);
  if (argc > 1 && std::strcmp(argv[1], "flush") == 0) return FlushRun(rank);

  // Many allreduces in flight at once, each calling back once with its result.
  constexpr int kMany = 64;
  std::vector<Pending> many(kMany);
  for (int i = 0; i < kMany; ++i) {
    Pending& p = many[i];
    p.data.assign(16 + i, static_cast<float>(rank + i));
    p.enqueuer = pthread_self();
    const std::string name = "od.many." + std::to_string(i);
    CHECK(hvd_allreduce_async(name.c_str(), p.data.data(), p.data.data(),
                              static_cast<int64_t>(p.data.size()), HVD_FLOAT32, HVD_SUM,
                              &p.handle) == HVD_SUCCESS);
    CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_SUCCESS);
  }
  int on_background = 0;
  for (int i = 0; i < kMany; ++i) {
    Pending& p = many[i];
    CHECK(WaitFor(p.calls, 1));
    const float expect = static_cast<float>(size * i + size * (size - 1) / 2);
    CHECK(p.status == HVD_SUCCESS && p.detail.empty());
    CHECK(p.first == expect);  // the result is in place when the callback runs
    on_background += p.other_thread ? 1 : 0;
    // A second callback on the same handle is refused; the first never repeats.
    CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_INVALID_USAGE);
    CHECK(std::strstr(hvd_last_error(), "already has a completion callback") != nullptr);
    hvd_handle_release(p.handle);
  }
  CHECK(on_background > 0);  // at least those still in flight at registration
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const Pending& p : many) CHECK(p.calls.load() == 1);

  // Registered after completion: runs at once, on this thread.
  {
    Pending p;
    p.data.assign(2, 1.0f);
    p.enqueuer = pthread_self();
    CHECK(hvd_allreduce_async("od.late", p.data.data(), p.data.data(), 2, HVD_FLOAT32, HVD_SUM,
                              &p.handle) == HVD_SUCCESS);
    CHECK(hvd_wait(p.handle, 30000) == HVD_SUCCESS);
    CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_SUCCESS);
    CHECK(p.calls.load() == 1 && !p.other_thread && p.first == size);
    CHECK(hvd_handle_on_done(p.handle, nullptr, &p) == HVD_INVALID_ARGUMENT);
    hvd_handle_release(p.handle);
    CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_INVALID_ARGUMENT);
  }

  // An allgather's callback reads the result and releases the handle itself.
  {
    Gathered g;
    std::vector<int32_t> rows(rank + 1, rank);
    const int64_t shape[1] = {rank + 1};
    CHECK(hvd_allgather_async("od.gather", rows.data(), shape, 1, HVD_INT32, HVD_GLOBAL_PROCESS_SET,
                              &g.handle) == HVD_SUCCESS);
    CHECK(hvd_handle_on_done(g.handle, ReadGather, &g) == HVD_SUCCESS);
    CHECK(WaitFor(g.calls, 1));
    CHECK(g.rows == size * (size + 1) / 2 && g.last == size - 1);
  }

  // A chain of collectives, each enqueued from the previous one's callback.
  {
    Chain c;
    c.links = 30;  // size^30 stays exact in a double at 4 ranks and 3
    CHECK(StartLink(&c));
    CHECK(WaitFor(c.done, c.links) && c.failed.load() == 0);
    CHECK(c.buf[0] == static_cast<double>([&] {
            double v = 1;
            for (int i = 0; i < c.links; ++i) v *= size;
            return v;
          }()));
  }

  // Ranks that disagree: every rank's callback gets HVD_MISMATCH with the detail.
  if (size > 1) {
    Pending p;
    p.data.assign(rank == 0 ? 3 : 4, 1.0f);
    p.enqueuer = pthread_self();
    CHECK(hvd_allreduce_async("od.mismatch", p.data.data(), p.data.data(),
                              static_cast<int64_t>(p.data.size()), HVD_FLOAT32, HVD_SUM,
                              &p.handle) == HVD_SUCCESS);
    CHECK(hvd_handle_on_done(p.handle, Record, &p) == HVD_SUCCESS);
    CHECK(WaitFor(p.calls, 1));
    std::printf("rank %d: mismatch callback: %s: %s\n", rank, hvd_status_string(p.status),
                p.detail.c_str());
    CHECK(p.status == HVD_MISMATCH);
    CHECK(p.detail.find("od.mismatch") != std::string::npos);
    CHECK(hvd_wait(p.handle, 0) == HVD_MISMATCH);
    CHECK(p.detail == hvd_last_error());  // the same detail hvd_last_error gives
    hvd_handle_release(p.handle);
  }

  std::printf("rank %d: %d callback checks passed\n", rank, g_checks);
  return hvd_shutdown() == HVD_SUCCESS ? 0 : 1;
}
