// Rank program for the CPU-binding test: starts a thread before hvd_init, then
// prints which CPUs the main thread, that early thread and a thread started after
// init may run on.
//
// stdout: "affinity rank=R local_rank=L main=LIST early=LIST late=LIST" (LIST as in
// /proc's Cpus_allowed_list, e.g. "0-3,8"). Exits 0, or 2 if init failed.
#include <pthread.h>
#include <sched.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "hvd.h"

namespace {

std::string Affinity(pthread_t t) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (pthread_getaffinity_np(t, sizeof(set), &set) != 0) return "?";
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &set)) continue;
    int end = c;
    while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set)) ++end;
    if (!out.empty()) out += ",";
    out += std::to_string(c) + (end > c ? "-" + std::to_string(end) : "");
    c = end;
  }
  return out;
}

}  // namespace

int main() {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::thread early([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return go; });
  });
  const hvd_status_t s = hvd_init();
  std::string late;
  std::thread([&] { late = Affinity(pthread_self()); }).join();
  const std::string line = "main=" + Affinity(pthread_self()) +
                           " early=" + Affinity(early.native_handle()) + " late=" + late;
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  early.join();
  if (s != HVD_SUCCESS) {
    std::fprintf(stderr, "init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0, local_rank = 0;
  hvd_rank(&rank);
  hvd_local_rank(&local_rank);
  std::printf("affinity rank=%d local_rank=%d %s\n", rank, local_rank, line.c_str());
  std::fflush(stdout);
  hvd_shutdown();
  return 0;
}
