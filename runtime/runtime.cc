#include "runtime/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <pthread.h>

#include "runtime/common/control_channel.h"
#include "runtime/kernels/adasum.h"
#include "runtime/common/cpu_binding.h"
#include "runtime/common/job_keys.h"
#include "runtime/data/validate.h"
#include "runtime/transport/gloo/gloo_backend.h"
#include "runtime/transport/host_plane.h"

namespace hvd {
namespace {

const char* CollectiveLabel(ResponseType t) {
  switch (t) {
    case ResponseType::kAllreduce: return "ALLREDUCE";
    case ResponseType::kAllgather: return "ALLGATHER";
    case ResponseType::kBroadcast: return "BROADCAST";
    case ResponseType::kAlltoall: return "ALLTOALL";
    case ResponseType::kReducescatter: return "REDUCESCATTER";
    default: return "COLLECTIVE";
  }
}

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Runtime::Runtime(const RuntimeOptions& options) : options_(options) {}

Runtime::~Runtime() { Shutdown(); }

Status Runtime::Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Runtime>* out, std::shared_ptr<Store> launcher_store) {
  HVD_RETURN_IF_ERROR(options.Validate());
  if (!store) return Status::InvalidArgument("a rendezvous store is required");
  std::unique_ptr<Runtime> rt(new Runtime(options));
  rt->launcher_store_ = std::move(launcher_store);
  HVD_RETURN_IF_ERROR(rt->Start(std::move(store)));
  *out = std::move(rt);
  return Status::OK();
}

Status Runtime::Connect(int id, const std::vector<int>& ranks, std::shared_ptr<Communicator>* out) {
  auto comm = std::make_shared<Communicator>();
  comm->id = id;
  comm->ranks = ranks;
  const int my = static_cast<int>(std::find(ranks.begin(), ranks.end(), rank()) - ranks.begin());
  HVD_CHECK(my < static_cast<int>(ranks.size()));
  comm->rank = my;
  comm->size = static_cast<int>(ranks.size());
  const std::string scope = keys::CommunicatorScope(id);
  HostPlaneOptions hopts;
  hopts.store = NewPrefixStore(store_, scope);
  hopts.device = device_;
  hopts.name_prefix = "hvd-" + options_.job_id + "-" + std::to_string(id);
  hopts.rank = my;
  hopts.size = comm->size;
  hopts.timeout = options_.timeout;
  if (!hosts_.empty()) {
    hopts.placement = PlaceRanks(ranks, hosts_);
    std::string note;
    HVD_RETURN_IF_ERROR(
        ChooseHostPath(options_.cpu_operations, hopts.placement, &hopts.path, &note)
            .Prepend(id == 0 ? std::string("global set") : "process set " + std::to_string(id)));
    if (!note.empty() && my == 0)
      std::fprintf(stderr, "hvd: %s: %s\n",
                   id == 0 ? "global set" : ("process set " + std::to_string(id)).c_str(),
                   note.c_str());
  }
  HostPlane plane;
  HVD_RETURN_IF_ERROR(ConnectHostPlane(hopts, &plane));
  comm->backend = std::move(plane.backend);
  comm->host_backend = comm->backend->Name();
  ControllerOptions copts;
  copts.fusion_threshold = options_.fusion_threshold;
  copts.cache_capacity = options_.cache_capacity;
  copts.cycle_time = options_.cycle_time;
  copts.autotune = options_.autotune && id == 0;
  copts.autotune_log = options_.autotune_log;
  copts.autotune_window = options_.autotune_window;
  copts.stall_check = options_.stall_check;
  copts.stall_shutdown = options_.stall_shutdown;
  Communicator* raw = comm.get();
  // The coordinator keeps the straggler report and may write a timeline, which
  // can start at any time (StartTimeline): its hooks are always installed there.
  if (rank() == 0) {
    copts.on_arrivals = [this, raw](const std::string& name,
                                    const std::vector<Clock::time_point>& arrivals,
                                    Clock::time_point ready, bool cached) {
      if (raw->id == 0 && straggler_) straggler_->Record(arrivals);
      if (auto timeline = CurrentTimeline()) {
        timeline->Negotiated(name, arrivals, ready, cached);
        raw->ready_at[name] = ready;
      }
    };
  }
  comm->controller = std::make_unique<Controller>(std::move(plane.channel), copts);
  Executor::PhaseHook hook;
  if (rank() == 0) {
    hook = [this, raw](const Response& r, Phase phase, bool begin) {
      auto timeline = CurrentTimeline();
      if (!timeline) return;
      const auto now = Clock::now();
      if (begin) {
        raw->phase_begin = now;
        return;
      }
      const char* label = phase == Phase::kCopyIn    ? "COPY_IN"
                          : phase == Phase::kCopyOut ? "COPY_OUT"
                                                     : CollectiveLabel(r.type);
      for (const auto& name : r.names) timeline->Span(name, label, raw->phase_begin, now);
    };
  }
  comm->executor = std::make_unique<Executor>(comm->backend.get(), std::move(hook));
  // Device tensors: the DeviceOps is made on this set's first device response, so
  // CPU-only jobs never touch CUDA (see runtime/data/device_ops.h).
  DeviceOpsOptions dopts;
  dopts.store = NewPrefixStore(store_, scope + "device/");
  dopts.rank = my;
  dopts.size = comm->size;
  dopts.timeout = options_.timeout;
  dopts.mode = options_.gpu_operations;
  dopts.host_backend = comm->backend.get();
  dopts.fusion_threshold = options_.fusion_threshold;
  comm->executor->SetDeviceOpsFactory([dopts](int device, std::unique_ptr<DeviceOps>* ops) {
    DeviceOpsOptions o = dopts;
    o.device = device;
    return CreateDeviceOps(o, ops);
  });
  *out = std::move(comm);
  return Status::OK();
}

Status Runtime::Start(std::shared_ptr<Store> store) {
  store_ = std::move(store);
  if (options_.bind_to == "core") {
    std::vector<int> cpus;
    HVD_RETURN_IF_ERROR(BindToCores(options_.local_rank, options_.local_size, &cpus));
  }
  if (rank() == 0) {
    straggler_ = std::make_unique<StragglerTracker>(size());
    if (!options_.timeline_path.empty())
      HVD_RETURN_IF_ERROR(StartTimeline(options_.timeline_path, options_.timeline_mark_cycles)
                              .Prepend("HVD_TIMELINE"));
  }
  HVD_RETURN_IF_ERROR(CreateGlooDevice(options_.gloo_hostname, options_.gloo_iface, &device_));
  // Which ranks share a host decides each communicator's host plane (host_plane.h).
  if (size() > 1 && options_.cpu_operations != "gloo")
    HVD_RETURN_IF_ERROR(ExchangeHostInfo(store_.get(), rank(), size(),
                                         LocalHostInfo(options_.host_id), options_.timeout,
                                         &hosts_));
  std::vector<int> all(size());
  for (int r = 0; r < size(); ++r) all[r] = r;
  std::shared_ptr<Communicator> global;
  HVD_RETURN_IF_ERROR(Connect(0, all, &global));
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    global_ = global.get();
    comms_.push_back(std::move(global));
    process_sets_[0] = all;
  }
  // Named for top, perf and gdb (at most 15 characters).
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "hvd-loop");
    Loop();
  });
  if (size() > 1) {
    heartbeat_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "hvd-heartbeat");
      Heartbeat();
    });
  }
  return Status::OK();
}

