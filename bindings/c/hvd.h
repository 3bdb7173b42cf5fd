/*
 * hvd.h: the C API of libhvd, the dprun collective runtime. Every binding (the
 * Python package, other frameworks) goes through this header.
 *
 * Conventions
 *   Status: every call returns an hvd_status_t (except hvd_handle_release and the
 *     string functions). HVD_SUCCESS is 0. hvd_status_string() names a code;
 *     hvd_last_error() gives the detail of the calling thread's most recent failure
 *     (which tensor, which ranks, what differed). Results come back through
 *     out-parameters, which must not be NULL.
 *   Ownership: buffers passed to a collective belong to the caller and must stay
 *     valid, and unmodified, until the collective completes (the blocking call
 *     returns, or hvd_wait/hvd_poll reports completion). A handle belongs to the
 *     caller until hvd_handle_release; results owned by a handle (allgather) live
 *     until then too. Strings returned by the library are owned by it: the one from
 *     hvd_last_error() stays valid until the thread's next failing call.
 *   Names: each collective is identified by a NUL-terminated name of 1 to 1024
 *     bytes, the same on every rank. A name may be reused once its earlier
 *     collective completed; enqueuing a name that is still in flight fails with
 *     HVD_INVALID_USAGE.
 *   NULL: sendbuf and recvbuf may be NULL only when count is 0. sendbuf == recvbuf
 *     is an in-place operation.
 *   Threads: every function is thread-safe. Collectives may be enqueued from many
 *     threads; they execute in the order the ranks agree on, which is the same on
 *     every rank.
 *   Failure: a lost or frozen rank fails every pending and later collective with
 *     HVD_REMOTE_ERROR or HVD_TIMEOUT naming the rank; hvd_check_health() reports
 *     that sticky failure. No call blocks longer than HVD_TIMEOUT (default 30 s)
 *     waiting for a peer, except a collective waiting for other ranks to submit
 *     the same tensor, which fails with HVD_TIMEOUT naming the ranks that never
 *     did after HVD_STALL_SHUTDOWN_TIME (default 30 minutes; 0: wait for ever).
 *   Device tensors: collectives whose `device` is a CUDA device id (>= 0; -1 is
 *     host memory) take device buffers (device or managed memory on that device)
 *     and the caller's cudaStream_t as `stream` (NULL: the legacy default
 *     stream). The collective starts after the work queued on that stream so far;
 *     the handle completes once the GPU work is done, so after hvd_wait the outputs
 *     may be used on any stream. Every rank uses one device per process set.
 *     Results owned by a handle (allgather, alltoall, reducescatter) are then device
 *     memory on that device; hvd_handle_release frees it in the order of `stream`,
 *     so reads queued on that stream before the release are safe (the stream must
 *     outlive the handle). HVD_GPU_OPERATIONS picks the engine: nccl (default) or
 *     gloo (staged through host memory over the CPU transport; lets several ranks
 *     share one GPU). A libhvd built without CUDA (hvd_cuda_built) refuses device
 *     tensors with HVD_INVALID_USAGE.
 *   Stream-ordered completion (device tensors): instead of waiting on the host for
 *     the GPU (hvd_wait), a caller may wait only until the collective is queued on
 *     the device (hvd_wait_enqueued) and then make its own stream wait for it on
 *     the device (hvd_handle_order_stream); kernels it queues there afterwards see
 *     the results, and the host runs ahead. The caller's buffers must then stay
 *     valid until the device is done (until work queued on that stream after the
 *     call has run), and a host read of the output needs that stream synchronized
 *     first (cudaStreamSynchronize), as for any kernel's output. With "gloo"
 *     staging the collective is complete when it counts as queued.
 *   Lifetime: hvd_init reads the environment that dprun sets (HVD_RANK, HVD_SIZE,
 *     HVD_STORE_ADDR, ...; a process started without them is rank 0 of 1).
 *     Calls before hvd_init return HVD_NOT_INITIALIZED; calls after hvd_shutdown
 *     return HVD_SHUT_DOWN until hvd_init is called again.
 */
