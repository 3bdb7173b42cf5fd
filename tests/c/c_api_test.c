/* The C API compiled as C: single-process behaviour of every entry point. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hvd.h"

static int failures = 0;
static int checks = 0;

/* A completion callback's record (hvd_handle_on_done). */
typedef struct {
  int calls;
  hvd_status_t status;
  char detail[256];
  pthread_t thread;
  float first; /* the output's first element as the callback saw it */
  const float* out;
} done_record_t;

static void record_done(void* arg, hvd_status_t status, const char* detail) {
  done_record_t* r = (done_record_t*)arg;
  __atomic_add_fetch(&r->calls, 1, __ATOMIC_SEQ_CST);
  r->status = status;
  snprintf(r->detail, sizeof(r->detail), "%s", detail);
  r->thread = pthread_self();
  r->first = r->out ? r->out[0] : -1.0f;
}

/* Waits up to 10 s for a callback. */
static int wait_calls(const done_record_t* r, int target) {
  int i;
  for (i = 0; i < 10000 && __atomic_load_n(&r->calls, __ATOMIC_SEQ_CST) < target; ++i) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  return __atomic_load_n(&r->calls, __ATOMIC_SEQ_CST) >= target;
}

#define EXPECT(cond)                                                  \
  do {                                                                \
    ++checks;                                                         \
    if (!(cond)) {                                                    \
      ++failures;                                                     \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              hvd_last_error());                                      \
    }                                                                 \
  } while (0)

