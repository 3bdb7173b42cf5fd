// Rank program for the process tests: rank r all-reduces a tensor named after
// itself ("only.<r>"), so no tensor is ever submitted by every rank. With the
// default settings the stall shutdown (HVD_STALL_SHUTDOWN_TIME, 30 minutes unless
// set) fails it everywhere, naming the tensor and the ranks that never submitted
// it. Prints the status it got; exits 0 when that was HVD_TIMEOUT.
#include <cstdio>
#include <string>
#include <vector>

#include "hvd.h"

int main() {
  if (hvd_init() != HVD_SUCCESS) {
    std::fprintf(stderr, "init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0;
  hvd_rank(&rank);
  std::vector<float> buf(4, 1.0f);
  const std::string name = "only." + std::to_string(rank);
  hvd_status_t s = hvd_allreduce(name.c_str(), buf.data(), buf.data(), 4, HVD_FLOAT32, HVD_SUM);
  std::printf("rank %d: %s: %s\n", rank, hvd_status_string(s), hvd_last_error());
  std::fflush(stdout);
  hvd_shutdown();
  return s == HVD_TIMEOUT ? 0 : 1;
}