#ifndef HVD_H_
#define HVD_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header (and of the libhvd it comes with). */
#define HVD_VERSION_MAJOR 0
#define HVD_VERSION_MINOR 2
#define HVD_VERSION_PATCH 0
/* The ABI this header describes. A libhvd serves every caller built against the
 * same ABI: later versions add entry points and struct fields compatibly (see
 * hvd_allreduce_args_t); an incompatible change bumps this number, and with it
 * the library's SONAME (libhvd.so.<abi>). */
#define HVD_ABI_VERSION 0

typedef enum {
  HVD_SUCCESS = 0,
  HVD_INVALID_ARGUMENT, /* a bad argument: null pointer, negative count, unknown dtype */
  HVD_INVALID_USAGE,    /* a call that is wrong now: a name already in flight */
  HVD_NOT_INITIALIZED,  /* hvd_init has not been called */
  HVD_MISMATCH,         /* ranks disagree about a tensor (dtype, shape, op, ...) */
  HVD_TIMEOUT,          /* a peer did not answer within HVD_TIMEOUT */
  HVD_REMOTE_ERROR,     /* a peer was lost or failed */
  HVD_SHUT_DOWN,        /* the runtime has shut down */
  HVD_INTERNAL,         /* a bug in dprun: please report it */
  HVD_IN_PROGRESS,      /* hvd_wait timed out before the collective completed */
  HVD_STATUS_FORCE_INT32 = 0x7fffffff /* not a status: makes the type span int32 */
} hvd_status_t;

typedef enum {
  HVD_FLOAT32,
  HVD_FLOAT64,
  HVD_FLOAT16,
  HVD_BFLOAT16,
  HVD_INT8,
  HVD_UINT8,
  HVD_INT32,
  HVD_INT64,
  HVD_INT16,
  HVD_DTYPE_FORCE_INT32 = 0x7fffffff /* not a dtype: makes the type span int32 */
} hvd_dtype_t;

/* HVD_AVERAGE divides the sum by the size of the process set (joined ranks,
 * which contribute zeros, included, as in Horovod); on integer types the
 * division truncates toward zero. Scale factors follow Horovod's rule: integers
 * are scaled in double and truncated toward zero, float32 in float32, float64 in
 * float64, float16 and bfloat16 in float32, rounded back to nearest-even.
 * HVD_MIN and HVD_MAX on floats are IEEE 754 minNum/maxNum (fmin/fmax, as NCCL's):
 * a NaN loses to a number, so an element is NaN only where every rank's is, on
 * every backend and whichever rank holds it.
 * HVD_ADASUM is Horovod's adaptive summation, for all-reduce only: pairs of
 * gradients a, b combine as (1 - a.b/(2|a|^2)) a + (1 - a.b/(2|b|^2)) b, per
 * tensor, up a binary tree over the set's ranks in rank order (any number of
 * ranks: an odd one out at a level is carried up to the next; see
 * runtime/kernels/adasum.h). Prescale applies before, postscale after; a joined rank
 * contributes zeros, which leave the others' result unchanged. It takes float16,
 * bfloat16, float32 and float64 host tensors (others: HVD_INVALID_ARGUMENT); each
 * rank gathers every rank's fused buffer, so it needs size times the fused bytes
 * of host memory. */
typedef enum {
  HVD_SUM,
  HVD_AVERAGE,
  HVD_MIN,
  HVD_MAX,
  HVD_PRODUCT,
  HVD_ADASUM,
  HVD_REDUCE_OP_FORCE_INT32 = 0x7fffffff /* not an op: makes the type span int32 */
} hvd_reduce_op_t;

/* An in-flight collective. */
typedef struct hvd_handle hvd_handle_t;

/* The global process set: every rank. */
#define HVD_GLOBAL_PROCESS_SET 0
/* The longest accepted tensor name, in bytes. */
#define HVD_MAX_NAME_LENGTH 1024

/* ---- Life cycle and topology ---------------------------------------------- */

