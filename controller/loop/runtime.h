// Runtime: one rank's dprun instance. There are no globals: tests run several
// Runtimes in one process, each with its own store view; the C API keeps one
// default instance.
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
//
// The Runtime owns the background thread and runs the loop (Loop, RunCycle,
// ExecuteResponse); it wires together the parts that do the rest, each in its own
// file under runtime/:
//   CommunicatorFactory (communicator.h)  builds each process set's backend,
//                                         controller and executor, and rank 0's
//                                         straggler and timeline hooks;
//   ProcessSets (process_sets.h)          the live sets and their communicators;
//   FailureDiagnosis (failure_diagnosis.h)  heartbeat, and the cause of a failure
//                                         that every rank agrees on;
//   LoopPacer (loop_pacer.h)              when the next cycle starts;
//   ActiveTimeline (active_timeline.h)    the timeline being written, if any.
#ifndef HVD_CONTROLLER_LOOP_RUNTIME_H_
#define HVD_CONTROLLER_LOOP_RUNTIME_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "controller/controller.h"
#include "controller/loop/active_timeline.h"
#include "controller/loop/communicator.h"
#include "controller/loop/failure_diagnosis.h"
#include "controller/loop/loop_pacer.h"
#include "controller/loop/process_sets.h"
#include "controller/straggler.h"
#include "runtime/common/options.h"
#include "runtime/data/tensor_queue.h"
#include "runtime/data/work.h"
#include "runtime/store/store.h"

namespace hvd {

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

  // Starts writing a timeline (controller/loop/timeline.h) to `path`, replacing the one
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
  Status EnqueueOne(TensorEntry&& entry, int process_set, std::shared_ptr<Work>* work);

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

  // `handler` runs once, on the heartbeat thread, if the job's store stops answering
  // while the runtime runs (see FailureDiagnosis::SetStoreLostHandler). Bootstrap
  // uses it to end a rank whose launcher died. Thread-safe.
  void OnStoreLost(std::function<void(const Status&)> handler) {
    diagnosis_.SetStoreLostHandler(std::move(handler));
  }

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
  Runtime(const RuntimeOptions& options, std::shared_ptr<Store> store,
          std::shared_ptr<Store> launcher_store);
  Status Start();
  void Loop();
  // One cycle on `comm`. Returns false when the loop must end.
  // Sets *hurry when this rank sent requests this cycle and some of what it has
  // sent still waits for other ranks: they may be about to send theirs, so the
  // next cycle starts at once. Work enqueued during the cycle does not hurry it.
  bool RunCycle(Communicator* comm, Clock::time_point now, bool* hurry);
  // Runs one response; non-OK when the backend failed (the job then ends).
  Status ExecuteResponse(Communicator* comm, const proto::Response& wire);
  void Abort(const Status& status);
  // The heartbeat found the launcher's record of a dead rank that this rank has not
  // reported: says so on stderr (see FailureDiagnosis::SetLauncherReportHandler).
  void ReportDeadRank(const Status& dead);
  // Ends the job after an infrastructure failure (a lost or frozen peer, a broken
  // backend): agrees on the first failure with the other ranks (FailureDiagnosis),
  // closes every connection so peers blocked on this rank fail at once instead of
  // after HVD_TIMEOUT, and aborts with the first failure.
  void Fail(const Status& status);
  // Wakes the loop from its wait for the next cycle (see LoopPacer).
  void WakeLoop();
  // Enqueue's work for `n` entries; `works` receives n Works (untouched on
  // failure).
  Status EnqueueEntries(TensorEntry* entries, size_t n, int process_set,
                        std::shared_ptr<Work>* works);
  // A barrier on the global set whose loop_action runs in the background thread.
  Status GlobalAction(const std::string& name, const std::vector<int>& ranks,
                      std::function<Status()> action);

  const RuntimeOptions options_;
  const std::shared_ptr<Store> store_;  // the job's, shared with factory_ and diagnosis_
  const std::shared_ptr<Store> launcher_store_;
  // Rank 0's timeline, when one is written (HVD_TIMELINE, StartTimeline). It and
  // straggler_ are declared before the communicators, whose hooks record into
  // them, so that they outlive those.
  ActiveTimeline timeline_;
  std::unique_ptr<StragglerTracker> straggler_;  // rank 0 only
  std::mutex report_mu_;
  bool report_left_ = false;
  std::unique_ptr<CommunicatorFactory> factory_;  // made by Start
  // The live process sets, with their communicators; Start adds the global set
  // before the loop starts. Only the background thread adds or removes a set
  // afterwards, at a point in the global response order that every rank shares;
  // it cycles over a snapshot.
  ProcessSets sets_;
  FailureDiagnosis diagnosis_;
  LoopPacer pacer_;  // its loop side is the background thread's

  std::thread thread_;
  mutable std::mutex mu_;  // the loop waits for its next cycle under it, on cv_
  std::condition_variable cv_;
  bool shutdown_requested_ = false;
  Clock::time_point shutdown_requested_at_{};
  bool loop_done_ = false;
  Status loop_status_;
  // Set (under mu_) once shutdown_requested_ is or loop_status_ fails, so that an
  // enqueue takes mu_ only then.
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};  // Start has finished: the loop runs
  std::map<int, Controller::Stats> stats_;  // guarded by mu_
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_RUNTIME_H_
