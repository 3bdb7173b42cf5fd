// RuntimeOptions: every tunable of a Runtime, with its default, and the one
// function in the code base that reads environment variables.
//
// Each HVD_* variable also accepts Horovod's HOROVOD_* name where Horovod has one
// (HVD_ wins when both are set). A malformed value fails FromEnv with an
// InvalidArgument status naming the variable and the value.
#ifndef HVD_RUNTIME_COMMON_OPTIONS_H_
#define HVD_RUNTIME_COMMON_OPTIONS_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {

struct RuntimeOptions {
  // --- Job layout (set by dprun; a process started without a launcher is rank 0 of 1).
  int rank = 0;               // HVD_RANK
  int size = 1;               // HVD_SIZE
  int local_rank = 0;         // HVD_LOCAL_RANK
  int local_size = 1;         // HVD_LOCAL_SIZE
  int cross_rank = 0;         // HVD_CROSS_RANK
  int cross_size = 1;         // HVD_CROSS_SIZE

  // --- Rendezvous.
  std::string store_addr;     // HVD_STORE_ADDR "host:port"; empty: no store (size must be 1)
  std::string store_secret;   // HVD_STORE_SECRET
  std::string job_id;         // HVD_JOB_ID, a key prefix so jobs sharing a store never collide
  // Elastic jobs (dprun --min-np; controller/loop/bootstrap.h): this worker's id, set by dprun
  // (empty: not elastic), and how long hvd_init waits for dprun's next generation.
  std::string elastic_id;                            // HVD_ELASTIC_ID
  std::chrono::milliseconds elastic_timeout{600000};  // HVD_ELASTIC_TIMEOUT (s)

  // --- Gloo transport. Local jobs must bind loopback.
  std::string gloo_hostname = "127.0.0.1";  // HVD_GLOO_HOSTNAME
  std::string gloo_iface;                    // HVD_GLOO_IFACE (wins over the hostname if set)

  // --- Coordination and fusion.
  std::chrono::microseconds cycle_time{1000};  // HVD_CYCLE_TIME (ms, fractional allowed), HOROVOD_CYCLE_TIME
  int64_t fusion_threshold = 128 << 20;        // HVD_FUSION_THRESHOLD (bytes; 0 disables), HOROVOD_FUSION_THRESHOLD
  // HVD_CACHE_CAPACITY (0 disables), HOROVOD_CACHE_CAPACITY: entries, at most
  // kMaxCacheCapacity (each holds a request and a response, a few hundred bytes,
  // allocated up front).
  int64_t cache_capacity = 1024;
  static constexpr int64_t kMaxCacheCapacity = 1 << 16;
  // HVD_NEGOTIATION_TREE_RANKS: communicators of at least this many ranks settle a
  // cycle of cached tensors by one word all-reduce of the cache bits (O(log n)
  // steps, every rank settling it alone) instead of the coordinator's Gather and
  // Broadcast; 0: never (docs/protocol.md, "Many ranks").
  int64_t negotiation_tree_ranks = 8;
  bool autotune = false;                       // HVD_AUTOTUNE=1, HOROVOD_AUTOTUNE: tune the two above online
  std::string autotune_log;                    // HVD_AUTOTUNE_LOG (CSV), HOROVOD_AUTOTUNE_LOG
  std::chrono::milliseconds autotune_window{1000};  // HVD_AUTOTUNE_WINDOW (s): one score's window

  // --- Device tensors: how collectives on GPU tensors run. "nccl" (NCCL on the
  // device), or "gloo" (staged through pinned host memory over the host backend;
  // lets several ranks share one GPU, which NCCL refuses).
  std::string gpu_operations = "nccl";  // HVD_GPU_OPERATIONS=nccl|gloo (any case)