void Runtime::Heartbeat() {
  const std::string key = keys::Alive(rank());
  int64_t beats = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (!heartbeat_stop_) {
    lock.unlock();
    if (!store_->Add(key, 1, &beats).ok()) return;  // The store is gone: nothing to tell.
    lock.lock();
    cv_.wait_for(lock, std::chrono::milliseconds(500), [&] { return heartbeat_stop_; });
  }
}

std::vector<int> Runtime::SilentRanks() {
  auto read = [&] {
    std::vector<int64_t> v(size(), -1);
    for (int r = 0; r < size(); ++r) {
      int64_t x = 0;
      if (r != rank() && store_->Add(keys::Alive(r), 0, &x).ok()) v[r] = x;
    }
    return v;
  };
  const std::vector<int64_t> before = read();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::vector<int64_t> after = read();
  std::vector<int> silent;
  for (int r = 0; r < size(); ++r)
    if (r != rank() && before[r] >= 0 && after[r] == before[r]) silent.push_back(r);
  return silent;
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    heartbeat_stop_ = true;
  }
  cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
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

Status Runtime::Find(int process_set, std::shared_ptr<Communicator>* out) const {
  std::lock_guard<std::mutex> lock(comms_mu_);
  for (const auto& c : comms_) {
    if (c->id == process_set) {
      *out = c;
      return Status::OK();
    }
  }
  if (removed_process_sets_.count(process_set))
    return Status::InvalidArgument("process set " + std::to_string(process_set) +
                                   " has been removed");
  auto it = process_sets_.find(process_set);
  if (it != process_sets_.end())
    return Status::InvalidArgument("rank " + std::to_string(rank()) +
                                   " is not a member of process set " +
                                   std::to_string(process_set) + " (ranks " +
                                   JoinRanks(it->second) + ")");
  return Status::InvalidArgument("unknown process set " + std::to_string(process_set));
}