/* Reads the environment, connects to the other ranks (bounded by HVD_TIMEOUT)
 * and starts the background thread. Calling it while initialized is a no-op. A
 * malformed environment variable fails with HVD_INVALID_ARGUMENT naming it. */
hvd_status_t hvd_init(void);
/* Stops the background thread after every rank has asked to (bounded by
 * HVD_TIMEOUT); collectives still pending fail with HVD_SHUT_DOWN. Returns the
 * background loop's failure if it had one. A no-op when not initialized. */
hvd_status_t hvd_shutdown(void);

/* Elastic jobs (dprun --min-np; docs/elastic.md). dprun numbers each membership of
 * the job, a generation. When a rank dies (and at least --min-np remain), or ranks
 * are added, dprun publishes a new generation; the workers' collectives fail
 * (HVD_REMOTE_ERROR) or hvd_elastic_update_pending says so. The reset is
 * hvd_shutdown, then hvd_init: in an elastic job hvd_init joins the latest
 * generation newer than the last one it ran, waiting for dprun to publish it (up to
 * HVD_ELASTIC_TIMEOUT s, default 600), and takes its rank and size from there
 * (both may change). A worker the new generation leaves out gets HVD_SHUT_DOWN. The
 * caller then restores its last committed state and broadcasts it from rank 0.
 * The generation the running runtime joined; -1 outside an elastic job. */
hvd_status_t hvd_elastic_generation(int64_t* generation);
/* 1 if dprun has published a generation newer than the one joined (ranks lost or
 * added): reset at the next safe point. 0 outside an elastic job. */
hvd_status_t hvd_elastic_update_pending(int* pending);
/* *out = 1 while initialized, else 0. Never fails. */
hvd_status_t hvd_is_initialized(int* out);

hvd_status_t hvd_rank(int* out);
hvd_status_t hvd_size(int* out);
hvd_status_t hvd_local_rank(int* out);
hvd_status_t hvd_local_size(int* out);
hvd_status_t hvd_cross_rank(int* out);
hvd_status_t hvd_cross_size(int* out);

/* HVD_SUCCESS while the background loop is healthy; else the status it failed
 * with, and hvd_last_error() says why (e.g. "lost rank 2: ..."). */
hvd_status_t hvd_check_health(void);

/* ---- All-reduce ------------------------------------------------------------ */

/* Reduces `count` elements of `sendbuf` across all ranks into `recvbuf`. Blocks
 * until done. */
hvd_status_t hvd_allreduce(const char* name, const void* sendbuf, void* recvbuf, int64_t count,
                           hvd_dtype_t dtype, hvd_reduce_op_t op);

/* As hvd_allreduce, but returns at once with *handle set; wait on it with
 * hvd_wait or hvd_poll, then hvd_handle_release it. On failure *handle is NULL. */
hvd_status_t hvd_allreduce_async(const char* name, const void* sendbuf, void* recvbuf,
                                 int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                 hvd_handle_t** handle);

/* The extended all-reduce. Initialise with hvd_allreduce_args_init (which sets
 * every field to its default and struct_size to this header's
 * sizeof(hvd_allreduce_args_t)) and then set what you need. Fields added in later
 * versions go at the end, so a program built against this header keeps working
 * with a later libhvd, which gives the fields it does not see their defaults; an
 * earlier libhvd refuses, with HVD_INVALID_ARGUMENT, a struct whose fields past
 * its own end are not all zero (the defaults of fields it does not have). A
 * struct that was never initialised (struct_size 0, or over 4096) is refused
 * too. */