  // --- Host tensors. "auto": ranks that share a host move data and run the
  // coordinator's exchange through shared memory, and a communicator spanning hosts
  // all-reduces hierarchically (shared memory inside each host, Gloo across);
  // Gloo is kept where /dev/shm is too small. "shm": the same, but a /dev/shm too
  // small is an error. "gloo": Gloo's TCP transport for everything.
  std::string cpu_operations = "auto";  // HVD_CPU_OPERATIONS=auto|shm|gloo, HOROVOD_CPU_OPERATIONS
  // A communicator spanning hosts with several ranks on each: "auto" runs each
  // all-reduce hierarchically or flat (Gloo over every rank), whichever measured
  // faster for its size on the first calls (runtime/transport/hierarchy_choice.h);
  // "1" always hierarchically, "0" always flat.
  std::string hierarchical_allreduce = "auto";  // HVD_HIERARCHICAL_ALLREDUCE=auto|1|0, HOROVOD_...
  // HVD_ALLREDUCE_ALGORITHM=auto|ring|halving_doubling: the Gloo all-reduce; auto
  // runs recursive halving-doubling where the ring's 2(n-1) step latencies would
  // outweigh its bytes (small messages at many ranks), the ring otherwise
  // (runtime/transport/allreduce_algorithm.h).
  std::string allreduce_algorithm = "auto";
  // Ranks share memory when their host ids are equal. Empty (the default): the
  // kernel's boot id plus the device of /dev/shm, so separate machines and
  // containers with private /dev/shm never match. Set to group ranks by hand.
  std::string host_id;  // HVD_HOST_ID
  // "core": at init, every thread of the rank is bound to its block of the host's
  // CPUs (runtime/common/cpu_binding.h); "none" (the default) leaves affinity alone.
  std::string bind_to = "none";  // HVD_BIND_TO=none|core (any case); dprun --bind-to

  // --- Bounds on waiting.
  // HVD_TIMEOUT (s), HOROVOD_GLOO_TIMEOUT_SECONDS: a collective, a cycle or rendezvous.
  std::chrono::milliseconds timeout{30000};
  // HVD_STALL_CHECK_TIME (s), HOROVOD_STALL_CHECK_TIME_SECONDS: warn about a tensor some
  // ranks submitted and others did not after this long (0, or HVD_STALL_CHECK_DISABLE=1,
  // HOROVOD_STALL_CHECK_DISABLE=1: no warnings).
  std::chrono::milliseconds stall_check{60000};
  // HVD_STALL_SHUTDOWN_TIME (s), HOROVOD_STALL_SHUTDOWN_TIME_SECONDS: a tensor some
  // ranks submitted and others did not for this long fails everywhere, naming the
  // ranks that did not; 30 minutes by default, as torch.distributed's timeout, so no
  // wait is unbounded. 0: only warn (wait for ever).
  std::chrono::milliseconds stall_shutdown{1800000};

  // --- Process sets created at init, in order (ids 1, 2, ...):
  // HVD_PROCESS_SETS="0,1;2,3" (global ranks, comma-separated; sets separated by ';').
  std::vector<std::vector<int>> process_sets;

  // --- Diagnostics.
  // HVD_TIMELINE, HOROVOD_TIMELINE (rank 0 writes it). "DYNAMIC" (Horovod's word)
  // or unset: no file at start; hvd_start_timeline opens one at any time.
  std::string timeline_path;
  bool timeline_mark_cycles = false;  // HVD_TIMELINE_MARK_CYCLES, HOROVOD_TIMELINE_MARK_CYCLES
  bool straggler_report = false;  // HVD_STRAGGLER_REPORT=1: rank 0 leaves its report for dprun
  bool log_cycles = false;     // HVD_LOG_CYCLES=1: log every non-empty cycle to stderr

  // Reads the variables above through `getenv_fn` (defaults to ::getenv).
  // Unset variables keep their defaults.
  using GetEnv = std::function<const char*(const char*)>;
  static Status FromEnv(RuntimeOptions* out, const GetEnv& getenv_fn = nullptr);

  // Checks cross-field rules (rank < size, ...). FromEnv calls it.
  Status Validate() const;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_OPTIONS_H_
