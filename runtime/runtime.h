// Runtime: one rank's dprun instance. It owns the background thread, the tensor
// queue, the controller, the backend, the fusion buffer and (later) the timeline.
// There are no globals: tests run several Runtimes in one process, each with its
// own store view; the C API keeps one default instance.
//
// Life cycle: Create connects to the other ranks (bounded by options.timeout) and
// starts the background loop. Enqueue hands collectives to the loop and returns at
// once; the loop negotiates them with the other ranks every cycle and completes
// each Work. Shutdown asks the other ranks to stop too, waits for the loop to end
// and fails whatever is still queued with kShutDown.
//
// A failure of the loop (a lost or frozen rank, a broken backend) is sticky:
// LoopStatus() returns it, every queued Work completes with it, and later Enqueue
// calls return it.
// Thread-safe: any thread may enqueue.
#ifndef HVD_RUNTIME_RUNTIME_H_
#define HVD_RUNTIME_RUNTIME_H_

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "controller/controller.h"
#include "controller/store/store.h"
#include "controller/straggler.h"
#include "runtime/common/backend.h"
#include "runtime/data/executor.h"
#include "runtime/transport/host_plane.h"
#include "runtime/common/options.h"
#include "runtime/timeline.h"
#include "runtime/data/tensor_queue.h"
#include "runtime/wire.h"
#include "runtime/data/work.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace hvd {

// The arguments of one allreduce. Buffers belong to the caller and must stay valid
// until the Work completes; input == output is in place.
struct AllreduceArgs {
  std::string name;
  const void* input = nullptr;
  void* output = nullptr;
  int64_t count = 0;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale_factor = 1.0;
  double postscale_factor = 1.0;
  int process_set = 0;
  int device = -1;          // -1: host memory; else the CUDA device of both buffers
  void* stream = nullptr;   // device tensors: the caller's cudaStream_t (see TensorEntry)
  // The tensor's shape, whose product must be `count`; ranks must agree on it.
  // Empty: {count}.
  std::vector<int64_t> shape;
};

// The entry for an all-reduce; kInvalidArgument naming the tensor for a negative
// count or a shape whose product is not the count.
Status MakeAllreduceEntry(AllreduceArgs args, TensorEntry* out);