typedef struct {
  size_t struct_size;       /* set by hvd_allreduce_args_init; do not change it */
  const char* name;
  const void* sendbuf;
  void* recvbuf;
  int64_t count;
  hvd_dtype_t dtype;        /* default HVD_FLOAT32 */
  hvd_reduce_op_t op;       /* default HVD_SUM */
  double prescale_factor;   /* multiplies each input before the reduction; default 1 */
  double postscale_factor;  /* multiplies the result; default 1 */
  int32_t process_set;      /* default HVD_GLOBAL_PROCESS_SET */
  int32_t device;           /* CUDA device of both buffers; default -1 (host memory) */
  void* stream;             /* device tensors: the caller's cudaStream_t; default NULL */
  /* Added in 0.2. The tensor's shape: `ndim` dimensions whose product is `count`.
   * Ranks must agree on it: the same count in another shape ((2, 3) against
   * (3, 2)) fails with HVD_MISMATCH. Default NULL and 0: the shape is [count]. */
  const int64_t* shape;
  int32_t ndim;
} hvd_allreduce_args_t;

/* Zeroes the first `struct_size` bytes of *args, then sets the defaults of the
 * fields that fit in them and args->struct_size. Ignored if args is NULL or
 * struct_size is smaller than the first version of the struct. Call it through
 * the macro, which passes the struct's size as the caller was compiled. */
void hvd_allreduce_args_init_sized(hvd_allreduce_args_t* args, size_t struct_size);
#define hvd_allreduce_args_init(args) \
  hvd_allreduce_args_init_sized((args), sizeof(hvd_allreduce_args_t))
/* Enqueues; *handle as for hvd_allreduce_async. handle may be NULL to block. */
hvd_status_t hvd_allreduce_ex(const hvd_allreduce_args_t* args, hvd_handle_t** handle);
/* Enqueues n all-reduces atomically as one group (executed in one fused
 * response), each described by args[i]; handles[i] receives tensor i's handle
 * (all NULL on failure). Every tensor of the group must name the same process
 * set, reduce op, scale factors and device; the group may hold device tensors. */
hvd_status_t hvd_grouped_allreduce_ex(int n, const hvd_allreduce_args_t* const* args,
                                      hvd_handle_t** handles);

/* ---- The other collectives --------------------------------------------------
 * Shapes are row-major with `ndim` >= 1 dimensions; the first is the one that
 * allgather concatenates, alltoall splits and reducescatter scatters. Results
 * whose size is known only after negotiation are owned by the handle: read them
 * with hvd_handle_result after a successful hvd_wait (a result in device memory:
 * already once hvd_wait_enqueued succeeded; order the reading stream after the
 * collective with hvd_handle_order_stream), until hvd_handle_release.
 * `process_set` is HVD_GLOBAL_PROCESS_SET or an id from hvd_add_process_set; ranks
 * given for a process set (root_rank, the join result) are ranks within the set. */

/* Concatenates every rank's tensor along the first dimension, which may differ
 * per rank; the other dimensions must match. */
hvd_status_t hvd_allgather_async(const char* name, const void* sendbuf, const int64_t* shape,
                                 int ndim, hvd_dtype_t dtype, int32_t process_set,
                                 hvd_handle_t** handle);

/* The blocking forms: they return once done, with *handle owning the result
 * (read it with hvd_handle_result, then hvd_handle_release it). On failure
 * *handle is NULL. */
hvd_status_t hvd_allgather(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                           hvd_dtype_t dtype, int32_t process_set, hvd_handle_t** handle);

/* The device forms (see "Device tensors" above): as the _async calls, with the
 * tensor on CUDA device `device` (-1: host) after the work queued on `stream`. */
hvd_status_t hvd_allgather_ex(const char* name, const void* sendbuf, const int64_t* shape,
                              int ndim, hvd_dtype_t dtype, int32_t process_set, int32_t device,
                              void* stream, hvd_handle_t** handle);
hvd_status_t hvd_broadcast_ex(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                              int root_rank, int32_t process_set, int32_t device, void* stream,
                              hvd_handle_t** handle);
hvd_status_t hvd_alltoall_ex(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                             hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                             int32_t process_set, int32_t device, void* stream,
                             hvd_handle_t** handle);
hvd_status_t hvd_reducescatter_ex(const char* name, const void* sendbuf, const int64_t* shape,
                                  int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                  double prescale_factor, double postscale_factor,
                                  int32_t process_set, int32_t device, void* stream,
                                  hvd_handle_t** handle);

