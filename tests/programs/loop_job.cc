// Rank program for failure tests: all-reduces a tensor in a loop and checks each
// result. Prints "rank R pid P" at start and "rank R step S" every 10 steps; on a
// failed collective prints "rank R failed at step S: STATUS: detail" and exits 1.
//   loop_job STEPS [SLOW_RANK SLOW_MS]   (SLOW_RANK sleeps SLOW_MS before each step)
// LOOP_LEAVE=RANK:STEP:HOW makes RANK leave early, before step STEP: HOW "exit" exits
// with code 0 at once, "shutdown" calls hvd_shutdown and then exits with code 0.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "hvd.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 100;
  const int slow_rank = argc > 2 ? std::atoi(argv[2]) : -1;
  const int slow_ms = argc > 3 ? std::atoi(argv[3]) : 0;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (hvd_init() != HVD_SUCCESS) {
    std::printf("init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0, size = 0;
  hvd_rank(&rank);
  hvd_size(&size);
  std::printf("rank %d pid %d\n", rank, static_cast<int>(getpid()));
  int leave_rank = -1, leave_step = -1;
  char leave_how[16] = "";
  if (const char* leave = std::getenv("LOOP_LEAVE"))
    std::sscanf(leave, "%d:%d:%15s", &leave_rank, &leave_step, leave_how);
  std::vector<float> buf(1000);
  for (int step = 0; step < steps; ++step) {
    if (rank == leave_rank && step == leave_step) {
      std::printf("rank %d leaves at step %d (%s)\n", rank, step, leave_how);
      if (std::strcmp(leave_how, "shutdown") == 0) hvd_shutdown();
      std::_Exit(0);
    }
    if (rank == slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
    for (auto& x : buf) x = static_cast<float>(rank + step);
    hvd_status_t s = hvd_allreduce("loop", buf.data(), buf.data(), 1000, HVD_FLOAT32, HVD_SUM);
    if (s != HVD_SUCCESS) {
      std::printf("rank %d failed at step %d: %s: %s\n", rank, step, hvd_status_string(s), hvd_last_error());
      return 1;
    }
    const float want = static_cast<float>(size * step + size * (size - 1) / 2);
    if (buf[999] != want) {
      std::printf("rank %d wrong result at step %d: %f != %f\n", rank, step, buf[999], want);
      return 3;
    }
    if (step % 10 == 0) std::printf("rank %d step %d\n", rank, step);
  }
  hvd_shutdown();
  return 0;
}
