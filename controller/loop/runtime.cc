#include "controller/loop/runtime.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include <pthread.h>

#include "runtime/common/cpu_binding.h"
#include "runtime/common/job_keys.h"
#include "runtime/common/sigpipe_guard.h"
#include "runtime/data/validate.h"

namespace hvd {

Runtime::Runtime(const RuntimeOptions& options, std::shared_ptr<Store> store,
                 std::shared_ptr<Store> launcher_store)
    : options_(options),
      store_(std::move(store)),
      launcher_store_(std::move(launcher_store)),
      timeline_(options.rank),
      sets_(options.rank, options.size),
      diagnosis_(options.rank, options.size, store_, launcher_store_),
      pacer_(options.cycle_time) {}

Runtime::~Runtime() { Shutdown(); }

Status Runtime::Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Runtime>* out, std::shared_ptr<Store> launcher_store) {
  HVD_RETURN_IF_ERROR(options.Validate());
  if (!store) return Status::InvalidArgument("a rendezvous store is required");
  std::unique_ptr<Runtime> rt(new Runtime(options, std::move(store), std::move(launcher_store)));
  HVD_RETURN_IF_ERROR(rt->Start());
  *out = std::move(rt);
  return Status::OK();
}

Status Runtime::Start() {
  // Every thread started below writes to peers' sockets (see the guard).
  SigpipeGuard no_sigpipe;
  if (options_.bind_to == "core") {
    std::vector<int> cpus;
    HVD_RETURN_IF_ERROR(BindToCores(options_.local_rank, options_.local_size, &cpus));
  }
  // From the start, so that a rank that dies while the others connect is reported
  // even by a rank blocked where nothing can interrupt it (Gloo's connect).
  diagnosis_.SetLauncherReportHandler([this](const Status& dead) { ReportDeadRank(dead); });
  diagnosis_.StartHeartbeat();
  if (rank() == 0) {
    straggler_ = std::make_unique<StragglerTracker>(size());
    if (!options_.timeline_path.empty())
      HVD_RETURN_IF_ERROR(StartTimeline(options_.timeline_path, options_.timeline_mark_cycles)
                              .Prepend("HVD_TIMELINE"));
  }
  // A rank that dies before it joins a connection is seen by nobody but the launcher.
  HVD_RETURN_IF_ERROR(CommunicatorFactory::Create(options_, store_, straggler_.get(), &timeline_,
                                                  &factory_,
                                                  [this] { return diagnosis_.LauncherReported(); }));
  std::vector<int> all(size());
  for (int r = 0; r < size(); ++r) all[r] = r;
  std::shared_ptr<Communicator> global;
  HVD_RETURN_IF_ERROR(factory_->Connect(0, all, &global));
  sets_.Add(0, std::move(all), std::move(global));
  // Named for top, perf and gdb (at most 15 characters).
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvd-loop");
    Loop();
  });
  started_.store(true, std::memory_order_release);
  return Status::OK();
}

void Runtime::ReportDeadRank(const Status& dead) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loop_status_.ok() || shutdown_requested_) return;  // reported, or not needed
  }
  std::fprintf(stderr, "hvd: rank %d: dprun reports %s; %s\n", rank(), dead.message().c_str(),
               started_.load(std::memory_order_acquire)
                   ? "this rank's pending collectives cannot complete (they fail at HVD_TIMEOUT, "
                     "or when dprun ends the job)"
                   : "this rank's hvd_init cannot complete");
}

Status Runtime::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutdown_requested_) {
      shutdown_requested_ = true;
      shutdown_requested_at_ = Clock::now();
      stopping_.store(true, std::memory_order_release);
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  diagnosis_.StopHeartbeat();
  StopTimeline();
  if (straggler_ && options_.straggler_report && launcher_store_) {
    std::lock_guard<std::mutex> lock(report_mu_);
    if (!report_left_) launcher_store_->Set(keys::kStragglerReport, straggler_->Report());
    report_left_ = true;
  }
  return LoopStatus();
}

Status Runtime::LoopStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_status_;
}

Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  if (rank() != 0) return Status::OK();
  return timeline_.Start(path, mark_cycles);
}

void Runtime::StopTimeline() { timeline_.Stop(); }

Status Runtime::EnqueueOne(TensorEntry&& entry, int process_set, std::shared_ptr<Work>* work) {
  return EnqueueEntries(&entry, 1, process_set, work);
}