Status MakeAllreduceEntry(AllreduceArgs args, TensorEntry* out) {
  if (args.count < 0)
    return Status::InvalidArgument("tensor '" + args.name + "': negative count " +
                                   std::to_string(args.count));
  if (!args.shape.empty()) {
    int64_t n = 1;
    for (int64_t d : args.shape)
      if (d < 0 || __builtin_mul_overflow(n, d, &n)) n = -1;
    if (n != args.count) {
      std::string dims;
      for (int64_t d : args.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
      return Status::InvalidArgument("tensor '" + args.name + "': shape [" + dims +
                                     "] does not hold count " + std::to_string(args.count) +
                                     " elements");
    }
  }
  TensorEntry& e = *out;
  e.name = std::move(args.name);
  e.type = OpType::kAllreduce;
  e.dtype = args.dtype;
  e.reduce_op = args.op;
  e.input = args.input;
  e.output = args.output;
  if (args.shape.empty()) {
    e.shape = {args.count};
  } else {
    e.shape = std::move(args.shape);
  }
  e.prescale_factor = args.prescale_factor;
  e.postscale_factor = args.postscale_factor;
  e.device = args.device;
  e.stream = args.stream;
  return Status::OK();
}

Status Runtime::StartTimeline(const std::string& path, bool mark_cycles) {
  if (rank() != 0) return Status::OK();
  if (path.empty()) return Status::InvalidArgument("the timeline's file name is empty");
  std::lock_guard<std::mutex> lock(timeline_mu_);
  mark_cycles_.store(mark_cycles, std::memory_order_relaxed);
  auto current = CurrentTimeline();
  if (current && current->path() == path) return Status::OK();
  std::unique_ptr<Timeline> opened;
  HVD_RETURN_IF_ERROR(Timeline::Open(path, rank(), &opened));
  std::atomic_store(&timeline_, std::shared_ptr<Timeline>(std::move(opened)));
  if (current) current->Close();
  return Status::OK();
}

void Runtime::StopTimeline() {
  std::lock_guard<std::mutex> lock(timeline_mu_);
  auto current = std::atomic_exchange(&timeline_, std::shared_ptr<Timeline>());
  if (current) current->Close();
}

Status Runtime::Allreduce(AllreduceArgs args, std::shared_ptr<Work>* work) {
  const int process_set = args.process_set;
  TensorEntry e;
  HVD_RETURN_IF_ERROR(MakeAllreduceEntry(std::move(args), &e));
  return EnqueueOne(std::move(e), process_set, work);
}

Status Runtime::EnqueueOne(TensorEntry entry, int process_set, std::shared_ptr<Work>* work) {
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
  Communicator* comm = global_;
  if (process_set != 0) {
    HVD_RETURN_IF_ERROR(Find(process_set, &held));
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
  const auto now = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    entries[i].work = std::make_shared<Work>(entries[i].name);
    entries[i].enqueued = now;
  }
  for (size_t i = 0; i < n; ++i) works[i] = entries[i].work;
  Status queued = comm->queue.Enqueue(entries, n);
  if (!queued.ok()) {
    for (size_t i = 0; i < n; ++i) works[i].reset();
    return queued;
  }
  last_enqueue_ns_.store(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count(),
      std::memory_order_relaxed);
  // A plain load first: in a burst the flag is already set, and the exchange's
  // locked write would bounce its cache line off the loop thread every time.
  if (!work_pending_.load(std::memory_order_relaxed) &&
      !work_pending_.exchange(true, std::memory_order_acq_rel)) {
    // Taking mu_ orders this with the loop's check of work_pending_ before it sleeps.
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }
  return Status::OK();
}

Status Runtime::Barrier(int process_set, std::shared_ptr<Work>* work) {
  std::shared_ptr<Communicator> comm;
  HVD_RETURN_IF_ERROR(Find(process_set, &comm));
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
  std::sort(ranks.begin(), ranks.end());
  if (ranks.empty()) return Status::InvalidArgument("a process set needs at least one rank");
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    return Status::InvalidArgument("process set ranks [" + JoinRanks(ranks) + "] repeat a rank");
  if (ranks.front() < 0 || ranks.back() >= size())
    return Status::InvalidArgument("process set ranks [" + JoinRanks(ranks) +
                                   "] must lie in 0.." + std::to_string(size() - 1));
  int new_id;
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    new_id = next_process_set_++;
  }
  const std::string tag = "__process_set." + std::to_string(new_id);
  // 1. Every rank agrees on the members (a mismatch fails everywhere).
  HVD_RETURN_IF_ERROR(GlobalAction(tag + ".add", ranks, nullptr));
  // 2. Members connect among themselves; the loop carries on meanwhile.
  std::shared_ptr<Communicator> comm;
  const bool member = std::binary_search(ranks.begin(), ranks.end(), rank());
  Status connected = member ? Connect(new_id, ranks, &comm) : Status::OK();
  // 3. The loop starts cycling the new set at the same point of the global order
  //    on every rank, so no rank waits in a set whose peers have not started it.
  Status activated = GlobalAction(tag + ".activate", ranks, [this, comm, new_id, ranks] {
    std::lock_guard<std::mutex> lock(comms_mu_);
    process_sets_[new_id] = ranks;
    if (comm) comms_.push_back(comm);
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
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    if (removed_process_sets_.count(id))
      return Status::InvalidArgument("process set " + std::to_string(id) + " has been removed");
    auto it = process_sets_.find(id);
    if (it == process_sets_.end())
      return Status::InvalidArgument("unknown process set " + std::to_string(id));
    ranks = it->second;
  }
  return GlobalAction("__process_set." + std::to_string(id) + ".remove", ranks, [this, id] {
    std::shared_ptr<Communicator> gone;
    {
      std::lock_guard<std::mutex> lock(comms_mu_);
      process_sets_.erase(id);
      removed_process_sets_.insert(id);
      for (auto it = comms_.begin(); it != comms_.end(); ++it) {
        if ((*it)->id == id) {
          gone = *it;
          comms_.erase(it);
          break;
        }
      }
    }
    if (gone)
      gone->queue.FailAll(Status::InvalidArgument("process set " + std::to_string(id) +
                                                  " was removed while this collective was pending"),
                          /*refuse_new=*/true);
    return Status::OK();
  });
}

Status Runtime::ProcessSetInfo(int id, int* rank_in_set, std::vector<int>* ranks) const {
  std::lock_guard<std::mutex> lock(comms_mu_);
  if (removed_process_sets_.count(id))
    return Status::InvalidArgument("process set " + std::to_string(id) + " has been removed");
  auto it = process_sets_.find(id);
  if (it == process_sets_.end())
    return Status::InvalidArgument("unknown process set " + std::to_string(id));
  if (ranks) *ranks = it->second;
  if (rank_in_set) {
    auto pos = std::find(it->second.begin(), it->second.end(), rank());
    *rank_in_set = pos == it->second.end() ? -1 : static_cast<int>(pos - it->second.begin());
  }
  return Status::OK();
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
  std::vector<std::shared_ptr<Communicator>> comms;
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    comms = comms_;
  }
  for (auto& c : comms) c->queue.FailAll(status, /*refuse_new=*/true);
}

