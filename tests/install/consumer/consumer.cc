// Built against an installed dprun (find_package(hvd)): checks that the library it
// loads is the header's version and that an allreduce over the job is right.
#include <hvd.h>

#include <cstdio>
#include <vector>

int main() {
  int major = -1, minor = -1, patch = -1, abi = -1;
  hvd_version(&major, &minor, &patch, &abi);
  if (major != HVD_VERSION_MAJOR || minor != HVD_VERSION_MINOR || abi != HVD_ABI_VERSION) {
    std::fprintf(stderr, "header %d.%d, library %d.%d\n", HVD_VERSION_MAJOR, HVD_VERSION_MINOR,
                 major, minor);
    return 1;
  }
  if (hvd_init() != HVD_SUCCESS) {
    std::fprintf(stderr, "hvd_init: %s\n", hvd_last_error());
    return 1;
  }
  int rank = 0, size = 0;
  hvd_rank(&rank);
  hvd_size(&size);
  std::vector<float> v(8, static_cast<float>(rank + 1));
  if (hvd_allreduce("consumer.v", v.data(), v.data(), 8, HVD_FLOAT32, HVD_SUM) != HVD_SUCCESS) {
    std::fprintf(stderr, "allreduce: %s\n", hvd_last_error());
    return 1;
  }
  const float want = size * (size + 1) / 2.0f;
  std::printf("consumer rank %d of %d: sum %g (want %g) version %d.%d.%d\n", rank, size, v[0],
              want, major, minor, patch);
  hvd_shutdown();
  return v[0] == want ? 0 : 1;
}