Status Runtime::Enqueue(std::vector<TensorEntry> entries, int process_set,
                        std::vector<std::shared_ptr<Work>>* works) {
  std::vector<std::shared_ptr<Work>> made(entries.size());
  works->clear();
  HVD_RETURN_IF_ERROR(EnqueueEntries(entries.data(), entries.size(), process_set, made.data()));
  *works = std::move(made);
  return Status::OK();
}

Status Runtime::EnqueueEntries(TensorEntry* entries, size_t n, int process_set,
                               std::shared_ptr<Work>* works) {
  for (size_t i = 0; i < n; ++i) HVD_RETURN_IF_ERROR(ValidateEntry(entries[i]));
  // The global set needs no lookup (and no lock); another set is held for the
  // call, so that its removal meanwhile leaves a queue that refuses the entries.
  std::shared_ptr<Communicator> held;
  Communicator* comm = sets_.global();
  if (process_set != 0) {
    HVD_RETURN_IF_ERROR(sets_.Find(process_set, &held));
    comm = held.get();
  }
  const int set_size = comm->size;
  for (size_t i = 0; i < n; ++i) {
    const TensorEntry& e = entries[i];
    if (e.type == OpType::kBroadcast && (e.root_rank < 0 || e.root_rank >= set_size))
      return Status::InvalidArgument("tensor '" + e.name + "': root rank " +
                                     std::to_string(e.root_rank) + " is not in 0.." +
                                     std::to_string(set_size - 1));
    if (e.type == OpType::kAlltoall && !e.splits.empty()) {
      if (static_cast<int>(e.splits.size()) != set_size)
        return Status::InvalidArgument("tensor '" + e.name + "': " + std::to_string(e.splits.size()) +
                                       " split sizes given for " + std::to_string(set_size) + " ranks");
      int64_t sum = 0;
      for (int64_t v : e.splits) sum += v;
      if (sum != e.shape[0])
        return Status::InvalidArgument("tensor '" + e.name + "': split sizes add up to " +
                                       std::to_string(sum) + " but the first dimension is " +
                                       std::to_string(e.shape[0]));
    }
  }
  // Once the runtime stops, the queues refuse new entries too; this only says
  // why first (a shutdown, or the loop's failure).
  if (stopping_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loop_status_.ok()) return loop_status_;
    if (shutdown_requested_) return Status::ShutDown("the runtime is shutting down");
  }
  for (size_t i = 0; i < n; ++i) {
    entries[i].work = Work::Make(entries[i].name);
    works[i] = entries[i].work;
  }
  Status queued = comm->queue.Enqueue(entries, n);
  if (!queued.ok()) {
    for (size_t i = 0; i < n; ++i) works[i].reset();
    return queued;
  }
  if (pacer_.OnEnqueue(Clock::now())) WakeLoop();
  return Status::OK();
}

Status Runtime::Barrier(int process_set, std::shared_ptr<Work>* work) {
  std::shared_ptr<Communicator> comm;
  HVD_RETURN_IF_ERROR(sets_.Find(process_set, &comm));
  TensorEntry e;
  e.name = "__barrier." + std::to_string(comm->barrier_count++);
  e.type = OpType::kBarrier;
  return EnqueueOne(std::move(e), process_set, work);
}

Status Runtime::Join(int process_set, std::shared_ptr<Work>* work) {
  TensorEntry e;
  e.name = "__join";
  e.type = OpType::kJoin;
  return EnqueueOne(std::move(e), process_set, work);
}

Status Runtime::GlobalAction(const std::string& name, const std::vector<int>& ranks,
                             std::function<Status()> action) {
  TensorEntry e;
  e.name = name;
  e.type = OpType::kBarrier;
  e.shape.assign(ranks.begin(), ranks.end());
  e.loop_action = std::move(action);
  std::shared_ptr<Work> work;
  HVD_RETURN_IF_ERROR(EnqueueOne(std::move(e), 0, &work));
  return work->Wait(std::chrono::milliseconds(-1));
}