void Runtime::Flush() {
  if (!work_pending_.load(std::memory_order_acquire) ||
      flush_.exchange(true, std::memory_order_acq_rel))
    return;
  { std::lock_guard<std::mutex> lock(mu_); }
  cv_.notify_all();
}

void Runtime::Loop() {
  // A cycle starts cycle_time after the previous one began, as in Horovod, or
  // sooner: once newly enqueued work has seen no further enqueue for a tenth of
  // the cycle time. A cycle due in the middle of a burst of enqueues waits for
  // the burst to end, by up to another cycle time. A step's gradients are then
  // negotiated as one batch as soon as they are all enqueued, instead of waiting
  // out the rest of the cycle or being split across two. A caller that blocks on
  // its work (Flush) starts the cycle at once. A rank whose requests
  // of the last cycle still wait for other ranks starts the next cycle at once
  // (once per batch): the others may have enqueued theirs just after their own
  // cycle began, and would otherwise wait up to a cycle time for this rank. A
  // rank without new work keeps the plain cadence.
  auto next = Clock::now();
  bool hurry = false;
  // The coordinator announces the cycle time (autotune may change it), so every
  // rank sleeps alike.
  std::chrono::microseconds cycle_time = options_.cycle_time;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      next += cycle_time;
      const auto quiet = cycle_time / 10;
      const auto latest = next + cycle_time;
      while (!shutdown_requested_ && !hurry) {
        const auto now = Clock::now();
        if (now >= latest) break;
        auto deadline = next;
        if (work_pending_.load(std::memory_order_acquire)) {
          const auto quiet_at = Clock::time_point(std::chrono::nanoseconds(
                                    last_enqueue_ns_.load(std::memory_order_relaxed))) +
                                quiet;
          if (quiet_at <= now || flush_.load(std::memory_order_acquire)) break;
          // New work starts the cycle once enqueues pause; mid-burst, even a due
          // cycle waits for that, by up to a cycle time.
          deadline = std::min(quiet_at, latest);
        }
        if (now >= deadline) break;
        cv_.wait_until(lock, deadline);
      }
      if (shutdown_requested_ && Clock::now() - shutdown_requested_at_ > options_.timeout) {
        lock.unlock();
        Abort(Status::ShutDown("not every rank called shutdown within " +
                               std::to_string(options_.timeout.count() / 1000) +
                               " s (HVD_TIMEOUT); this rank stopped anyway"));
        break;
      }
    }
    // Requests enqueued from here on are seen by this cycle or flag the next one.
    work_pending_.store(false, std::memory_order_release);
    flush_.store(false, std::memory_order_release);
    const auto now = Clock::now();
    // A slow or early cycle sets the cadence: the next one is a cycle time later.
    next = now;
    std::vector<std::shared_ptr<Communicator>> comms;
    {
      std::lock_guard<std::mutex> lock(comms_mu_);
      comms = comms_;
    }
    // The global set runs first; when it ends the loop (shutdown or failure), every
    // rank stops at the same point, so no set is left waiting for a cycle.
    bool keep_going = true;
    hurry = false;
    for (auto& comm : comms) {
      if (!RunCycle(comm.get(), now, &hurry)) {
        keep_going = false;
        break;
      }
    }
    if (!keep_going) break;
    if (comms[0]->controller) cycle_time = comms[0]->controller->cycle_time();
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
  comm->queue.PopNew([&](const TensorEntry& e) { ToRequest(e, comm->rank, mine.add_requests()); });
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
  if (comm->id == 0 && list.responses_size() > 0 && mark_cycles_.load(std::memory_order_relaxed)) {
    if (auto timeline = CurrentTimeline()) timeline->Instant("CYCLE_START", now);
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
  if (mine.requests_size() > 0 && comm->controller->waiting_on_others()) *hurry = true;
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
    auto timeline = CurrentTimeline();
    for (const auto& name : response.names) {
      auto it = comm->ready_at.find(name);
      if (it == comm->ready_at.end()) continue;
      if (timeline) timeline->Span(name, "WAIT", it->second, now);
      comm->ready_at.erase(it);
    }
  }
  Status s = comm->executor->Execute(response, entries);
  if (!s.ok()) {
    Fail(s);
    CompleteAll(entries, LoopStatus());
  }
  comm->queue.Recycle(&comm->taken);
  return s;
}