/* Copies `count` elements of `buf` on `root_rank` into `buf` on every rank. */
hvd_status_t hvd_broadcast(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                           int root_rank, int32_t process_set);
hvd_status_t hvd_broadcast_async(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                                 int root_rank, int32_t process_set, hvd_handle_t** handle);

/* Sends rows of the first dimension to each rank: splits[r] rows to rank r (in
 * order), or, with splits NULL, an equal share (the first dimension must divide
 * by the number of ranks). The result holds the rows received, in rank order;
 * hvd_handle_received_splits says how many came from each rank. */
hvd_status_t hvd_alltoall_async(const char* name, const void* sendbuf, const int64_t* shape,
                                int ndim, hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                                int32_t process_set, hvd_handle_t** handle);
hvd_status_t hvd_alltoall(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                          hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                          int32_t process_set, hvd_handle_t** handle);

/* Reduces (HVD_SUM or HVD_AVERAGE) across ranks and leaves each rank its block of
 * the first dimension; when it does not divide evenly, the first dim0 % size
 * ranks get one extra row. */
hvd_status_t hvd_reducescatter_async(const char* name, const void* sendbuf, const int64_t* shape,
                                     int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                     double prescale_factor, double postscale_factor,
                                     int32_t process_set, hvd_handle_t** handle);
hvd_status_t hvd_reducescatter(const char* name, const void* sendbuf, const int64_t* shape,
                               int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                               double prescale_factor, double postscale_factor,
                               int32_t process_set, hvd_handle_t** handle);

/* Returns once every rank of the set has entered the barrier. */
hvd_status_t hvd_barrier(int32_t process_set);
hvd_status_t hvd_barrier_async(int32_t process_set, hvd_handle_t** handle);

/* For uneven data: a rank with no more batches calls join. Until every rank of
 * the set has joined, it takes part in the others' allreduces with the op's
 * identity (zeros for sums), and HVD_AVERAGE still divides by the size of the
 * set. Other collectives that wait on a joined rank fail with
 * HVD_INVALID_USAGE. *last_rank receives the last rank to join. */
hvd_status_t hvd_join(int32_t process_set, int* last_rank);
/* The async join; once done, hvd_handle_join_rank gives the last rank to join. */
hvd_status_t hvd_join_async(int32_t process_set, hvd_handle_t** handle);
hvd_status_t hvd_handle_join_rank(hvd_handle_t* handle, int* last_rank);

/* Grouped collectives: `n` tensors enqueued atomically and executed in one fused
 * response. handles[i] receives tensor i's handle (all NULL on failure). The
 * blocking grouped allreduce waits for all of them and releases the handles. */
hvd_status_t hvd_grouped_allreduce(int n, const char* const* names, const void* const* sendbufs,
                                   void* const* recvbufs, const int64_t* counts,
                                   const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                   int32_t process_set);
hvd_status_t hvd_grouped_allreduce_async(int n, const char* const* names,
                                         const void* const* sendbufs, void* const* recvbufs,
                                         const int64_t* counts, const hvd_dtype_t* dtypes,
                                         hvd_reduce_op_t op, double prescale_factor,
                                         double postscale_factor, int32_t process_set,
                                         hvd_handle_t** handles);
hvd_status_t hvd_grouped_allgather_async(int n, const char* const* names,
                                         const void* const* sendbufs,
                                         const int64_t* const* shapes, const int* ndims,
                                         const hvd_dtype_t* dtypes, int32_t process_set,
                                         hvd_handle_t** handles);
hvd_status_t hvd_grouped_reducescatter_async(int n, const char* const* names,
                                             const void* const* sendbufs,
                                             const int64_t* const* shapes, const int* ndims,
                                             const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                             double prescale_factor, double postscale_factor,
                                             int32_t process_set, hvd_handle_t** handles);