Status Runtime::AddProcessSet(std::vector<int> ranks, int* id) {
  if (id == nullptr) return Status::InvalidArgument("id is null");
  HVD_RETURN_IF_ERROR(sets_.CheckNewSet(&ranks));
  const int new_id = sets_.NextId();
  const std::string tag = "__process_set." + std::to_string(new_id);
  // 1. Every rank agrees on the members (a mismatch fails everywhere).
  HVD_RETURN_IF_ERROR(GlobalAction(tag + ".add", ranks, nullptr));
  // 2. Members connect among themselves; the loop carries on meanwhile.
  std::shared_ptr<Communicator> comm;
  const bool member = std::binary_search(ranks.begin(), ranks.end(), rank());
  Status connected = member ? factory_->Connect(new_id, ranks, &comm) : Status::OK();
  // 3. The loop starts cycling the new set at the same point of the global order
  //    on every rank, so no rank waits in a set whose peers have not started it.
  Status activated = GlobalAction(tag + ".activate", ranks, [this, comm, new_id, ranks] {
    sets_.Add(new_id, ranks, comm);
    return Status::OK();
  });
  HVD_RETURN_IF_ERROR(connected);
  HVD_RETURN_IF_ERROR(activated);
  *id = new_id;
  return Status::OK();
}

Status Runtime::RemoveProcessSet(int id) {
  if (id == 0) return Status::InvalidArgument("the global process set cannot be removed");
  std::vector<int> ranks;
  HVD_RETURN_IF_ERROR(sets_.Members(id, &ranks));
  return GlobalAction("__process_set." + std::to_string(id) + ".remove", ranks, [this, id] {
    std::shared_ptr<Communicator> gone = sets_.Remove(id);
    if (gone)
      gone->queue.FailAll(Status::InvalidArgument("process set " + std::to_string(id) +
                                                  " was removed while this collective was pending"),
                          /*refuse_new=*/true);
    return Status::OK();
  });
}

Status Runtime::ProcessSetInfo(int id, int* rank_in_set, std::vector<int>* ranks) const {
  return sets_.Info(id, rank_in_set, ranks);
}

std::string Runtime::StragglerReport() const {
  if (!straggler_) return "rank " + std::to_string(rank()) + " keeps no straggler report: rank 0 (the coordinator) does\n";
  return straggler_->Report();
}

Controller::Stats Runtime::NegotiationStats(int process_set) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = stats_.find(process_set);
  return it == stats_.end() ? Controller::Stats{} : it->second;
}

void Runtime::Abort(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loop_status_.ok()) loop_status_ = status;
    stopping_.store(true, std::memory_order_release);
  }
  for (auto& c : sets_.Communicators()) c->queue.FailAll(status, /*refuse_new=*/true);
}

void Runtime::Flush() {
  if (pacer_.OnFlush()) WakeLoop();
}

void Runtime::WakeLoop() {
  // Taking mu_ orders the pacer's change with the loop's look at it before it
  // sleeps (see LoopPacer).
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
}

void Runtime::Loop() {
  // When each cycle starts is the pacer's (controller/loop/loop_pacer.h); shutdown ends
  // a wait at once.
  pacer_.BeginLoop();
  // The coordinator announces the cycle time (autotune may change it), so every
  // rank sleeps alike.
  std::chrono::microseconds cycle_time = options_.cycle_time;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      Clock::time_point wake;
      while (!shutdown_requested_ && !pacer_.Due(&wake)) cv_.wait_until(lock, wake);
      if (shutdown_requested_ && Clock::now() - shutdown_requested_at_ > options_.timeout) {
        lock.unlock();
        Abort(Status::ShutDown("not every rank called shutdown within " +
                               std::to_string(options_.timeout.count() / 1000) +
                               " s (HVD_TIMEOUT); this rank stopped anyway"));
        break;
      }
    }
    const auto now = pacer_.BeginCycle();
    const std::vector<std::shared_ptr<Communicator>> comms = sets_.Communicators();
    // The global set runs first; when it ends the loop (shutdown or failure), every
    // rank stops at the same point, so no set is left waiting for a cycle.
    bool keep_going = true;
    bool hurry = false;
    for (auto& comm : comms) {
      if (!RunCycle(comm.get(), now, &hurry)) {
        keep_going = false;
        break;
      }
    }
    if (!keep_going) break;
    if (comms[0]->controller) cycle_time = comms[0]->controller->cycle_time();
    pacer_.EndCycle(hurry, cycle_time);
  }
  Abort(Status::ShutDown("the runtime has shut down"));
  // A clean shutdown is not a loop failure.
  std::lock_guard<std::mutex> lock(mu_);
  if (loop_status_.code() == StatusCode::kShutDown &&
      loop_status_.message() == "the runtime has shut down")
    loop_status_ = Status::OK();
  loop_done_ = true;
}

