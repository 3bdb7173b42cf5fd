/* Every bad call to the C API, compiled as C: each returns its documented status and
 * a last-error message that says what was wrong. docs/c_api_errors.md is the table
 * these checks were derived from; keep the two in step.
 *
 * Single process (rank 0 of 1, no dprun). The last part enqueues from 8 threads at
 * once and checks every result. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hvd.h"

static int failures = 0;
static int checks = 0;

/* Checks that `call` returns `want` and, for a failure, that hvd_last_error()
 * contains `substr`. */
#define CHECK(call, want, substr)                                                        \
  do {                                                                                   \
    hvd_status_t got_ = (call);                                                          \
    const char* err_ = hvd_last_error();                                                 \
    ++checks;                                                                            \
    if (got_ != (want) || ((want) != HVD_SUCCESS && strstr(err_, (substr)) == NULL)) {   \
      ++failures;                                                                        \
      fprintf(stderr, "%s:%d: %s\n  returned %s, want %s; last error \"%s\", want it to contain \"%s\"\n", \
              __FILE__, __LINE__, #call, hvd_status_string(got_), hvd_status_string(want), err_, \
              (substr));                                                                 \
    }                                                                                    \
  } while (0)

#define EXPECT(cond)                                                                     \
  do {                                                                                   \
    ++checks;                                                                            \
    if (!(cond)) {                                                                       \
      ++failures;                                                                        \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              hvd_last_error());                                                         \
    }                                                                                    \
  } while (0)

/* A handle value the library never returned. */
#define FORGED_HANDLE ((hvd_handle_t*)(uintptr_t)0x7fffffff)

static float buf[64];
static float out[64];

