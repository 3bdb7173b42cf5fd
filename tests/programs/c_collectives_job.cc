// Rank program: every collective of the C API across the job's ranks, each
// checked against a local reference. Prints "rank R: N checks passed" and exits 0,
// or prints the first failed check and exits 1.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "hvd.h"

static int g_rank = 0, g_checks = 0;

#define CHECK(cond)                                                                         \
  do {                                                                                      \
    ++g_checks;                                                                             \
    if (!(cond)) {                                                                          \
      std::printf("rank %d: check failed at line %d: %s (last error: %s)\n", g_rank, __LINE__, \
                  #cond, hvd_last_error());                                                 \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (hvd_init() != HVD_SUCCESS) {
    std::printf("init failed: %s\n", hvd_last_error());
    return 2;
  }
  int size = 0;
  hvd_rank(&g_rank);
  hvd_size(&size);
  const int rank = g_rank;
  const char* plane = "?";
  CHECK(hvd_host_backend(HVD_GLOBAL_PROCESS_SET, &plane) == HVD_SUCCESS);

  // allreduce, blocking and async, in place.
  std::vector<double> a(5, rank + 1.0);
  CHECK(hvd_allreduce("c.ar", a.data(), a.data(), 5, HVD_FLOAT64, HVD_SUM) == HVD_SUCCESS);
  CHECK(a[4] == size * (size + 1) / 2.0);

  // allgather: rank r sends r + 1 rows of 2.
  std::vector<int32_t> ag(2 * (rank + 1), rank);
  int64_t shape[2] = {rank + 1, 2};
  hvd_handle_t* h = nullptr;
  CHECK(hvd_allgather("c.ag", ag.data(), shape, 2, HVD_INT32, HVD_GLOBAL_PROCESS_SET, &h) == HVD_SUCCESS);
  const void* data = nullptr;
  int64_t nbytes = 0;
  int ndim = 0;
  const int64_t* out_shape = nullptr;
  CHECK(hvd_handle_result(h, &data, &nbytes, &ndim, &out_shape) == HVD_SUCCESS);
  CHECK(ndim == 2 && out_shape[0] == size * (size + 1) / 2 && out_shape[1] == 2);
  CHECK(reinterpret_cast<uintptr_t>(data) % 64 == 0);  // hvd.h: host results are 64-byte aligned
  {
    const int32_t* v = static_cast<const int32_t*>(data);
    int64_t i = 0;
    for (int r = 0; r < size; ++r)
      for (int k = 0; k < 2 * (r + 1); ++k) CHECK(v[i++] == r);
  }
  hvd_handle_release(h);

  // broadcast from the last rank.
  std::vector<float> b(3, static_cast<float>(rank));
  CHECK(hvd_broadcast("c.bc", b.data(), 3, HVD_FLOAT32, size - 1, HVD_GLOBAL_PROCESS_SET) == HVD_SUCCESS);
  CHECK(b[0] == size - 1);

  // alltoall with splits: send r+1 rows to rank r... rows valued 100*rank + dest.
  std::vector<int64_t> splits(size);
  std::vector<int64_t> send;
  for (int d = 0; d < size; ++d) {
    splits[d] = d + 1;
    for (int k = 0; k <= d; ++k) send.push_back(100 * rank + d);
  }
  int64_t a2a_shape[1] = {static_cast<int64_t>(send.size())};
  CHECK(hvd_alltoall("c.a2a", send.data(), a2a_shape, 1, HVD_INT64, splits.data(), size,
                     HVD_GLOBAL_PROCESS_SET, &h) == HVD_SUCCESS);
  CHECK(hvd_handle_result(h, &data, &nbytes, &ndim, &out_shape) == HVD_SUCCESS);
  CHECK(out_shape[0] == size * (rank + 1));
  const int64_t* rs = nullptr;
  int nrs = 0;
  CHECK(hvd_handle_received_splits(h, &rs, &nrs) == HVD_SUCCESS && nrs == size);
  for (int s = 0; s < size; ++s) {
    CHECK(rs[s] == rank + 1);
    for (int k = 0; k <= rank; ++k)
      CHECK(static_cast<const int64_t*>(data)[s * (rank + 1) + k] == 100 * s + rank);
  }
  hvd_handle_release(h);

  // reducescatter of size*2+1 rows: the first rank gets the extra row.
  const int64_t rows = 2 * size + 1;
  std::vector<float> rsin(rows, 1.0f);
  int64_t rs_shape[1] = {rows};
  CHECK(hvd_reducescatter("c.rs", rsin.data(), rs_shape, 1, HVD_FLOAT32, HVD_AVERAGE, 1.0, 1.0,
                          HVD_GLOBAL_PROCESS_SET, &h) == HVD_SUCCESS);
  CHECK(hvd_handle_result(h, &data, &nbytes, &ndim, &out_shape) == HVD_SUCCESS);
  CHECK(out_shape[0] == (rank == 0 ? 3 : 2));
  CHECK(static_cast<const float*>(data)[0] == 1.0f);
  hvd_handle_release(h);

  // grouped allreduce.
  std::vector<float> g0(4, 1.0f), g1(7, 2.0f);
  const char* names[2] = {"c.g0", "c.g1"};
  const void* sb[2] = {g0.data(), g1.data()};
  void* rb[2] = {g0.data(), g1.data()};
  const int64_t counts[2] = {4, 7};
  const hvd_dtype_t dtypes[2] = {HVD_FLOAT32, HVD_FLOAT32};
  CHECK(hvd_grouped_allreduce(2, names, sb, rb, counts, dtypes, HVD_SUM, HVD_GLOBAL_PROCESS_SET) == HVD_SUCCESS);
  CHECK(g0[3] == size && g1[6] == 2 * size);

  // barrier, a process set of the even ranks, join.
  CHECK(hvd_barrier(HVD_GLOBAL_PROCESS_SET) == HVD_SUCCESS);
  std::vector<int> evens;
  for (int r = 0; r < size; r += 2) evens.push_back(r);
  int32_t set = -1;
  CHECK(hvd_add_process_set(evens.data(), static_cast<int>(evens.size()), &set) == HVD_SUCCESS);
  int set_rank = -2, set_size = 0;
  CHECK(hvd_process_set_rank(set, &set_rank) == HVD_SUCCESS);
  CHECK(hvd_process_set_size(set, &set_size) == HVD_SUCCESS && set_size == static_cast<int>(evens.size()));
  if (rank % 2 == 0) {
    CHECK(set_rank == rank / 2);
    std::vector<int32_t> s(2, 1);
    CHECK(hvd_allreduce_async("c.set", s.data(), s.data(), 2, HVD_INT32, HVD_SUM, &h) == HVD_SUCCESS);
    CHECK(hvd_wait(h, 30000) == HVD_SUCCESS);
    hvd_handle_release(h);
    hvd_allreduce_args_t args;
    hvd_allreduce_args_init(&args);
    args.name = "c.set.only";
    args.sendbuf = args.recvbuf = s.data();
    args.count = 2;
    args.dtype = HVD_INT32;
    args.process_set = set;
    CHECK(hvd_allreduce_ex(&args, nullptr) == HVD_SUCCESS);
    CHECK(s[0] == size * static_cast<int>(evens.size()));
  } else {
    CHECK(set_rank == -1);
    std::vector<int32_t> s(2, 1);
    CHECK(hvd_allreduce_async("c.set", s.data(), s.data(), 2, HVD_INT32, HVD_SUM, &h) == HVD_SUCCESS);
    CHECK(hvd_wait(h, 30000) == HVD_SUCCESS);
    hvd_handle_release(h);
  }
  CHECK(hvd_remove_process_set(set) == HVD_SUCCESS);
  CHECK(hvd_process_set_rank(set, &set_rank) == HVD_INVALID_ARGUMENT);
  CHECK(std::strstr(hvd_last_error(), "has been removed") != nullptr);

  CHECK(hvd_join_async(HVD_GLOBAL_PROCESS_SET, &h) == HVD_SUCCESS);
  CHECK(hvd_wait(h, 30000) == HVD_SUCCESS);
  int last = -1;
  CHECK(hvd_handle_join_rank(h, &last) == HVD_SUCCESS && last >= 0 && last < size);
  hvd_handle_release(h);

  char report[4096];
  size_t len = 0;
  CHECK(hvd_straggler_report(report, sizeof(report), &len) == HVD_SUCCESS && len > 0);
  CHECK(hvd_shutdown() == HVD_SUCCESS);
  std::printf("rank %d: %d checks passed over %s\n", rank, g_checks, plane);
  return 0;
}