Status Runtime::Diagnose(const Status& status) {
  const std::string seen = "rank " + std::to_string(rank()) + " saw: " + status.message();
  if (status.code() != StatusCode::kRemoteError && status.code() != StatusCode::kTimeout)
    return Status(status.code(), "rank " + std::to_string(rank()) + ": " + status.message());
  // A lost peer is usually a dead process, and the launcher saw it die: give it a
  // moment to say which rank and how, since a closed socket names neither.
  std::string reason;
  if (launcher_store_ &&
      launcher_store_->Get(keys::kLauncherAbortReason, std::chrono::milliseconds(1000), &reason).ok() &&
      !reason.empty())
    return Status(StatusCode::kRemoteError, reason + " (" + seen + ")");
  // Otherwise name whoever stopped beating. In a ring a rank waits on its
  // neighbour, who waits on the culprit, so the peer in the error is rarely it.
  const std::vector<int> silent = SilentRanks();
  if (!silent.empty()) {
    const bool one = silent.size() == 1;
    return Status(status.code(), std::string(one ? "rank " : "ranks ") + JoinRanks(silent) +
                                     (one ? " is" : " are") +
                                     " gone or frozen (no heartbeat for 1.5 s) (" + seen + ")");
  }
  return Status(status.code(), "rank " + std::to_string(rank()) + ": " + status.message());
}