static void before_init(void) {
  int v = 0;
  hvd_handle_t* h = NULL;
  CHECK(hvd_rank(&v), HVD_NOT_INITIALIZED, "hvd_init has not been called");
  CHECK(hvd_size(&v), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_check_health(), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_allreduce("x", buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_allreduce_async("x", buf, out, 4, HVD_FLOAT32, HVD_SUM, &h), HVD_NOT_INITIALIZED, "hvd_init");
  EXPECT(h == NULL);
  /* The C layer checks pointers first; the runtime, which is not there yet, the rest. */
  CHECK(hvd_allreduce(NULL, buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "tensor name is NULL");
  CHECK(hvd_allreduce("x", buf, out, 4, (hvd_dtype_t)42, HVD_SUM), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_broadcast("x", buf, 4, HVD_FLOAT32, 0, 0), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_barrier(0), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_join(0, &v), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_remove_process_set(1), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_process_set_rank(0, &v), HVD_NOT_INITIALIZED, "hvd_init");
  {
    size_t len = 0;
    CHECK(hvd_straggler_report(NULL, 0, &len), HVD_NOT_INITIALIZED, "hvd_init");
  }
  CHECK(hvd_start_timeline("t.json", 0), HVD_NOT_INITIALIZED, "hvd_init");
  CHECK(hvd_stop_timeline(), HVD_NOT_INITIALIZED, "hvd_init");
  /* Handles are checked before the runtime: a forged one is unknown either way. */
  CHECK(hvd_wait(FORGED_HANDLE, 0), HVD_INVALID_ARGUMENT, "unknown handle");
  /* Shutting down what never started is a no-op. */
  CHECK(hvd_shutdown(), HVD_SUCCESS, "");
  CHECK(hvd_is_initialized(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  EXPECT(hvd_is_initialized(&v) == HVD_SUCCESS && v == 0);
}

static void bad_environment(void) {
  /* A malformed variable names itself; the runtime stays uninitialized. */
  setenv("HVD_TIMEOUT", "soon", 1);
  CHECK(hvd_init(), HVD_INVALID_ARGUMENT, "HVD_TIMEOUT");
  unsetenv("HVD_TIMEOUT");
  setenv("HVD_SIZE", "2", 1);
  CHECK(hvd_init(), HVD_INVALID_ARGUMENT, "HVD_STORE_ADDR");
  unsetenv("HVD_SIZE");
  {
    int v = 1;
    EXPECT(hvd_is_initialized(&v) == HVD_SUCCESS && v == 0);
  }
}

/* hvd_detect_launcher: the launcher hvd_init would find, without initializing. */
static void detect_launcher(void) {
  char text[512];
  size_t length = 0;
  CHECK(hvd_detect_launcher(NULL, 0, NULL), HVD_INVALID_ARGUMENT, "length is NULL");
  CHECK(hvd_detect_launcher(NULL, 4, &length), HVD_INVALID_ARGUMENT, "buf is NULL");
  CHECK(hvd_detect_launcher(text, sizeof(text), &length), HVD_SUCCESS, "");
  EXPECT(strcmp(text, "launcher=\n") == 0 && length == 10);
  /* Open MPI's variables on one node: its rank, size and local rank, and the store
   * on 127.0.0.1 at 20000 + the job id % 10000. */
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  setenv("OMPI_MCA_ess_base_jobid", "123456", 1);
  CHECK(hvd_detect_launcher(text, sizeof(text), &length), HVD_SUCCESS, "");
  EXPECT(strncmp(text, "launcher=Open MPI\n", 18) == 0);
  EXPECT(strstr(text, "\nHVD_RANK=1\n") != NULL && strstr(text, "\nHVD_SIZE=2\n") != NULL);
  EXPECT(strstr(text, "\nHVD_LOCAL_RANK=1\n") != NULL);
  EXPECT(strstr(text, "\nHVD_STORE_ADDR=127.0.0.1:23456\n") != NULL);
  EXPECT(length == strlen(text));
  /* Too small a buffer: truncated, NUL-terminated, the full length reported. */
  CHECK(hvd_detect_launcher(text, 5, &length), HVD_SUCCESS, "");
  EXPECT(strcmp(text, "laun") == 0 && length > 18);
  setenv("OMPI_COMM_WORLD_RANK", "one", 1);
  CHECK(hvd_detect_launcher(text, sizeof(text), &length), HVD_INVALID_ARGUMENT,
        "OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  unsetenv("OMPI_MCA_ess_base_jobid");
}

static void topology(void) {
  CHECK(hvd_rank(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_size(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_local_rank(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_local_size(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_cross_rank(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_cross_size(NULL), HVD_INVALID_ARGUMENT, "out is NULL");
  CHECK(hvd_check_health(), HVD_SUCCESS, "");
}

/* hvd_allreduce_args_t from other versions of hvd.h: one built without
 * hvd_allreduce_args_init, and a later header's larger struct, whose extra bytes
 * this libhvd accepts only while they are zero (their defaults). */
static void allreduce_args_versions(void) {
  hvd_allreduce_args_t zeroed;
  memset(&zeroed, 0, sizeof(zeroed));
  zeroed.name = "never.initialised";
  CHECK(hvd_allreduce_ex(&zeroed, NULL), HVD_INVALID_ARGUMENT,
        "args->struct_size is 0, below the");
  CHECK(hvd_allreduce_ex(&zeroed, NULL), HVD_INVALID_ARGUMENT, "initialise args with hvd_allreduce_args_init");
  zeroed.struct_size = (size_t)1 << 40; /* what an uninitialised stack struct may hold */
  CHECK(hvd_allreduce_ex(&zeroed, NULL), HVD_INVALID_ARGUMENT,
        "args->struct_size is 1099511627776, more than 4096 bytes");

  struct {
    hvd_allreduce_args_t known;
    int64_t later_field;
  } later;
  memset(&later, 0x5a, sizeof(later));
  hvd_allreduce_args_init_sized(&later.known, sizeof(later));
  EXPECT(later.known.struct_size == sizeof(later));
  EXPECT(later.known.prescale_factor == 1.0 && later.known.device == -1);
  EXPECT(later.later_field == 0); /* zeroed: the default of a field it does not know */
  later.known.name = "later.header";
  later.known.sendbuf = buf;
  later.known.recvbuf = out;
  later.known.count = 4;
  CHECK(hvd_allreduce_ex(&later.known, NULL), HVD_SUCCESS, "");
  later.later_field = 3;
  CHECK(hvd_allreduce_ex(&later.known, NULL), HVD_INVALID_ARGUMENT,
        "that this libhvd does not know");

  hvd_allreduce_args_t small;
  memset(&small, 0x5a, sizeof(small));
  hvd_allreduce_args_init_sized(&small, 8); /* below the first version: ignored */
  EXPECT(small.struct_size != 8 && small.count == (int64_t)0x5a5a5a5a5a5a5a5aLL);
}

/* The optional shape of an all-reduce: its product must be the count. */
static void allreduce_shapes(hvd_allreduce_args_t* a) {
  const int64_t shape22[2] = {2, 2};
  const int64_t shape23[2] = {2, 3};
  const int64_t negative[2] = {-2, -2};
  a->name = "shaped";
  a->shape = shape22;
  a->ndim = 2;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_SUCCESS, "");
  a->shape = shape23;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_INVALID_ARGUMENT, "tensor 'shaped': shape [2, 3] does not hold count 4");
  a->shape = negative;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_INVALID_ARGUMENT, "shape [-2, -2] does not hold count 4");
  a->shape = NULL;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_INVALID_ARGUMENT, "tensor 'shaped': shape is NULL");
  a->ndim = -1;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_INVALID_ARGUMENT, "ndim -1 is not in 0..64");
  a->ndim = 65;
  CHECK(hvd_allreduce_ex(a, NULL), HVD_INVALID_ARGUMENT, "ndim 65 is not in 0..64");
  a->ndim = 0; /* NULL and 0: the shape is [count] */
  CHECK(hvd_allreduce_ex(a, NULL), HVD_SUCCESS, "");
}

/* hvd_grouped_allreduce_ex: a group's tensors share set, op, scales and device. */
static void grouped_allreduce_ex(const hvd_allreduce_args_t* base) {
  hvd_allreduce_args_t x = *base, y = *base;
  const hvd_allreduce_args_t* args[2] = {&x, &y};
  hvd_handle_t* hs[2] = {FORGED_HANDLE, FORGED_HANDLE};
  x.name = "gx";
  y.name = "gy";
  CHECK(hvd_grouped_allreduce_ex(0, args, hs), HVD_INVALID_ARGUMENT, "a group needs at least one tensor, got 0");
  CHECK(hvd_grouped_allreduce_ex(2, NULL, hs), HVD_INVALID_ARGUMENT, "args and handles must not be NULL");
  CHECK(hvd_grouped_allreduce_ex(2, args, NULL), HVD_INVALID_ARGUMENT, "args and handles must not be NULL");
  y.op = HVD_MAX;
  CHECK(hvd_grouped_allreduce_ex(2, args, hs), HVD_INVALID_ARGUMENT,
        "tensor 'gy' differs from 'gx' in its process set, reduce op, scale factors or device");
  EXPECT(hs[0] == NULL && hs[1] == NULL);
  y.op = x.op;
  y.name = NULL;
  CHECK(hvd_grouped_allreduce_ex(2, args, hs), HVD_INVALID_ARGUMENT, "args[1]: tensor name is NULL");
  y.name = "gx";
  CHECK(hvd_grouped_allreduce_ex(2, args, hs), HVD_INVALID_USAGE, "");
  y.name = "gy";
  CHECK(hvd_grouped_allreduce_ex(2, args, hs), HVD_SUCCESS, "");
  EXPECT(hvd_wait(hs[0], -1) == HVD_SUCCESS && hvd_wait(hs[1], -1) == HVD_SUCCESS);
  hvd_handle_release(hs[0]);
  hvd_handle_release(hs[1]);
}

static void allreduce(void) {
  hvd_handle_t* h = FORGED_HANDLE;
  hvd_allreduce_args_t a;
  char long_name[HVD_MAX_NAME_LENGTH + 2];
  double inf = 1e308 * 10;

  CHECK(hvd_allreduce(NULL, buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "tensor name is NULL");
  CHECK(hvd_allreduce("", buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "must not be empty");
  memset(long_name, 'n', sizeof(long_name) - 1);
  long_name[sizeof(long_name) - 1] = '\0'; /* 1025 bytes */
  CHECK(hvd_allreduce(long_name, buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT,
        "longer than the limit of 1024");
  long_name[HVD_MAX_NAME_LENGTH] = '\0'; /* exactly 1024: accepted */
  CHECK(hvd_allreduce(long_name, buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_SUCCESS, "");
  CHECK(hvd_allreduce("neg", buf, out, -1, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "negative count -1");
  CHECK(hvd_allreduce("nosend", NULL, out, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "input buffer is null");
  CHECK(hvd_allreduce("norecv", buf, NULL, 4, HVD_FLOAT32, HVD_SUM), HVD_INVALID_ARGUMENT, "output buffer is null");
  CHECK(hvd_allreduce("empty", NULL, NULL, 0, HVD_FLOAT32, HVD_SUM), HVD_SUCCESS, "");
  CHECK(hvd_allreduce("dtype", buf, out, 4, (hvd_dtype_t)42, HVD_SUM), HVD_INVALID_ARGUMENT, "unknown dtype 42");
  CHECK(hvd_allreduce("dtype", buf, out, 4, (hvd_dtype_t)-1, HVD_SUM), HVD_INVALID_ARGUMENT, "unknown dtype -1");
  CHECK(hvd_allreduce("op", buf, out, 4, HVD_FLOAT32, (hvd_reduce_op_t)9), HVD_INVALID_ARGUMENT, "unknown reduce op 9");
  CHECK(hvd_allreduce_async("nohandle", buf, out, 4, HVD_FLOAT32, HVD_SUM, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_allreduce_async(NULL, buf, out, 4, HVD_FLOAT32, HVD_SUM, &h), HVD_INVALID_ARGUMENT, "tensor name is NULL");
  EXPECT(h == NULL); /* On failure *handle is NULL. */

  CHECK(hvd_allreduce_ex(NULL, NULL), HVD_INVALID_ARGUMENT, "args is NULL");
  hvd_allreduce_args_init(NULL); /* Ignored. */
  hvd_allreduce_args_init(&a);
  a.name = "scaled";
  a.sendbuf = buf;
  a.recvbuf = out;
  a.count = 4;
  a.prescale_factor = inf;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT, "scale factors must be finite");
  a.prescale_factor = 1;
  a.postscale_factor = inf - inf; /* NaN */
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT, "scale factors must be finite");
  a.postscale_factor = 1;
  a.process_set = 99;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT, "unknown process set 99");
  a.process_set = -1;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT, "unknown process set -1");
  a.process_set = HVD_GLOBAL_PROCESS_SET;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_SUCCESS, "");
  /* Adasum takes float dtypes in host memory only. */
  CHECK(hvd_allreduce("ada.int", buf, out, 4, HVD_INT32, HVD_ADASUM), HVD_INVALID_ARGUMENT,
        "tensor 'ada.int': Adasum takes float16, bfloat16, float32 or float64, not int32");
  a.name = "ada.device";
  a.op = HVD_ADASUM;
  a.device = 0;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT,
        "tensor 'ada.device': Adasum takes host tensors only, and this one is on cuda:0");
  a.name = "ada";
  a.device = -1;
  buf[0] = 3;
  buf[1] = -1;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_SUCCESS, "");
  EXPECT(out[0] == 3 && out[1] == -1); /* One rank: its own tensor. */
  a.name = "scaled";
  a.op = HVD_SUM;
  allreduce_shapes(&a);
  allreduce_args_versions();
  grouped_allreduce_ex(&a);
}

/* Enqueues allreduce `name` twice back to back; the second finds the first in flight
 * unless it already completed, so a few tries make this deterministic in practice. */
static void same_name_in_flight(void) {
  static float big[1 << 20];
  int tries, seen = 0;
  for (tries = 0; tries < 20 && !seen; ++tries) {
    hvd_handle_t* first = NULL;
    hvd_handle_t* second = NULL;
    EXPECT(hvd_allreduce_async("twice", big, big, 1 << 20, HVD_FLOAT32, HVD_SUM, &first) == HVD_SUCCESS);
    hvd_status_t s = hvd_allreduce_async("twice", big, big, 1 << 20, HVD_FLOAT32, HVD_SUM, &second);
    if (s == HVD_INVALID_USAGE) {
      seen = 1;
      EXPECT(second == NULL);
      EXPECT(strstr(hvd_last_error(), "already in flight") != NULL);
    } else if (s == HVD_SUCCESS) {
      EXPECT(hvd_wait(second, -1) == HVD_SUCCESS);
      hvd_handle_release(second);
    }
    EXPECT(hvd_wait(first, -1) == HVD_SUCCESS);
    hvd_handle_release(first);
  }
  EXPECT(seen);
  /* Once completed, the name may be used again. */
  CHECK(hvd_allreduce("twice", buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_SUCCESS, "");
}

static void handles(void) {
  hvd_handle_t* h = NULL;
  int done = -1;
  const void* data = NULL;
  int64_t nbytes = -1;
  const int64_t* splits = NULL;
  int n = -1;
  static float big[1 << 20];
  int tries, seen = 0;

  CHECK(hvd_poll(NULL, &done), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_wait(NULL, 0), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_wait(FORGED_HANDLE, -1), HVD_INVALID_ARGUMENT, "unknown handle");
  CHECK(hvd_poll(FORGED_HANDLE, &done), HVD_INVALID_ARGUMENT, "unknown handle");
  CHECK(hvd_handle_result(NULL, &data, &nbytes, NULL, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_handle_result(FORGED_HANDLE, &data, &nbytes, NULL, NULL), HVD_INVALID_ARGUMENT, "unknown handle");
  CHECK(hvd_handle_received_splits(FORGED_HANDLE, &splits, &n), HVD_INVALID_ARGUMENT, "unknown handle");
  hvd_handle_release(NULL); /* Ignored. */

  /* A wait that times out says the collective is still running. */
  for (tries = 0; tries < 20 && !seen; ++tries) {
    EXPECT(hvd_allreduce_async("slow", big, big, 1 << 20, HVD_FLOAT32, HVD_SUM, &h) == HVD_SUCCESS);
    if (hvd_wait(h, 0) == HVD_IN_PROGRESS) {
      seen = 1;
      EXPECT(strstr(hvd_last_error(), "still in progress after 0 ms") != NULL);
    }
    EXPECT(hvd_wait(h, -1) == HVD_SUCCESS);
    hvd_handle_release(h);
  }
  EXPECT(seen);

  EXPECT(hvd_allreduce_async("done", buf, out, 4, HVD_FLOAT32, HVD_SUM, &h) == HVD_SUCCESS);
  CHECK(hvd_poll(h, NULL), HVD_INVALID_ARGUMENT, "done is NULL");
  CHECK(hvd_wait(h, -1), HVD_SUCCESS, "");
  EXPECT(hvd_poll(h, &done) == HVD_SUCCESS && done == 1);
  CHECK(hvd_wait(h, 0), HVD_SUCCESS, ""); /* Waiting again returns the same status. */
  /* An allreduce writes into recvbuf: there is no result to hand out. */
  CHECK(hvd_handle_result(h, &data, &nbytes, NULL, NULL), HVD_INVALID_USAGE, "allreduce handle has no result buffer");
  CHECK(hvd_handle_received_splits(h, &splits, &n), HVD_INVALID_USAGE, "only an alltoall handle");
  CHECK(hvd_handle_join_rank(h, &n), HVD_INVALID_USAGE, "not a join handle");
  CHECK(hvd_handle_join_rank(h, NULL), HVD_INVALID_ARGUMENT, "last_rank is NULL");
  hvd_handle_release(h);
  /* Released: every use of it is detected, and releasing again is harmless. */
  CHECK(hvd_wait(h, 0), HVD_INVALID_ARGUMENT, "unknown handle (already released");
  CHECK(hvd_poll(h, &done), HVD_INVALID_ARGUMENT, "unknown handle");
  hvd_handle_release(h);
  EXPECT(strstr(hvd_last_error(), "hvd_handle_release: unknown handle (released twice?)") != NULL);
  hvd_handle_release(FORGED_HANDLE);
  EXPECT(strstr(hvd_last_error(), "unknown handle") != NULL);
  /* A new handle may reuse the released one's slot; the stale one stays detected. */
  hvd_handle_t* again = NULL;
  EXPECT(hvd_allreduce_async("done", buf, out, 4, HVD_FLOAT32, HVD_SUM, &again) == HVD_SUCCESS);
  EXPECT(again != NULL && again != h);
  CHECK(hvd_wait(h, 0), HVD_INVALID_ARGUMENT, "unknown handle (already released");
  CHECK(hvd_wait(again, -1), HVD_SUCCESS, "");
  hvd_handle_release(again);
}

static void shaped(void) {
  hvd_handle_t* h = FORGED_HANDLE;
  int64_t shape2[2] = {4, 2};
  int64_t negative[2] = {4, -2};
  int64_t one[1] = {4};
  const void* data = NULL;
  int64_t nbytes = -1;
  int ndim = -1;
  const int64_t* shape = NULL;

  /* allgather */
  CHECK(hvd_allgather_async(NULL, buf, shape2, 2, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "tensor name is NULL");
  EXPECT(h == NULL);
  CHECK(hvd_allgather_async("ag", buf, shape2, 2, HVD_FLOAT32, 0, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_allgather_async("ag", buf, NULL, 2, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "shape is NULL");
  CHECK(hvd_allgather_async("ag", buf, shape2, 0, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "ndim 0 is not in 1..64");
  CHECK(hvd_allgather_async("ag", buf, shape2, -3, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "ndim -3 is not in 1..64");
  CHECK(hvd_allgather_async("ag", buf, shape2, 65, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "ndim 65 is not in 1..64");
  CHECK(hvd_allgather_async("ag", buf, negative, 2, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "negative dimension -2");
  CHECK(hvd_allgather_async("ag", NULL, shape2, 2, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "input buffer is null");
  CHECK(hvd_allgather_async("ag", buf, shape2, 2, (hvd_dtype_t)9, 0, &h), HVD_INVALID_ARGUMENT, "unknown dtype 9");
  CHECK(hvd_allgather_async("ag", buf, shape2, 2, HVD_FLOAT32, 77, &h), HVD_INVALID_ARGUMENT, "unknown process set 77");
  CHECK(hvd_allgather("ag", buf, shape2, 0, HVD_FLOAT32, 0, &h), HVD_INVALID_ARGUMENT, "ndim 0");
  EXPECT(h == NULL);
  /* A result: any out-parameter may be NULL. */
  CHECK(hvd_allgather("ag", buf, shape2, 2, HVD_FLOAT32, 0, &h), HVD_SUCCESS, "");
  CHECK(hvd_handle_result(h, NULL, NULL, NULL, NULL), HVD_SUCCESS, "");
  CHECK(hvd_handle_result(h, &data, &nbytes, &ndim, &shape), HVD_SUCCESS, "");
  EXPECT(nbytes == 32 && ndim == 2 && shape[0] == 4 && shape[1] == 2);
  CHECK(hvd_handle_received_splits(h, NULL, NULL), HVD_INVALID_USAGE, "only an alltoall handle");
  hvd_handle_release(h);

  /* broadcast */
  CHECK(hvd_broadcast(NULL, buf, 4, HVD_FLOAT32, 0, 0), HVD_INVALID_ARGUMENT, "tensor name is NULL");
  CHECK(hvd_broadcast("bc", buf, -5, HVD_FLOAT32, 0, 0), HVD_INVALID_ARGUMENT, "negative count -5");
  CHECK(hvd_broadcast("bc", NULL, 4, HVD_FLOAT32, 0, 0), HVD_INVALID_ARGUMENT, "input buffer is null");
  CHECK(hvd_broadcast("bc", buf, 4, (hvd_dtype_t)99, 0, 0), HVD_INVALID_ARGUMENT, "unknown dtype 99");
  CHECK(hvd_broadcast("bc", buf, 4, HVD_FLOAT32, 1, 0), HVD_INVALID_ARGUMENT, "root rank 1 is not in 0..0");
  CHECK(hvd_broadcast("bc", buf, 4, HVD_FLOAT32, -1, 0), HVD_INVALID_ARGUMENT, "root rank -1 is not in 0..0");
  CHECK(hvd_broadcast("bc", buf, 4, HVD_FLOAT32, 0, 5), HVD_INVALID_ARGUMENT, "unknown process set 5");
  CHECK(hvd_broadcast_async("bc", buf, 4, HVD_FLOAT32, 0, 0, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_broadcast("bc", buf, 4, HVD_FLOAT32, 0, 0), HVD_SUCCESS, "");

  /* alltoall */
  {
    int64_t two[2] = {2, 2};
    int64_t three[1] = {3};
    int64_t minus[1] = {-1};
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, NULL, 2, 0, &h), HVD_INVALID_ARGUMENT,
          "splits is NULL but nsplits is 2");
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, three, -1, 0, &h), HVD_INVALID_ARGUMENT,
          "negative nsplits");
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, two, 2, 0, &h), HVD_INVALID_ARGUMENT,
          "2 split sizes given for 1 ranks");
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, three, 1, 0, &h), HVD_INVALID_ARGUMENT,
          "split sizes add up to 3 but the first dimension is 4");
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, minus, 1, 0, &h), HVD_INVALID_ARGUMENT,
          "negative split size -1");
    CHECK(hvd_alltoall_async("a2a", buf, one, 0, HVD_FLOAT32, NULL, 0, 0, &h), HVD_INVALID_ARGUMENT,
          "ndim 0 is not in 1..64");
    CHECK(hvd_alltoall_async("a2a", buf, one, 1, HVD_FLOAT32, NULL, 0, 0, NULL), HVD_INVALID_ARGUMENT,
          "handle is NULL");
    CHECK(hvd_alltoall("a2a", buf, one, 1, HVD_FLOAT32, NULL, 0, 0, &h), HVD_SUCCESS, "");
    {
      const int64_t* got = NULL;
      int n = 0;
      CHECK(hvd_handle_received_splits(h, &got, &n), HVD_SUCCESS, "");
      EXPECT(n == 1 && got[0] == 4);
    }
    hvd_handle_release(h);
  }

  /* reducescatter */
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 2, HVD_FLOAT32, HVD_MIN, 1, 1, 0, &h), HVD_INVALID_ARGUMENT,
        "reducescatter supports only sum and average");
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 2, HVD_FLOAT32, HVD_ADASUM, 1, 1, 0, &h), HVD_INVALID_ARGUMENT,
        "reducescatter supports only sum and average");
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 2, HVD_FLOAT32, (hvd_reduce_op_t)7, 1, 1, 0, &h),
        HVD_INVALID_ARGUMENT, "unknown reduce op 7");
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 70, HVD_FLOAT32, HVD_SUM, 1, 1, 0, &h), HVD_INVALID_ARGUMENT,
        "ndim 70 is not in 1..64");
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 2, HVD_FLOAT32, HVD_SUM, 1e308 * 10, 1, 0, &h),
        HVD_INVALID_ARGUMENT, "scale factors must be finite");
  CHECK(hvd_reducescatter_async("rs", buf, shape2, 2, HVD_FLOAT32, HVD_SUM, 1, 1, 0, NULL), HVD_INVALID_ARGUMENT,
        "handle is NULL");
  CHECK(hvd_reducescatter("rs", buf, shape2, 2, HVD_FLOAT32, HVD_AVERAGE, 1, 1, 0, &h), HVD_SUCCESS, "");
  hvd_handle_release(h);
}