int main(void) {
  int v = -1;
  float buf[4] = {1, 2, 3, 4};
  float out[4] = {0};
  hvd_handle_t* h = NULL;
  int done = 0;

  /* Before init. */
  EXPECT(hvd_rank(&v) == HVD_NOT_INITIALIZED);
  EXPECT(strstr(hvd_last_error(), "hvd_init") != NULL);
  EXPECT(hvd_allreduce("x", buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_NOT_INITIALIZED);
  EXPECT(hvd_is_initialized(&v) == HVD_SUCCESS && v == 0);
  EXPECT(strcmp(hvd_status_string(HVD_MISMATCH), "HVD_MISMATCH") == 0);

  /* Init: without dprun this is rank 0 of 1. Twice is a no-op. */
  EXPECT(hvd_init() == HVD_SUCCESS);
  EXPECT(hvd_init() == HVD_SUCCESS);
  EXPECT(hvd_is_initialized(&v) == HVD_SUCCESS && v == 1);
  EXPECT(hvd_rank(&v) == HVD_SUCCESS && v == 0);
  EXPECT(hvd_size(&v) == HVD_SUCCESS && v == 1);
  EXPECT(hvd_local_size(&v) == HVD_SUCCESS && v == 1);
  EXPECT(hvd_cross_size(&v) == HVD_SUCCESS && v == 1);
  EXPECT(hvd_rank(NULL) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_check_health() == HVD_SUCCESS);
  {
    /* Not an elastic job (no dprun --min-np): generation -1, never an update. */
    int64_t generation = 7;
    int pending = 7;
    EXPECT(hvd_elastic_generation(&generation) == HVD_SUCCESS && generation == -1);
    EXPECT(hvd_elastic_update_pending(&pending) == HVD_SUCCESS && pending == 0);
    EXPECT(hvd_elastic_generation(NULL) == HVD_INVALID_ARGUMENT);
    EXPECT(hvd_elastic_update_pending(NULL) == HVD_INVALID_ARGUMENT);
  }
  {
    const char* plane = NULL;
    EXPECT(hvd_host_backend(0, &plane) == HVD_SUCCESS && strcmp(plane, "gloo") == 0);
    EXPECT(hvd_host_backend(42, &plane) == HVD_INVALID_ARGUMENT);
    EXPECT(hvd_host_backend(0, NULL) == HVD_INVALID_ARGUMENT);
  }

  /* Blocking, async and extended all-reduce. */
  EXPECT(hvd_allreduce("a", buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_SUCCESS);
  EXPECT(out[3] == 4.0f);
  EXPECT(hvd_allreduce_async("b", buf, buf, 4, HVD_FLOAT32, HVD_AVERAGE, &h) == HVD_SUCCESS);
  EXPECT(h != NULL);
  EXPECT(hvd_wait(h, 10000) == HVD_SUCCESS);
  EXPECT(hvd_poll(h, &done) == HVD_SUCCESS && done == 1);
  hvd_handle_release(h);
  hvd_handle_release(h); /* Twice: detected, harmless. */
  EXPECT(strstr(hvd_last_error(), "unknown handle") != NULL);
  EXPECT(hvd_poll(h, &done) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_wait(NULL, 0) == HVD_INVALID_ARGUMENT);

  /* Stream-ordered completion on a host collective: "queued" only once complete,
   * and ordering a stream after a completed one has nothing to do. */
  EXPECT(hvd_allreduce_async("enq", buf, out, 4, HVD_FLOAT32, HVD_SUM, &h) == HVD_SUCCESS);
  EXPECT(hvd_wait_enqueued(h, 10000) == HVD_SUCCESS);
  EXPECT(hvd_poll(h, &done) == HVD_SUCCESS && done == 1);
  EXPECT(out[2] == 3.0f);
  EXPECT(hvd_handle_order_stream(h, NULL) == HVD_SUCCESS);
  hvd_handle_release(h);
  EXPECT(hvd_wait_enqueued(h, 0) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_handle_order_stream(h, NULL) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_wait_enqueued(NULL, 0) == HVD_INVALID_ARGUMENT);

  /* Completion callbacks: once, with the status; at once on this thread when the
   * collective is already done; one per handle; still called when the handle was
   * released before completion. */
  {
    done_record_t r;
    memset(&r, 0, sizeof(r));
    r.out = out;
    out[0] = 0;
    EXPECT(hvd_allreduce_async("cb", buf, out, 4, HVD_FLOAT32, HVD_SUM, &h) == HVD_SUCCESS);
    EXPECT(hvd_handle_on_done(h, record_done, &r) == HVD_SUCCESS);
    EXPECT(wait_calls(&r, 1));
    EXPECT(r.calls == 1 && r.status == HVD_SUCCESS && strcmp(r.detail, "") == 0);
    EXPECT(r.first == 1.0f); /* the output is final when the callback runs */
    EXPECT(hvd_handle_on_done(h, record_done, &r) == HVD_INVALID_USAGE);
    EXPECT(strstr(hvd_last_error(), "tensor 'cb' already has a completion callback") != NULL);
    EXPECT(hvd_handle_on_done(h, NULL, &r) == HVD_INVALID_ARGUMENT);
    EXPECT(r.calls == 1);
    hvd_handle_release(h);
    EXPECT(hvd_handle_on_done(h, record_done, &r) == HVD_INVALID_ARGUMENT);
    EXPECT(hvd_handle_on_done(NULL, record_done, &r) == HVD_INVALID_ARGUMENT);

    memset(&r, 0, sizeof(r));
    EXPECT(hvd_allreduce_async("cb.done", buf, out, 4, HVD_FLOAT32, HVD_SUM, &h) == HVD_SUCCESS);
    EXPECT(hvd_wait(h, 10000) == HVD_SUCCESS);
    EXPECT(hvd_handle_on_done(h, record_done, &r) == HVD_SUCCESS);
    EXPECT(r.calls == 1 && pthread_equal(r.thread, pthread_self()));
    hvd_handle_release(h);

    memset(&r, 0, sizeof(r));
    EXPECT(hvd_barrier_async(HVD_GLOBAL_PROCESS_SET, &h) == HVD_SUCCESS);
    EXPECT(hvd_handle_on_done(h, record_done, &r) == HVD_SUCCESS);
    hvd_handle_release(h); /* before completion, maybe: the callback still comes */
    EXPECT(wait_calls(&r, 1) && r.calls == 1 && r.status == HVD_SUCCESS);
  }

  hvd_allreduce_args_t args;
  hvd_allreduce_args_init(&args);
  args.name = "scaled";
  args.sendbuf = buf;
  args.recvbuf = out;
  args.count = 4;
  args.prescale_factor = 2.0;
  args.postscale_factor = 0.5;
  EXPECT(hvd_allreduce_ex(&args, NULL) == HVD_SUCCESS);
  EXPECT(out[1] == buf[1]);

  /* Bad arguments, each with its own status. */
  EXPECT(hvd_allreduce(NULL, buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_allreduce("neg", buf, out, -1, HVD_FLOAT32, HVD_SUM) == HVD_INVALID_ARGUMENT);
  EXPECT(strstr(hvd_last_error(), "negative count") != NULL);
  EXPECT(hvd_allreduce("null", NULL, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_allreduce("empty-null", NULL, NULL, 0, HVD_FLOAT32, HVD_SUM) == HVD_SUCCESS);
  EXPECT(hvd_allreduce("dtype", buf, out, 4, (hvd_dtype_t)42, HVD_SUM) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_allreduce("op", buf, out, 4, HVD_FLOAT32, (hvd_reduce_op_t)9) == HVD_INVALID_ARGUMENT);
  EXPECT(hvd_allreduce("", buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_INVALID_ARGUMENT);
  {
    char long_name[HVD_MAX_NAME_LENGTH + 2];
    memset(long_name, 'n', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    EXPECT(hvd_allreduce(long_name, buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_INVALID_ARGUMENT);
  }
  EXPECT(hvd_allreduce_async("nohandle", buf, out, 4, HVD_FLOAT32, HVD_SUM, NULL) ==
         HVD_INVALID_ARGUMENT);

  /* Shutdown, then every call says so; init again works. */
  EXPECT(hvd_shutdown() == HVD_SUCCESS);
  EXPECT(hvd_shutdown() == HVD_SUCCESS);
  EXPECT(hvd_rank(&v) == HVD_SHUT_DOWN);
  EXPECT(hvd_allreduce("late", buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_SHUT_DOWN);
  EXPECT(hvd_init() == HVD_SUCCESS);
  EXPECT(hvd_allreduce("again", buf, out, 4, HVD_FLOAT32, HVD_SUM) == HVD_SUCCESS);
  EXPECT(hvd_shutdown() == HVD_SUCCESS);

  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures == 0 ? 0 : 1;
}