Status Runtime::AgreeOnFirstFailure(const Status& mine) {
  // The first rank to get here records its diagnosis; the others report that one
  // as the cause, and what they saw themselves after it. Store calls are bounded;
  // if the store is gone, each rank's own view stands.
  int64_t order = 0;
  if (!store_->Add(keys::kAbortCount, 1, &order).ok()) return mine;
  if (order == 1) {
    store_->Set(keys::kAbortReason, std::to_string(static_cast<int>(mine.code())) + " " + mine.message());
    return mine;
  }
  std::string reason;
  if (!store_->Get(keys::kAbortReason, std::chrono::milliseconds(2000), &reason).ok()) return mine;
  const size_t sp = reason.find(' ');
  const int code = std::atoi(reason.substr(0, sp).c_str());
  if (sp == std::string::npos || code <= 0 || reason.substr(sp + 1) == mine.message()) return mine;
  return Status(static_cast<StatusCode>(code),
                reason.substr(sp + 1) + " [the job's first failure; then " + mine.message() + "]");
}

void Runtime::Fail(const Status& status) {
  const Status first = AgreeOnFirstFailure(Diagnose(status));
  Abort(first);
  // Aborting shared memory and closing every connection make peers blocked on
  // this rank fail now rather than after HVD_TIMEOUT.
  std::vector<std::shared_ptr<Communicator>> comms;
  {
    std::lock_guard<std::mutex> lock(comms_mu_);
    comms = comms_;
  }
  for (auto& c : comms) {
    if (c->controller) c->controller->Abort(first);
    if (c->backend) c->backend->Abort(first);
    c->controller.reset();
    c->executor.reset();
    c->backend.reset();
  }
}

const char* Runtime::HostBackendName(int process_set) const {
  std::shared_ptr<Communicator> comm;
  if (!Find(process_set, &comm).ok()) return nullptr;
  return comm->host_backend;
}

}  // namespace hvd