static void barrier_and_join(void) {
  hvd_handle_t* h = FORGED_HANDLE;
  int last = -7;
  CHECK(hvd_barrier(3), HVD_INVALID_ARGUMENT, "unknown process set 3");
  CHECK(hvd_barrier_async(0, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_barrier_async(3, &h), HVD_INVALID_ARGUMENT, "unknown process set 3");
  EXPECT(h == NULL);
  CHECK(hvd_barrier(0), HVD_SUCCESS, "");
  CHECK(hvd_join(3, &last), HVD_INVALID_ARGUMENT, "unknown process set 3");
  CHECK(hvd_join_async(0, NULL), HVD_INVALID_ARGUMENT, "handle is NULL");
  CHECK(hvd_join(0, NULL), HVD_SUCCESS, ""); /* last_rank may be NULL */
  CHECK(hvd_join(0, &last), HVD_SUCCESS, "");
  EXPECT(last == 0);
  CHECK(hvd_join_async(0, &h), HVD_SUCCESS, "");
  CHECK(hvd_wait(h, -1), HVD_SUCCESS, "");
  CHECK(hvd_handle_join_rank(h, &last), HVD_SUCCESS, "");
  CHECK(hvd_handle_result(h, NULL, NULL, NULL, NULL), HVD_INVALID_USAGE, "join handle has no result buffer");
  hvd_handle_release(h);
}

static void grouped(void) {
  const char* names[2] = {"g.0", "g.1"};
  const char* same[2] = {"g.same", "g.same"};
  const char* null_name[2] = {"g.0", NULL};
  const void* sends[2] = {buf, buf + 8};
  void* recvs[2] = {out, out + 8};
  int64_t counts[2] = {4, 4};
  int64_t negative[2] = {4, -4};
  hvd_dtype_t dtypes[2] = {HVD_FLOAT32, HVD_FLOAT32};
  hvd_dtype_t bad_dtypes[2] = {HVD_FLOAT32, (hvd_dtype_t)12};
  hvd_dtype_t int_dtypes[2] = {HVD_INT64, HVD_INT64};
  hvd_handle_t* handles[2] = {FORGED_HANDLE, FORGED_HANDLE};
  int64_t s0[2] = {2, 2}, s1[1] = {3};
  const int64_t* shapes[2] = {s0, s1};
  int ndims[2] = {2, 1};
  int bad_ndims[2] = {2, 0};

  CHECK(hvd_grouped_allreduce_async(0, names, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "a group needs at least one tensor, got 0");
  CHECK(hvd_grouped_allreduce_async(-2, names, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "got -2");
  CHECK(hvd_grouped_allreduce_async(2, NULL, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "must not be NULL");
  CHECK(hvd_grouped_allreduce_async(2, names, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, NULL),
        HVD_INVALID_ARGUMENT, "must not be NULL");
  CHECK(hvd_grouped_allreduce_async(2, names, sends, NULL, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "recvbufs and counts must not be NULL");
  CHECK(hvd_grouped_allreduce_async(2, null_name, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "tensor name is NULL");
  EXPECT(handles[0] == NULL && handles[1] == NULL); /* all NULL on failure */
  CHECK(hvd_grouped_allreduce_async(2, names, sends, recvs, counts, bad_dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "tensor 'g.1': unknown dtype 12");
  CHECK(hvd_grouped_allreduce_async(2, names, sends, recvs, negative, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "tensor 'g.1': negative count -4");
  CHECK(hvd_grouped_allreduce_async(2, names, sends, recvs, counts, dtypes, (hvd_reduce_op_t)6, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "unknown reduce op 6");
  CHECK(hvd_grouped_allreduce_async(2, names, sends, recvs, counts, int_dtypes, HVD_ADASUM, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "tensor 'g.0': Adasum takes float16, bfloat16, float32 or float64, not int64");
  EXPECT(handles[0] == NULL && handles[1] == NULL);
  /* One name twice in one group: refused as a whole, nothing enqueued. */
  CHECK(hvd_grouped_allreduce_async(2, same, sends, recvs, counts, dtypes, HVD_SUM, 1, 1, 0, handles),
        HVD_INVALID_USAGE, "tensor 'g.same'");
  EXPECT(handles[0] == NULL && handles[1] == NULL);
  CHECK(hvd_grouped_allreduce(1 << 21, names, sends, recvs, counts, dtypes, HVD_SUM, 0),
        HVD_INVALID_ARGUMENT, "a group has at most 2^20 tensors, got 2097152");
  /* The blocking form says what the async one says (and docs/c_api_errors.md). */
  CHECK(hvd_grouped_allreduce(0, names, sends, recvs, counts, dtypes, HVD_SUM, 0),
        HVD_INVALID_ARGUMENT, "a group needs at least one tensor, got 0");
  CHECK(hvd_grouped_allreduce(-2, names, sends, recvs, counts, dtypes, HVD_SUM, 0),
        HVD_INVALID_ARGUMENT, "a group needs at least one tensor, got -2");
  CHECK(hvd_grouped_allreduce(2, names, sends, recvs, counts, dtypes, HVD_SUM, 0), HVD_SUCCESS, "");

  CHECK(hvd_grouped_allgather_async(2, names, sends, NULL, ndims, dtypes, 0, handles), HVD_INVALID_ARGUMENT,
        "shapes and ndims must not be NULL");
  CHECK(hvd_grouped_allgather_async(2, names, sends, shapes, bad_ndims, dtypes, 0, handles), HVD_INVALID_ARGUMENT,
        "tensor 'g.1': ndim 0 is not in 1..64");
  CHECK(hvd_grouped_reducescatter_async(2, names, sends, shapes, ndims, dtypes, HVD_MAX, 1, 1, 0, handles),
        HVD_INVALID_ARGUMENT, "reducescatter supports only sum and average");
}

static void process_sets(void) {
  int zero[1] = {0};
  int dup[2] = {0, 0};
  int far[1] = {5};
  int32_t id = -1;
  int v = -1, n = -1;
  int ranks[4];
  float o[4];
  hvd_allreduce_args_t a;

  CHECK(hvd_add_process_set(zero, 1, NULL), HVD_INVALID_ARGUMENT, "id is NULL");
  CHECK(hvd_add_process_set(NULL, 1, &id), HVD_INVALID_ARGUMENT, "ranks is NULL");
  CHECK(hvd_add_process_set(zero, -1, &id), HVD_INVALID_ARGUMENT, "negative nranks");
  CHECK(hvd_add_process_set(NULL, 0, &id), HVD_INVALID_ARGUMENT, "a process set needs at least one rank");
  CHECK(hvd_add_process_set(dup, 2, &id), HVD_INVALID_ARGUMENT, "repeat a rank");
  CHECK(hvd_add_process_set(far, 1, &id), HVD_INVALID_ARGUMENT, "[5]");
  CHECK(hvd_remove_process_set(0), HVD_INVALID_ARGUMENT, "the global process set cannot be removed");
  CHECK(hvd_remove_process_set(42), HVD_INVALID_ARGUMENT, "unknown process set 42");
  CHECK(hvd_process_set_rank(0, NULL), HVD_INVALID_ARGUMENT, "rank is NULL");
  CHECK(hvd_process_set_size(0, NULL), HVD_INVALID_ARGUMENT, "size is NULL");
  CHECK(hvd_process_set_ranks(0, ranks, 4, NULL), HVD_INVALID_ARGUMENT, "n is NULL");
  CHECK(hvd_process_set_ranks(0, NULL, 4, &n), HVD_INVALID_ARGUMENT, "ranks is NULL");
  CHECK(hvd_process_set_ranks(0, NULL, 0, &n), HVD_SUCCESS, ""); /* sizing call */
  CHECK(hvd_process_set_ranks(0, ranks, -1, &n), HVD_INVALID_ARGUMENT, "capacity -1 is negative");
  EXPECT(n == 1);
  CHECK(hvd_process_set_rank(42, &v), HVD_INVALID_ARGUMENT, "unknown process set 42");

  CHECK(hvd_add_process_set(zero, 1, &id), HVD_SUCCESS, "");
  EXPECT(id == 1);
  CHECK(hvd_process_set_rank(id, &v), HVD_SUCCESS, "");
  EXPECT(v == 0);
  CHECK(hvd_remove_process_set(id), HVD_SUCCESS, "");
  /* A removed set says so, in every call that takes one. */
  CHECK(hvd_remove_process_set(id), HVD_INVALID_ARGUMENT, "process set 1 has been removed");
  CHECK(hvd_process_set_rank(id, &v), HVD_INVALID_ARGUMENT, "has been removed");
  CHECK(hvd_process_set_size(id, &v), HVD_INVALID_ARGUMENT, "has been removed");
  CHECK(hvd_barrier(id), HVD_INVALID_ARGUMENT, "has been removed");
  CHECK(hvd_broadcast("ps.bc", buf, 4, HVD_FLOAT32, 0, id), HVD_INVALID_ARGUMENT, "has been removed");
  hvd_allreduce_args_init(&a);
  a.name = "ps.ar";
  a.sendbuf = buf;
  a.recvbuf = o;
  a.count = 4;
  a.process_set = id;
  CHECK(hvd_allreduce_ex(&a, NULL), HVD_INVALID_ARGUMENT, "process set 1 has been removed");
}

static void strings_and_reports(void) {
  size_t len = 0;
  char small[4];
  EXPECT(strcmp(hvd_status_string(HVD_IN_PROGRESS), "HVD_IN_PROGRESS") == 0);
  EXPECT(strcmp(hvd_status_string((hvd_status_t)99), "HVD_UNKNOWN_STATUS") == 0);
  EXPECT(strcmp(hvd_status_string((hvd_status_t)-1), "HVD_UNKNOWN_STATUS") == 0);
  EXPECT(hvd_last_error() != NULL);
  CHECK(hvd_straggler_report(small, sizeof(small), NULL), HVD_INVALID_ARGUMENT, "length is NULL");
  CHECK(hvd_straggler_report(NULL, 8, &len), HVD_INVALID_ARGUMENT, "buf is NULL");
  CHECK(hvd_straggler_report(NULL, 0, &len), HVD_SUCCESS, ""); /* sizing call */
  EXPECT(len > 0);
  CHECK(hvd_straggler_report(small, sizeof(small), &len), HVD_SUCCESS, "");
  EXPECT(strlen(small) == sizeof(small) - 1); /* truncated, NUL-terminated */

  CHECK(hvd_start_timeline(NULL, 0), HVD_INVALID_ARGUMENT, "file_path is NULL");
  CHECK(hvd_start_timeline("/nonexistent-dir/t.json", 0), HVD_INVALID_ARGUMENT,
        "cannot open timeline '/nonexistent-dir/t.json' for writing");
  CHECK(hvd_stop_timeline(), HVD_SUCCESS, "");
  CHECK(hvd_stop_timeline(), HVD_SUCCESS, "");
}

/* After shutdown every call says so, a handle from before still answers, and hvd_init
 * starts again. */
static void after_shutdown(void) {
  hvd_handle_t* early = NULL;
  hvd_handle_t* pending = NULL;
  static float big[1 << 20];
  int v = -1, done = 0;
  EXPECT(hvd_allreduce_async("early", buf, out, 4, HVD_FLOAT32, HVD_SUM, &early) == HVD_SUCCESS);
  EXPECT(hvd_wait(early, -1) == HVD_SUCCESS);
  EXPECT(hvd_allreduce_async("pending", big, big, 1 << 20, HVD_FLOAT32, HVD_SUM, &pending) == HVD_SUCCESS);
  CHECK(hvd_shutdown(), HVD_SUCCESS, "");
  /* Nothing is left hanging: a collective pending at shutdown has completed, either
   * way. */
  EXPECT(hvd_poll(pending, &done) == HVD_SUCCESS && done == 1);
  {
    hvd_status_t s = hvd_wait(pending, 0);
    EXPECT(s == HVD_SUCCESS || s == HVD_SHUT_DOWN);
  }
  hvd_handle_release(pending);
  CHECK(hvd_shutdown(), HVD_SUCCESS, ""); /* twice: a no-op */
  CHECK(hvd_rank(&v), HVD_SHUT_DOWN, "the runtime has been shut down (hvd_shutdown)");
  CHECK(hvd_check_health(), HVD_SHUT_DOWN, "shut down");
  CHECK(hvd_allreduce("late", buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_SHUT_DOWN, "shut down");
  CHECK(hvd_barrier(0), HVD_SHUT_DOWN, "shut down");
  CHECK(hvd_add_process_set(&v, 1, (int32_t*)&v), HVD_SHUT_DOWN, "shut down");
  CHECK(hvd_wait(early, 0), HVD_SUCCESS, "");
  hvd_handle_release(early);
  EXPECT(hvd_is_initialized(&v) == HVD_SUCCESS && v == 0);
  CHECK(hvd_init(), HVD_SUCCESS, "");
  CHECK(hvd_allreduce("again", buf, out, 4, HVD_FLOAT32, HVD_SUM), HVD_SUCCESS, "");
}

/* ---- Many threads at once ------------------------------------------------------ */

enum { kThreads = 8, kPerThread = 200, kCount = 16 };

struct worker {
  int index;
  int errors;
  float in[kPerThread][kCount];
  float out[kPerThread][kCount];
  hvd_handle_t* handles[kPerThread];
};

static void* enqueue_many(void* arg) {
  struct worker* w = (struct worker*)arg;
  char name[64];
  int i, j;
  for (i = 0; i < kPerThread; ++i) {
    for (j = 0; j < kCount; ++j) w->in[i][j] = (float)(w->index * 1000 + i * 3 + j);
    snprintf(name, sizeof(name), "thread%d.%d", w->index, i);
    if (hvd_allreduce_async(name, w->in[i], w->out[i], kCount, HVD_FLOAT32, HVD_SUM, &w->handles[i]) !=
        HVD_SUCCESS) {
      fprintf(stderr, "thread %d: enqueue %d failed: %s\n", w->index, i, hvd_last_error());
      w->handles[i] = NULL;
      ++w->errors;
    }
  }
  for (i = 0; i < kPerThread; ++i) {
    if (w->handles[i] == NULL) continue;
    if (hvd_wait(w->handles[i], 60000) != HVD_SUCCESS) {
      fprintf(stderr, "thread %d: wait %d failed: %s\n", w->index, i, hvd_last_error());
      ++w->errors;
    }
    hvd_handle_release(w->handles[i]);
    for (j = 0; j < kCount; ++j) {
      if (w->out[i][j] != w->in[i][j]) {
        fprintf(stderr, "thread %d: tensor %d element %d is %g, want %g\n", w->index, i, j,
                w->out[i][j], w->in[i][j]);
        ++w->errors;
        break;
      }
    }
  }
  return NULL;
}

static void many_threads(void) {
  static struct worker workers[kThreads];
  pthread_t threads[kThreads];
  int t;
  for (t = 0; t < kThreads; ++t) {
    workers[t].index = t;
    workers[t].errors = 0;
    EXPECT(pthread_create(&threads[t], NULL, enqueue_many, &workers[t]) == 0);
  }
  for (t = 0; t < kThreads; ++t) {
    pthread_join(threads[t], NULL);
    EXPECT(workers[t].errors == 0);
  }
  CHECK(hvd_check_health(), HVD_SUCCESS, "");
}

int main(void) {
  before_init();
  bad_environment();
  detect_launcher();
  CHECK(hvd_init(), HVD_SUCCESS, "");
  CHECK(hvd_init(), HVD_SUCCESS, ""); /* while initialized: a no-op */
  topology();
  allreduce();
  same_name_in_flight();
  handles();
  shaped();
  barrier_and_join();
  grouped();
  process_sets();
  strings_and_reports();
  after_shutdown();
  many_threads();
  CHECK(hvd_shutdown(), HVD_SUCCESS, "");
  printf("%d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