bool Runtime::RunCycle(Communicator* comm, Clock::time_point now, bool* hurry) {
  proto::RequestList& mine = comm->cycle_requests;
  mine.Clear();
  // A request the cache holds goes as its bit without being built; the rest in full.
  int popped = 0;
  Controller& controller = *comm->controller;
  comm->queue.PopNew([&](const TensorEntry& e) {
    ++popped;
    uint32_t index;
    const proto::Request* cached = controller.CachedRequest(e.name, &index);
    if (cached != nullptr && SameParameters(e, *cached)) {
      controller.SendAsCacheBit(index);
      return;
    }
    ToRequest(e, comm->rank, mine.add_requests());
  });
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine.set_shutdown(shutdown_requested_);
  }
  proto::ResponseList& list = comm->cycle_responses;
  list.Clear();
  Status s = comm->controller->Cycle(mine, now, &list);
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_[comm->id] = comm->controller->stats();
  }
  if (!s.ok()) {
    Fail(s);
    return false;
  }
  if (list.abort_code() != 0) {
    Fail(Status(static_cast<StatusCode>(list.abort_code()), list.abort_message()));
    return false;
  }
  if (comm->id == 0 && list.responses_size() > 0 && timeline_.mark_cycles()) {
    if (auto timeline = timeline_.Current()) timeline->Instant("CYCLE_START", now);
  }
  if (options_.log_cycles && list.responses_size() > 0)
    std::fprintf(stderr, "dprun: rank %d set %d cycle: %d response(s)\n", rank(), comm->id,
                 list.responses_size());
  for (const auto& resp : list.responses()) {
    if (!ExecuteResponse(comm, resp).ok()) return false;
  }
  // Once per batch, and only for requests already sent: entries enqueued since this
  // cycle began (the next step's, right after a barrier) must not start the next
  // cycle at once with only the first few of them, splitting that step in two.
  if (popped > 0 && comm->controller->waiting_on_others()) *hurry = true;
  // Only the global set ends the loop: a set's members agreeing to stop must not
  // leave the ranks outside it waiting for them in the next global cycle.
  return comm->id != 0 || !list.shutdown();
}

Status Runtime::ExecuteResponse(Communicator* comm, const proto::Response& wire) {
  Response& response = comm->response;
  FromWire(wire, &response);
  comm->queue.TakeAll(response.names, &comm->taken);
  std::vector<TensorEntry*>& entries = comm->taken_entries;
  entries.resize(response.names.size());
  for (int i = 0; i < response.size(); ++i) entries[i] = comm->taken.get(i);
  if (!comm->ready_at.empty()) {  // coordinator with a timeline (or one just stopped)
    const auto now = Clock::now();
    auto timeline = timeline_.Current();
    for (const auto& name : response.names) {
      auto it = comm->ready_at.find(name);
      if (it == comm->ready_at.end()) continue;
      if (timeline) timeline->Span(name, "WAIT", it->second, now);
      comm->ready_at.erase(it);
    }
  }
  // A tensor that failed because a rank has shut down, or that stalled past
  // HVD_STALL_SHUTDOWN_TIME, leaves the job unable to go on: dprun's cause line names
  // it (recorded before any caller can see the error and exit).
  if (response.type == ResponseType::kError &&
      (response.error_code == StatusCode::kShutDown || response.error_code == StatusCode::kTimeout))
    diagnosis_.RecordJobFailure(Status(response.error_code, response.error_message));
  Status s = comm->executor->Execute(response, entries);
  if (!s.ok()) {
    Fail(s);
    CompleteAll(entries, LoopStatus());
  }
  comm->queue.Recycle(&comm->taken);
  return s;
}

void Runtime::Fail(const Status& status) {
  const Status first = diagnosis_.AgreeOnFirstFailure(diagnosis_.Diagnose(status));
  Abort(first);
  // Aborting shared memory and closing every connection make peers blocked on
  // this rank fail now rather than after HVD_TIMEOUT.
  for (auto& c : sets_.Communicators()) {
    if (c->controller) c->controller->Abort(first);
    if (c->backend) c->backend->Abort(first);
    c->controller.reset();
    c->executor.reset();
    c->backend.reset();
  }
}

const char* Runtime::HostBackendName(int process_set) const {
  std::shared_ptr<Communicator> comm;
  if (!sets_.Find(process_set, &comm).ok()) return nullptr;
  return comm->host_backend;
}

}  // namespace hvd