class Runtime {
 public:
  // `store` is this job's rendezvous store (already scoped to the job). It must be
  // shared by all `options.size` ranks. `launcher_store`, when given, is the
  // launcher's unscoped view, where dprun records why a rank died
  // (keys::kLauncherAbortReason); the runtime then reports that as the cause.
  static Status Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Runtime>* out,
                       std::shared_ptr<Store> launcher_store = nullptr);
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Idempotent. Returns the loop's failure if it had one, else OK.
  Status Shutdown();

  const RuntimeOptions& options() const { return options_; }
  int rank() const { return options_.rank; }
  int size() const { return options_.size; }

  Status Allreduce(AllreduceArgs args, std::shared_ptr<Work>* work);

  // Starts writing a timeline (runtime/timeline.h) to `path`, replacing the one
  // being written (a call naming the file already being written changes only
  // `mark_cycles`). Rank 0 writes it; on other ranks this is a no-op, as in
  // Horovod. mark_cycles adds a CYCLE_START mark per cycle that ran work.
  // kInvalidArgument if the file cannot be created. Thread-safe.
  Status StartTimeline(const std::string& path, bool mark_cycles);
  // Stops the timeline, if one is written; once this returns the file is
  // complete JSON. Thread-safe.
  void StopTimeline();

  // Validates and enqueues entries atomically (a group), creating their Works,
  // which come back in `works` in the order of `entries` (emptied on failure).
  Status Enqueue(std::vector<TensorEntry> entries, int process_set,
                 std::vector<std::shared_ptr<Work>>* works);

  // A caller is about to block on work it enqueued: the cycle for newly enqueued
  // work starts now instead of after the enqueues pause. Cheap when there is
  // no new work.
  void Flush();

  // Enqueues one entry; `*work` tracks it.
  Status EnqueueOne(TensorEntry entry, int process_set, std::shared_ptr<Work>* work);

  // A barrier over `process_set`; completes once every member has entered it.
  Status Barrier(int process_set, std::shared_ptr<Work>* work);
  // Join (uneven data): this rank has no more data. Until every member has joined
  // it contributes the identity to the others' allreduces; the Work's
  // scalar_result() is then the last rank (within the set) to join.
  Status Join(int process_set, std::shared_ptr<Work>* work);

  // Process sets. Every rank (members or not) makes the same Add/Remove calls in
  // the same order; each is a collective over all ranks and blocks until done.
  // `ranks` are global ranks, ascending, without repeats. Ids start at 1; 0 is the
  // global set. Ranks inside a set are numbered by their position in `ranks`.
  Status AddProcessSet(std::vector<int> ranks, int* id);
  Status RemoveProcessSet(int id);
  // This rank's rank in the set (-1 if not a member) and the set's global ranks.
  Status ProcessSetInfo(int id, int* rank_in_set, std::vector<int>* ranks) const;

  // OK while the loop is healthy; its failure after it failed.
  Status LoopStatus() const;

  // The negotiation counters of `process_set` as of its last cycle.
  Controller::Stats NegotiationStats(int process_set) const;

  // Which ranks held negotiation back (see controller/straggler.h). Only the
  // coordinator (rank 0) keeps one; other ranks get a line saying so.
  std::string StragglerReport() const;
  // The backend moving `process_set`'s host tensors: "shm", "hierarchical" or
  // "gloo" (see runtime/transport/host_plane.h), a static string; null for an unknown set.
  const char* HostBackendName(int process_set = 0) const;
  // Per-rank figures behind the report; null on ranks other than 0.
  const StragglerTracker* straggler() const { return straggler_.get(); }

 private:
  struct Communicator {
    int id = 0;
    std::vector<int> ranks;  // global ranks, in set order
    int rank = 0;            // this rank within the set
    int size = 1;
    std::atomic<int64_t> barrier_count{0};
    std::unique_ptr<Backend> backend;
    const char* host_backend = "";  // backend->Name(), readable from any thread
    std::unique_ptr<Controller> controller;
    std::unique_ptr<Executor> executor;
    TensorQueue queue;
    // The loop's requests and responses of a cycle, kept so that the next cycles
    // reuse their allocations (background thread).
    proto::RequestList cycle_requests;
    proto::ResponseList cycle_responses;
    Response response;  // the one being executed, converted from the wire
    // A response's entries, and pointers to them, kept for their capacity.
    TensorQueue::Taken taken;
    std::vector<TensorEntry*> taken_entries;
    // Coordinator with a timeline: when each tensor became ready (background thread).
    std::unordered_map<std::string, Clock::time_point> ready_at;
    Clock::time_point phase_begin;
  };

  explicit Runtime(const RuntimeOptions& options);
  Status Start(std::shared_ptr<Store> store);
  void Loop();
  // One cycle on `comm`. Returns false when the loop must end.
  // Sets *hurry when this rank sent requests this cycle and some of what it has
  // sent still waits for other ranks: they may be about to send theirs, so the
  // next cycle starts at once. Work enqueued during the cycle does not hurry it.
  bool RunCycle(Communicator* comm, Clock::time_point now, bool* hurry);
  // Runs one response; non-OK when the backend failed (the job then ends).
  Status ExecuteResponse(Communicator* comm, const proto::Response& wire);
  void Abort(const Status& status);
  // Ends the job after an infrastructure failure (a lost or frozen peer, a broken
  // backend): records the first failure in the store so every rank reports the
  // same cause, closes every connection so peers blocked on this rank fail at once
  // instead of after HVD_TIMEOUT, and aborts with the first failure.
  void Fail(const Status& status);
  // Names the cause of a failure this rank saw: the launcher's record of a dead
  // rank, else the ranks whose heartbeat stopped, else this rank's own view.
  Status Diagnose(const Status& status);
  // The first diagnosis recorded in the store wins; returns the one to report.
  Status AgreeOnFirstFailure(const Status& mine);
  // Builds a communicator over `ranks` (this rank must be a member); blocking.
  Status Connect(int id, const std::vector<int>& ranks, std::shared_ptr<Communicator>* out);
  // Looks up a communicator this rank belongs to, or says why not.
  Status Find(int process_set, std::shared_ptr<Communicator>* out) const;
  // Enqueue's work for `n` entries; `works` receives n Works (untouched on
  // failure).
  Status EnqueueEntries(TensorEntry* entries, size_t n, int process_set,
                        std::shared_ptr<Work>* works);
  // A barrier on the global set whose loop_action runs in the background thread.
  Status GlobalAction(const std::string& name, const std::vector<int>& ranks,
                      std::function<Status()> action);

  const RuntimeOptions options_;
  std::shared_ptr<Store> store_;
  std::shared_ptr<Store> launcher_store_;
  // Rank 0 while a timeline is written (HVD_TIMELINE, StartTimeline), else null.
  // Swapped by StartTimeline/StopTimeline on any thread, so read and written only
  // through std::atomic_load/atomic_store; the background thread holds a copy for
  // the event it records.
  std::shared_ptr<Timeline> timeline_;
  std::mutex timeline_mu_;  // serialises StartTimeline/StopTimeline
  std::atomic<bool> mark_cycles_{false};
  std::shared_ptr<Timeline> CurrentTimeline() const { return std::atomic_load(&timeline_); }
  std::unique_ptr<StragglerTracker> straggler_;    // rank 0 only
  std::mutex report_mu_;
  bool report_left_ = false;
  std::shared_ptr<gloo::transport::Device> device_;
  std::vector<HostInfo> hosts_;  // per global rank; empty when every set uses Gloo
  // Guards comms_, process_sets_ and next_process_set_. The background thread is the
  // only one that adds or removes communicators, at a point in the global response
  // order that every rank shares; it iterates over a snapshot.
  mutable std::mutex comms_mu_;
  std::vector<std::shared_ptr<Communicator>> comms_;  // comms_[0] is the global set
  // comms_[0], which lives as long as the runtime: enqueues on the global set
  // reach it without comms_mu_.
  Communicator* global_ = nullptr;
  std::map<int, std::vector<int>> process_sets_;      // every live set, member or not
  std::set<int> removed_process_sets_;
  int next_process_set_ = 1;

  // Bumps this rank's heartbeat counter in the store twice a second, so that after
  // a timeout the others can tell which rank stopped (frozen or stuck).
  void Heartbeat();
  // Ranks whose heartbeat did not move within ~1.5 s.
  std::vector<int> SilentRanks();

  std::thread thread_;
  std::thread heartbeat_;
  bool heartbeat_stop_ = false;  // guarded by mu_
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  Clock::time_point shutdown_requested_at_{};
  bool loop_done_ = false;
  Status loop_status_;
  // Set (under mu_) once shutdown_requested_ is or loop_status_ fails, so that an
  // enqueue takes mu_ only then.
  std::atomic<bool> stopping_{false};
  // Set by the first enqueue after a cycle took the queue's requests; the loop
  // then starts its next cycle early, once enqueues have paused (see Loop).
  std::atomic<bool> work_pending_{false};
  std::atomic<int64_t> last_enqueue_ns_{0};  // Clock, since its epoch
  std::atomic<bool> flush_{false};  // Flush() since the current cycle began
  std::map<int, Controller::Stats> stats_;  // guarded by mu_
};

}  // namespace hvd

#endif  // HVD_RUNTIME_RUNTIME_H_
