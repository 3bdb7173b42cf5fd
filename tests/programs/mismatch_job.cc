// Rank program for the process tests: every rank all-reduces "grad", with rank 1
// submitting one element fewer. Each rank prints the status it got, then checks
// that a later, well-formed all-reduce still works. Exits 0 when it saw
// HVD_MISMATCH and the later all-reduce succeeded.
#include <cstdio>
#include <vector>

#include "hvd.h"

int main() {
  if (hvd_init() != HVD_SUCCESS) {
    std::fprintf(stderr, "init failed: %s\n", hvd_last_error());
    return 2;
  }
  int rank = 0, size = 0;
  hvd_rank(&rank);
  hvd_size(&size);
  const int64_t n = rank == 1 ? 9 : 10;
  std::vector<float> buf(10, 1.0f);
  hvd_status_t s = hvd_allreduce("grad", buf.data(), buf.data(), n, HVD_FLOAT32, HVD_SUM);
  std::printf("rank %d: %s: %s\n", rank, hvd_status_string(s), hvd_last_error());
  std::vector<int> ok(1, 1);
  hvd_status_t after = hvd_allreduce("after", ok.data(), ok.data(), 1, HVD_INT32, HVD_SUM);
  std::printf("rank %d: after: %s sum=%d\n", rank, hvd_status_string(after), ok[0]);
  hvd_shutdown();
  return (s == HVD_MISMATCH && after == HVD_SUCCESS && ok[0] == size) ? 0 : 1;
}
