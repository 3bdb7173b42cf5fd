// Communicator: one process set's share of the runtime on this rank (the global
// set is process set 0). It holds what moves the set's tensors (the host plane's
// backend), what negotiates them (a Controller over the plane's control channel),
// what runs the agreed responses (an Executor), the set's tensor queue, and the
// background loop's per-cycle buffers. Every rank of the set has one, built by
// CommunicatorFactory::Connect.
//
// Ownership and threads. A Communicator is shared (std::shared_ptr) by the process
// set registry (controller/loop/process_sets.h), the loop's snapshot of it, and callers
// that enqueue on it; it lives until the last of them lets go. `id`, `ranks`,
// `rank`, `size` and `host_backend` are fixed once built and readable from any
// thread; `queue` and `barrier_count` are thread-safe. Everything else belongs to
// the background loop thread, which also resets `backend`, `controller` and
// `executor` when the job fails (Runtime::Fail): they may then be null.
#ifndef HVD_CONTROLLER_LOOP_COMMUNICATOR_H_
#define HVD_CONTROLLER_LOOP_COMMUNICATOR_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "controller/controller.h"
#include "controller/loop/active_timeline.h"
#include "controller/loop/wire.h"
#include "controller/straggler.h"
#include "runtime/common/backend.h"
#include "runtime/common/options.h"
#include "runtime/data/executor.h"
#include "runtime/data/tensor_queue.h"
#include "runtime/store/store.h"
#include "runtime/transport/host_plane.h"

namespace gloo {
namespace transport {
class Device;
}
}  // namespace gloo

namespace hvd {

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
  // reuse their allocations.
  proto::RequestList cycle_requests;
  proto::ResponseList cycle_responses;
  Response response;  // the one being executed, converted from the wire
  // A response's entries, and pointers to them, kept for their capacity.
  TensorQueue::Taken taken;
  std::vector<TensorEntry*> taken_entries;
  // Coordinator with a timeline: when each tensor became ready (written by the
  // controller's hook, read and erased by the loop when the tensor runs).
  std::unordered_map<std::string, Clock::time_point> ready_at;
  // Coordinator with a timeline: when the executor's current phase began.
  Clock::time_point phase_begin;
};

// Builds this rank's communicators. On global rank 0 (the coordinator) it
// installs the hooks that feed the straggler report (global set only) and the
// timeline, whichever is being written when an event comes (ActiveTimeline).
// Connect is called from the thread that creates the runtime and from those that
// add process sets; the factory itself is not changed after Create.
class CommunicatorFactory {
 public:
  // Opens the Gloo device and, unless every set must use Gloo, exchanges where
  // each rank runs through `store` (blocking, bounded by options.timeout; every
  // rank must call it). `straggler` is rank 0's (null elsewhere); rank 0's hooks
  // record into it and into `timeline`. Both must outlive every communicator the
  // factory builds.
  // `interrupt`, when set, is polled while a connection waits for ranks that have
  // not joined yet (HostPlaneOptions::interrupt).
  static Status Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                       StragglerTracker* straggler, const ActiveTimeline* timeline,
                       std::unique_ptr<CommunicatorFactory>* out,
                       std::function<Status()> interrupt = nullptr);

  // Builds process set `id`'s communicator over the global `ranks` (set order;
  // this rank must be one of them). Collective over them: blocks until every
  // member has connected, bounded by options.timeout. Errors: kInvalidUsage when
  // HVD_CPU_OPERATIONS=shm cannot be met (naming the set), and the host plane's
  // connection errors.
  Status Connect(int id, const std::vector<int>& ranks, std::shared_ptr<Communicator>* out) const;

 private:
  CommunicatorFactory(const RuntimeOptions& options, std::shared_ptr<Store> store,
                      StragglerTracker* straggler, const ActiveTimeline* timeline);
  // The coordinator's hooks into `comm`'s controller and executor.
  void InstallHooks(Communicator* comm, ControllerOptions* copts,
                    Executor::PhaseHook* on_phase) const;

  const RuntimeOptions options_;
  const std::shared_ptr<Store> store_;
  StragglerTracker* const straggler_;
  const ActiveTimeline* const timeline_;
  std::function<Status()> interrupt_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::vector<HostInfo> hosts_;  // per global rank; empty when every set uses Gloo
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_COMMUNICATOR_H_
