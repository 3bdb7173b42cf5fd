// Rank program for the many-rank tests (tests/scale): each step all-reduces, as one
// batch of async calls, 300 tensors of 256 floats (fused: halving-doubling over
// Gloo at 64 ranks) and one of 2M floats (the ring), then checks every element of
// every tensor against the exact sum (the inputs are small integers, so the float
// sums are exact whatever the order). Prints "rank R pid P" at start, "rank R step
// S" every 5 steps and "rank R done" at the end; on a failed collective "rank R
// failed at step S: STATUS: detail" (exit 1), on a wrong element "rank R wrong
// result ..." (exit 3).
//   scale_job STEPS
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hvd.h"

namespace {

constexpr int kSmall = 300;
constexpr int64_t kSmallCount = 256;
constexpr int64_t kLargeCount = 2 << 20;

// Rank r's element i of tensor t at step s, and its sum over `size` ranks.
float Input(int r, int t, int64_t i, int s) { return static_cast<float>((r + 1) * (1 + (i + 3 * t + s) % 5)); }
float Sum(int size, int t, int64_t i, int s) {
  return static_cast<float>(size * (size + 1) / 2 * (1 + (i + 3 * t + s) % 5));
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10;
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (hvd_init() != HVD_SUCCESS) {
    std::printf("init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0, size = 0;
  hvd_rank(&rank);
  hvd_size(&size);
  std::printf("rank %d pid %d\n", rank, static_cast<int>(getpid()));
  std::vector<std::vector<float>> in(kSmall + 1), out(kSmall + 1);
  for (int t = 0; t <= kSmall; ++t) {
    const int64_t n = t < kSmall ? kSmallCount : kLargeCount;
    in[t].resize(n);
    out[t].resize(n);
  }
  std::vector<hvd_handle_t*> handles(kSmall + 1, nullptr);
  for (int step = 0; step < steps; ++step) {
    for (int t = 0; t <= kSmall; ++t) {
      for (int64_t i = 0; i < static_cast<int64_t>(in[t].size()); ++i) in[t][i] = Input(rank, t, i, step);
      const std::string name = "scale." + std::to_string(t);
      hvd_status_t s = hvd_allreduce_async(name.c_str(), in[t].data(), out[t].data(),
                                           static_cast<int64_t>(in[t].size()), HVD_FLOAT32,
                                           HVD_SUM, &handles[t]);
      if (s != HVD_SUCCESS) {
        std::printf("rank %d failed at step %d: %s: %s\n", rank, step, hvd_status_string(s),
                    hvd_last_error());
        return 1;
      }
    }
    for (int t = 0; t <= kSmall; ++t) {
      hvd_status_t s = hvd_wait(handles[t], -1);
      hvd_handle_release(handles[t]);
      if (s != HVD_SUCCESS) {
        std::printf("rank %d failed at step %d: %s: %s\n", rank, step, hvd_status_string(s),
                    hvd_last_error());
        return 1;
      }
      for (int64_t i = 0; i < static_cast<int64_t>(out[t].size()); ++i) {
        if (out[t][i] != Sum(size, t, i, step)) {
          std::printf("rank %d wrong result at step %d: tensor %d element %lld is %f, not %f\n",
                      rank, step, t, static_cast<long long>(i), out[t][i], Sum(size, t, i, step));
          return 3;
        }
      }
    }
    if (step % 5 == 0) std::printf("rank %d step %d\n", rank, step);
  }
  if (hvd_shutdown() != HVD_SUCCESS) {
    std::printf("rank %d shutdown failed: %s\n", rank, hvd_last_error());
    return 1;
  }
  std::printf("rank %d done\n", rank);
  return 0;
}