/* ---- Process sets -------------------------------------------------------------
 * A process set is a subset of ranks with its own negotiation; ranks outside it
 * are never blocked by it. Every rank (member or not) must make the same
 * hvd_add_process_set / hvd_remove_process_set calls in the same order: each is a
 * collective over all ranks. HVD_PROCESS_SETS="0,1;2,3" creates sets at init
 * (ids 1, 2, ...). Using a removed set fails with HVD_INVALID_ARGUMENT saying so;
 * collectives pending on a set when it is removed fail the same way. */
hvd_status_t hvd_add_process_set(const int* ranks, int nranks, int32_t* id);
hvd_status_t hvd_remove_process_set(int32_t id);
/* *rank = this rank's rank within the set, or -1 if it is not a member. */
hvd_status_t hvd_process_set_rank(int32_t id, int* rank);
hvd_status_t hvd_process_set_size(int32_t id, int* size);
/* Writes up to `capacity` global ranks of the set into `ranks`; *n = its size. */
hvd_status_t hvd_process_set_ranks(int32_t id, int* ranks, int capacity, int* n);

/* ---- Handles --------------------------------------------------------------- */

/* *done = 1 once the collective completed (either way), else 0. */
hvd_status_t hvd_poll(hvd_handle_t* handle, int* done);
/* Waits up to timeout_ms (negative: until done) and returns the collective's
 * status, or HVD_IN_PROGRESS if it has not completed yet. */
hvd_status_t hvd_wait(hvd_handle_t* handle, int64_t timeout_ms);
/* Waits up to timeout_ms (negative: until then) until the collective is queued on
 * its device (see "Stream-ordered completion"), or completed. HVD_SUCCESS then
 * (a host collective only counts once complete, so this is hvd_wait for it);
 * HVD_IN_PROGRESS on timeout; the collective's status if it failed first. A
 * failure found later, on the device, completes the handle with it (hvd_poll,
 * hvd_wait) and breaks the runtime (hvd_check_health). */
hvd_status_t hvd_wait_enqueued(hvd_handle_t* handle, int64_t timeout_ms);
/* Makes `stream` (a cudaStream_t; NULL: the legacy default stream) wait, on the
 * device, for the collective after hvd_wait_enqueued succeeded; the host does not
 * wait. Nothing to do, HVD_SUCCESS, once the collective completed successfully
 * (its status if it failed). HVD_INVALID_USAGE if it is neither queued on a
 * device nor complete. */
hvd_status_t hvd_handle_order_stream(hvd_handle_t* handle, void* stream);
/* Completion callbacks, for a caller that must not block a thread per collective
 * (a framework's asynchronous kernel, whose own "done" must be called once the
 * collective completes).
 *
 * hvd_handle_on_done(handle, fn, arg) arranges for fn(arg, status, detail) to be
 * called exactly once, with the collective's final status (what hvd_wait returns
 * once it is done) and, for a failure, its detail (the message hvd_last_error()
 * would give: which tensor, which ranks, what differed; "" on success; valid only
 * during the call). Any handle, any collective.
 *   Which thread: the one that completes the collective, usually the runtime's
 *     background thread (for a device tensor, the thread that finds the GPU work
 *     done; at shutdown or after a failure, the thread that fails pending work),
 *     as soon as it completes; or, when the collective has already completed, the
 *     calling thread, before hvd_handle_on_done returns.
 *   What fn may do: read the handle's results (hvd_handle_result,
 *     hvd_handle_received_splits, hvd_handle_join_rank, hvd_wait(handle, 0)),
 *     release it or any other handle, enqueue further collectives (the _async and
 *     _ex forms with a handle) and register their callbacks. It should return
 *     quickly: on the background thread, the collectives after it wait for it.
 *   What fn must not do: block on a collective that has not completed (hvd_wait
 *     with a timeout other than 0, a blocking collective, hvd_barrier, hvd_join,
 *     hvd_shutdown): on the background thread that waits for itself, until
 *     HVD_TIMEOUT at best. It must not unwind (a C++ exception, longjmp) out of
 *     the call.
 *   A waiter: registering on a collective not yet complete tells the runtime that
 *     someone waits for it, as hvd_wait does, so its next negotiation cycle starts
 *     at once instead of after the enqueues' quiet time (HVD_CYCLE_TIME / 10).
 *   The handle stays the caller's: release it as usual (inside fn or later).
 *     Releasing it before the collective completes does not cancel the callback,
 *     which still runs once; `arg` must stay valid until then.
 * Returns HVD_SUCCESS once fn is registered (or has run);
 * HVD_INVALID_ARGUMENT for a NULL fn or an unknown handle; HVD_INVALID_USAGE if
 * the handle already has a callback (one per handle). fn is never called when
 * the call fails. */
