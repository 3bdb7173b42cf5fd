// Rank program for the multi-host and launch-by-environment tests. Prints its place in
// the job as the runtime sees it, then runs `steps` all-reduces of (rank + 1), sleeping
// `sleep_ms` between them, and checks each sum. Exits 0 when every step was right, 2
// if init failed, 3 if a step failed (after printing why to stderr).
//
//   topology_job [steps [sleep_ms]]
//
// stdout: "topology rank=R size=S local_rank=L local_size=LS cross_rank=C cross_size=CS",
// then "step K ok" per step and "done".
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "hvd.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 1;
  const int sleep_ms = argc > 2 ? std::atoi(argv[2]) : 0;
  if (hvd_init() != HVD_SUCCESS) {
    std::fprintf(stderr, "init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0, size = 0, local_rank = 0, local_size = 0, cross_rank = 0, cross_size = 0;
  hvd_rank(&rank);
  hvd_size(&size);
  hvd_local_rank(&local_rank);
  hvd_local_size(&local_size);
  hvd_cross_rank(&cross_rank);
  hvd_cross_size(&cross_size);
  std::printf("topology rank=%d size=%d local_rank=%d local_size=%d cross_rank=%d cross_size=%d\n",
              rank, size, local_rank, local_size, cross_rank, cross_size);
  std::fflush(stdout);
  for (int step = 0; step < steps; ++step) {
    int value = rank + 1;
    const hvd_status_t s = hvd_allreduce("step", &value, &value, 1, HVD_INT32, HVD_SUM);
    if (s != HVD_SUCCESS || value != size * (size + 1) / 2) {
      std::fprintf(stderr, "rank %d: step %d: %s: %s (sum %d)\n", rank, step, hvd_status_string(s),
                   s == HVD_SUCCESS ? "wrong sum" : hvd_last_error(), value);
      return 3;
    }
    std::printf("step %d ok\n", step);
    std::fflush(stdout);
    if (sleep_ms > 0) usleep(static_cast<useconds_t>(sleep_ms) * 1000);
  }
  hvd_shutdown();
  std::printf("done\n");
  return 0;
}
