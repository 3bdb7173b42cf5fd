/* Built against an installed dprun with `pkg-config --cflags --libs hvd`: a C
 * program that sums its rank over the job. */
#include <hvd.h>
#include <stdio.h>

int main(void) {
  int rank = 0, size = 0;
  int x;
  if (hvd_init() != HVD_SUCCESS) {
    fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  hvd_rank(&rank);
  hvd_size(&size);
  x = rank + 1;
  if (hvd_allreduce("hello.x", &x, &x, 1, HVD_INT32, HVD_SUM) != HVD_SUCCESS) {
    fprintf(stderr, "allreduce: %s\n", hvd_last_error());
    return 1;
  }
  printf("hello rank %d of %d: sum %d\n", rank, size, x);
  hvd_shutdown();
  return x == size * (size + 1) / 2 ? 0 : 1;
}