typedef void (*hvd_done_fn)(void* arg, hvd_status_t status, const char* detail);
hvd_status_t hvd_handle_on_done(hvd_handle_t* handle, hvd_done_fn fn, void* arg);
/* Frees the handle. Releasing a handle that is still in flight is allowed: the
 * collective still runs, and its buffers must stay valid until it completes.
 * NULL is ignored; releasing twice is detected and reported through
 * hvd_last_error() (HVD_INVALID_ARGUMENT) without harm. */
void hvd_handle_release(hvd_handle_t* handle);

/* The result owned by a completed handle (allgather, alltoall, reducescatter; a
 * device result once queued on the device, see hvd_wait_enqueued):
 * its bytes (device memory for a device tensor; in host memory, aligned to 64
 * bytes, so a framework may use them as its own tensor's memory), byte count and
 * shape.
 * Pointers stay valid until hvd_handle_release. Any out-parameter may be NULL. HVD_IN_PROGRESS if not done yet; the
 * collective's own status if it failed; HVD_INVALID_USAGE for a collective that
 * has no such result. */
hvd_status_t hvd_handle_result(hvd_handle_t* handle, const void** data, int64_t* nbytes,
                               int* ndim, const int64_t** shape);
/* alltoall: rows received from each rank (n = the set's size). */
hvd_status_t hvd_handle_received_splits(hvd_handle_t* handle, const int64_t** splits, int* n);

/* ---- Diagnostics --------------------------------------------------------------- */

/* The straggler report: for each rank, how often it was the last to submit a
 * negotiated tensor, and the mean and p95 of how long the others waited for it.
 * Rank 0 (the coordinator) keeps it; other ranks get a line saying so. Copies up
 * to capacity-1 bytes and a NUL into buf (buf may be NULL when capacity is 0);
 * *length receives the report's full length, so a second call can size buf. */
hvd_status_t hvd_straggler_report(char* buf, size_t capacity, size_t* length);

/* The launcher that started this process, as hvd_init will find it, without
 * initializing (callable at any time): "launcher=NAME\n" (torchrun, Open MPI,
 * Slurm, ...; empty for dprun or a process started alone), then one "NAME=value\n"
 * line for each HVD_* value it implies (HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK,
 * HVD_LOCAL_SIZE, HVD_CROSS_RANK and HVD_CROSS_SIZE when known, HVD_STORE_ADDR).
 * Framework bindings use it to set up their own rendezvous (torch.distributed's
 * MASTER_ADDR, ...). Copies as hvd_straggler_report does. HVD_INVALID_ARGUMENT,
 * naming the variable, when a launcher's variable is malformed or missing. */
hvd_status_t hvd_detect_launcher(char* buf, size_t capacity, size_t* length);

/* Starts writing a timeline (a Chrome/Perfetto trace of every tensor's
 * negotiation and execution; docs/protocol.md) to `file_path`, replacing the one
 * being written, if any; mark_cycles != 0 adds a CYCLE_START mark per cycle that
 * ran work. Rank 0 writes it; on other ranks the call only checks its arguments.
 * HVD_TIMELINE=path starts one at init. HVD_INVALID_ARGUMENT if the file cannot
 * be created. */
hvd_status_t hvd_start_timeline(const char* file_path, int mark_cycles);
/* Stops the timeline, if one is being written; the file is complete once this
 * returns. */
hvd_status_t hvd_stop_timeline(void);

