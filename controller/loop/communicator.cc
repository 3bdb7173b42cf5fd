#include "controller/loop/communicator.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "runtime/common/job_keys.h"
#include "runtime/common/sigpipe_guard.h"
#include "runtime/data/device_ops.h"
#include "runtime/transport/gloo/gloo_backend.h"

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

std::string SetName(int id) {
  return id == 0 ? std::string("global set") : "process set " + std::to_string(id);
}

}  // namespace

CommunicatorFactory::CommunicatorFactory(const RuntimeOptions& options,
                                         std::shared_ptr<Store> store,
                                         StragglerTracker* straggler,
                                         const ActiveTimeline* timeline)
    : options_(options), store_(std::move(store)), straggler_(straggler), timeline_(timeline) {}

Status CommunicatorFactory::Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                                   StragglerTracker* straggler, const ActiveTimeline* timeline,
                                   std::unique_ptr<CommunicatorFactory>* out,
                                   std::function<Status()> interrupt) {
  std::unique_ptr<CommunicatorFactory> f(
      new CommunicatorFactory(options, std::move(store), straggler, timeline));
  f->interrupt_ = std::move(interrupt);
  HVD_RETURN_IF_ERROR(CreateGlooDevice(GlooBindHostname(options.gloo_hostname, options.local_rank),
                                       options.gloo_iface, &f->device_));
  // Which ranks share a host decides each communicator's host plane (host_plane.h).
  if (options.size > 1 && options.cpu_operations != "gloo")
    HVD_RETURN_IF_ERROR(ExchangeHostInfo(f->store_.get(), options.rank, options.size,
                                         LocalHostInfo(options.host_id), options.timeout,
                                         &f->hosts_));
  *out = std::move(f);
  return Status::OK();
}

Status CommunicatorFactory::Connect(int id, const std::vector<int>& ranks,
                                    std::shared_ptr<Communicator>* out) const {
  SigpipeGuard no_sigpipe;  // connecting writes to the peers' sockets
  auto comm = std::make_shared<Communicator>();
  comm->id = id;
  comm->ranks = ranks;
  const int my =
      static_cast<int>(std::find(ranks.begin(), ranks.end(), options_.rank) - ranks.begin());
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
  hopts.interrupt = interrupt_;
  HVD_RETURN_IF_ERROR(
      ParseAllreduceAlgorithmMode(options_.allreduce_algorithm, &hopts.allreduce_algorithm.mode));
  hopts.hierarchy = options_.hierarchical_allreduce == "1"   ? HierarchyChoice::Mode::kHierarchical
                   : options_.hierarchical_allreduce == "0" ? HierarchyChoice::Mode::kFlat
                                                            : HierarchyChoice::Mode::kAuto;
  if (!hosts_.empty()) {
    hopts.placement = PlaceRanks(ranks, hosts_);
    std::string note;
    HVD_RETURN_IF_ERROR(
        ChooseHostPath(options_.cpu_operations, hopts.placement, &hopts.path, &note)
            .Prepend(SetName(id)));
    if (!note.empty() && my == 0)
      std::fprintf(stderr, "hvd: %s: %s\n", SetName(id).c_str(), note.c_str());
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
  copts.tree_cycle_ranks = static_cast<int>(
      std::min<int64_t>(options_.negotiation_tree_ranks, std::numeric_limits<int>::max()));
  Executor::PhaseHook on_phase;
  // The coordinator keeps the straggler report and may write a timeline, which
  // can start at any time (StartTimeline): its hooks are always installed there.
  if (options_.rank == 0) InstallHooks(comm.get(), &copts, &on_phase);
  comm->controller = std::make_unique<Controller>(std::move(plane.channel), copts);
  comm->executor = std::make_unique<Executor>(comm->backend.get(), std::move(on_phase));
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
  if (options_.rank == 0) {
    // The device phases go to the timeline too (from the device backend's
    // completion thread); timing events are recorded only while one is written.
    const ActiveTimeline* timeline = timeline_;
    dopts.phases_wanted = [timeline] { return timeline->Current() != nullptr; };
    dopts.on_phases = [timeline](const std::vector<std::string>& names, ResponseType type,
                                 const DevicePhases& p) {
      auto current = timeline->Current();
      if (!current) return;
      for (const PhaseSpan& s : DevicePhaseSpans(names, CollectiveLabel(type), p))
        current->Span(s.name, s.label, s.begin, s.end);
    };
  }
  comm->executor->SetDeviceOpsFactory([dopts](int device, std::unique_ptr<DeviceOps>* ops) {
    DeviceOpsOptions o = dopts;
    o.device = device;
    return CreateDeviceOps(o, ops);
  });
  *out = std::move(comm);
  return Status::OK();
}

void CommunicatorFactory::InstallHooks(Communicator* comm, ControllerOptions* copts,
                                       Executor::PhaseHook* on_phase) const {
  // Both run on the loop thread, inside the communicator's cycle, which `comm`
  // outlives.
  StragglerTracker* straggler = straggler_;
  const ActiveTimeline* timeline = timeline_;
  copts->on_arrivals = [comm, straggler, timeline](const std::string& name, OpType op,
                                                   const Arrivals& arrivals,
                                                   Clock::time_point ready, bool cached) {
    if (comm->id == 0 && straggler) straggler->Record(arrivals);
    if (auto current = timeline->Current()) {
      current->Negotiated(name, op, arrivals, ready, cached);
      comm->ready_at[name] = ready;
    }
  };
  *on_phase = [comm, timeline](const Response& r, Phase phase, bool begin) {
    auto current = timeline->Current();
    if (!current) return;
    const auto now = Clock::now();
    if (begin) {
      comm->phase_begin = now;
      return;
    }
    const char* label = phase == Phase::kCopyIn    ? "COPY_IN"
                        : phase == Phase::kCopyOut ? "COPY_OUT"
                                                   : CollectiveLabel(r.type);
    for (const auto& name : r.names) current->Span(name, label, comm->phase_begin, now);
  };
}

}  // namespace hvd