/* The data plane of process set `process_set`'s host tensors (0: the global set):
 * "shm" (shared memory, every rank on one host), "hierarchical" (shared memory
 * inside hosts, Gloo across) or "gloo" (HVD_CPU_OPERATIONS chooses; see the
 * README). *name is a static string. HVD_INVALID_ARGUMENT for an unknown set. */
hvd_status_t hvd_host_backend(int32_t process_set, const char** name);

/* *out = 1 if this libhvd was built with CUDA (device tensors accepted), else 0.
 * Says nothing about whether a GPU is present. Never fails. */
hvd_status_t hvd_cuda_built(int* out);

/* *out = the NCCL version code this libhvd was built against (NCCL_VERSION_CODE:
 * 22807 for NCCL 2.28.7), or 0 without CUDA. Never fails. */
hvd_status_t hvd_nccl_version(int* out);

/* The loaded library's version and ABI, which may differ from the header the
 * caller was built with (compare with HVD_VERSION_* and HVD_ABI_VERSION). Any
 * out-parameter may be NULL. Never fails; callable before hvd_init. */
hvd_status_t hvd_version(int* major, int* minor, int* patch, int* abi);

/* ---- A job's store, for launchers ------------------------------------------------ */

/* A launcher written in another language (hvd.ray, hvd.spark: their driver starts
 * the workers and is not a rank) serves the job's store, the rendezvous every rank
 * connects to first, as dprun does: it serves one (hvd_store_serve), gives each rank
 * HVD_RANK, HVD_SIZE, ..., HVD_STORE_ADDR=host:port and HVD_STORE_SECRET, and may
 * write the launcher's keys (runtime/common/job_keys.h: "hvd/abort/reason", naming a
 * rank that died, ends the other ranks' waits at once, naming it; an elastic job's
 * generations). Its tasks may connect to it (hvd_store_connect) to register before
 * they are ranks. A served store runs on its own thread until hvd_store_close, which
 * also frees the handle. These calls need no hvd_init and are thread-safe. */
typedef struct hvd_store hvd_store_t;

/* Serves a store on host:port (port 0: an ephemeral one) to connections that
 * present `secret` (NULL: none). HVD_INVALID_ARGUMENT naming the address when it
 * cannot listen there. */
hvd_status_t hvd_store_serve(const char* host, int port, const char* secret, hvd_store_t** store);
/* Connects to the store served at "host:port", retrying until timeout_ms
 * (HVD_TIMEOUT naming the address after that; HVD_INVALID_ARGUMENT for a wrong
 * secret or a malformed address). */
hvd_status_t hvd_store_connect(const char* address, const char* secret, int64_t timeout_ms,
                               hvd_store_t** store);
/* The port a served store listens on; 0 for a connected one. */
hvd_status_t hvd_store_port(hvd_store_t* store, int* port);
/* Sets key := value[0..length) (binary-safe). */
hvd_status_t hvd_store_set(hvd_store_t* store, const char* key, const void* value, size_t length);
/* Reads a key, waiting up to timeout_ms for it to be set (HVD_TIMEOUT naming the
 * key after that). Copies up to `capacity` bytes into buf (NULL when capacity is 0)
 * and sets *length to the value's full length, so a second call can size buf. */
hvd_status_t hvd_store_get(hvd_store_t* store, const char* key, int64_t timeout_ms, void* buf,
                           size_t capacity, size_t* length);
/* Adds delta to the integer at key (0 if unset); *value receives the sum. */
hvd_status_t hvd_store_add(hvd_store_t* store, const char* key, int64_t delta, int64_t* value);
/* Closes the connection, or stops serving (every client's next call fails), and
 * frees the handle. NULL is a no-op. */
hvd_status_t hvd_store_close(hvd_store_t* store);

/* ---- Errors ---------------------------------------------------------------- */

/* "HVD_SUCCESS", "HVD_MISMATCH", ...; never NULL. */
const char* hvd_status_string(hvd_status_t status);
/* The detail of the calling thread's last failure; "" if none. Never NULL. */
const char* hvd_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* HVD_H_ */
