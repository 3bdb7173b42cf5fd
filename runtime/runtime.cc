#include "runtime/runtime.h"

#include <cmath>
#include <cstdio>

#include "controller/control_channel.h"
#include "runtime/gloo_backend.h"

namespace hvd {

Runtime::Runtime(const RuntimeOptions& options) : options_(options) {}

Runtime::~Runtime() { Shutdown(); }

Status Runtime::Create(const RuntimeOptions& options, std::shared_ptr<Store> store,
                       std::unique_ptr<Runtime>* out) {
  HVD_RETURN_IF_ERROR(options.Validate());
  if (!store) return Status::InvalidArgument("a rendezvous store is required");
  std::unique_ptr<Runtime> rt(new Runtime(options));
  HVD_RETURN_IF_ERROR(rt->Start(std::move(store)));
  *out = std::move(rt);
  return Status::OK();
}

Status Runtime::Start(std::shared_ptr<Store> store) {
  store_ = std::move(store);
  HVD_RETURN_IF_ERROR(CreateGlooDevice(options_.gloo_hostname, options_.gloo_iface, &device_));
  auto comm = std::make_unique<Communicator>();
  comm->id = 0;
  HVD_RETURN_IF_ERROR(ConnectGlooContext(NewPrefixStore(store_, "global/"), device_, rank(), size(),
                                         options_.timeout, &comm->context));
  comm->backend = std::make_unique<GlooBackend>(comm->context);
  ControllerOptions copts;
  copts.fusion_threshold = options_.fusion_threshold;
  copts.stall_check = options_.stall_check;
  copts.stall_shutdown = options_.stall_shutdown;
  comm->controller = std::make_unique<Controller>(
      NewGlooControlChannel(comm->context, options_.timeout), copts);
  comm->executor = std::make_unique<Executor>(comm->backend.get());
  comms_.push_back(std::move(comm));
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

Status Runtime::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!shutdown_requested_) {
      shutdown_requested_ = true;
      shutdown_requested_at_ = Clock::now();
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return LoopStatus();
}

Status Runtime::LoopStatus() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_status_;
}

Status Runtime::ValidateEntry(const TensorEntry& e) const {
  if (e.name.empty()) return Status::InvalidArgument("tensor name must not be empty");
  if (e.name.size() > kMaxTensorNameLength)
    return Status::InvalidArgument("tensor name of " + std::to_string(e.name.size()) +
                                   " bytes is longer than the limit of " +
                                   std::to_string(kMaxTensorNameLength));
  if (!IsValidDataType(static_cast<int>(e.dtype)))
    return Status::InvalidArgument("tensor '" + e.name + "': unknown dtype " +
                                   std::to_string(static_cast<int>(e.dtype)));
  if (!IsValidReduceOp(static_cast<int>(e.reduce_op)))
    return Status::InvalidArgument("tensor '" + e.name + "': unknown reduce op " +
                                   std::to_string(static_cast<int>(e.reduce_op)));
  for (int64_t d : e.shape)
    if (d < 0)
      return Status::InvalidArgument("tensor '" + e.name + "': negative dimension " +
                                     std::to_string(d));
  const bool has_data = e.NumElements() > 0;
  if (has_data && e.input == nullptr)
    return Status::InvalidArgument("tensor '" + e.name + "': input buffer is null");
  if (has_data && e.output == nullptr && e.type != OpType::kAllgather && e.type != OpType::kAlltoall)
    return Status::InvalidArgument("tensor '" + e.name + "': output buffer is null");
  if (!std::isfinite(e.prescale_factor) || !std::isfinite(e.postscale_factor))
    return Status::InvalidArgument("tensor '" + e.name + "': scale factors must be finite");
  return Status::OK();
}

Status Runtime::Allreduce(const AllreduceArgs& args, std::shared_ptr<Work>* work) {
  if (args.count < 0)
    return Status::InvalidArgument("tensor '" + args.name + "': negative count " +
                                   std::to_string(args.count));
  TensorEntry e;
  e.name = args.name;
  e.type = OpType::kAllreduce;
  e.dtype = args.dtype;
  e.reduce_op = args.op;
  e.input = args.input;
  e.output = args.output;
  e.shape = {args.count};
  e.prescale_factor = args.prescale_factor;
  e.postscale_factor = args.postscale_factor;
  std::vector<TensorEntry> entries;
  entries.push_back(std::move(e));
  std::vector<std::shared_ptr<Work>> works;
  HVD_RETURN_IF_ERROR(Enqueue(std::move(entries), args.process_set, &works));
  *work = std::move(works[0]);
  return Status::OK();
}

Status Runtime::Enqueue(std::vector<TensorEntry> entries, int process_set,
                        std::vector<std::shared_ptr<Work>>* works) {
  for (auto& e : entries) HVD_RETURN_IF_ERROR(ValidateEntry(e));
  Communicator* comm = nullptr;
  for (auto& c : comms_)
    if (c->id == process_set) comm = c.get();
  if (comm == nullptr)
    return Status::InvalidArgument("unknown process set " + std::to_string(process_set));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loop_status_.ok()) return loop_status_;
    if (shutdown_requested_) return Status::ShutDown("the runtime is shutting down");
  }
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Work>> created;
  for (auto& e : entries) {
    e.work = std::make_shared<Work>(e.name);
    e.enqueued = now;
    created.push_back(e.work);
  }
  HVD_RETURN_IF_ERROR(comm->queue.Enqueue(std::move(entries), comm->backend->rank()));
  *works = std::move(created);
  return Status::OK();
}

void Runtime::Abort(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loop_status_.ok()) loop_status_ = status;
  }
  for (auto& c : comms_) c->queue.FailAll(status, /*refuse_new=*/true);
}

void Runtime::Loop() {
  auto next = Clock::now();
  while (true) {
    bool shutting_down;
    {
      std::unique_lock<std::mutex> lock(mu_);
      next += options_.cycle_time;
      cv_.wait_until(lock, next, [&] { return shutdown_requested_; });
      shutting_down = shutdown_requested_;
      if (shutting_down && Clock::now() - shutdown_requested_at_ > options_.timeout) {
        lock.unlock();
        Abort(Status::ShutDown("not every rank called shutdown within " +
                               std::to_string(options_.timeout.count() / 1000) +
                               " s (HVD_TIMEOUT); this rank stopped anyway"));
        break;
      }
    }
    const auto now = Clock::now();
    if (now > next) next = now;  // A slow cycle does not make the next ones rush.
    bool keep_going = true;
    for (auto& comm : comms_) keep_going = keep_going && RunCycle(comm.get(), now);
    if (!keep_going) break;
  }
  Abort(Status::ShutDown("the runtime has shut down"));
  // A clean shutdown is not a loop failure.
  std::lock_guard<std::mutex> lock(mu_);
  if (loop_status_.code() == StatusCode::kShutDown &&
      loop_status_.message() == "the runtime has shut down")
    loop_status_ = Status::OK();
  loop_done_ = true;
}

bool Runtime::RunCycle(Communicator* comm, Clock::time_point now) {
  proto::RequestList mine;
  std::vector<proto::Request> requests;
  comm->queue.PopRequests(&requests);
  for (auto& r : requests) *mine.add_requests() = std::move(r);
  {
    std::lock_guard<std::mutex> lock(mu_);
    mine.set_shutdown(shutdown_requested_);
  }
  if (!local_failure_.ok()) {
    mine.set_error_code(static_cast<int>(local_failure_.code()));
    mine.set_error_message(local_failure_.message());
  }
  proto::ResponseList list;
  Status s = comm->controller->Cycle(mine, now, &list);
  if (!s.ok()) {
    Abort(local_failure_.ok() ? s : local_failure_);
    return false;
  }
  if (list.abort_code() != 0) {
    Abort(Status(static_cast<StatusCode>(list.abort_code()), list.abort_message()));
    return false;
  }
  if (options_.log_cycles && list.responses_size() > 0)
    std::fprintf(stderr, "dprun: rank %d cycle: %d response(s)\n", rank(), list.responses_size());
  for (const auto& resp : list.responses()) ExecuteResponse(comm, resp);
  return !list.shutdown();
}

void Runtime::ExecuteResponse(Communicator* comm, const proto::Response& response) {
  std::vector<TensorEntry> storage(response.names_size());
  std::vector<TensorEntry*> entries(response.names_size(), nullptr);
  for (int i = 0; i < response.names_size(); ++i)
    if (comm->queue.Take(response.names(i), &storage[i])) entries[i] = &storage[i];
  if (!local_failure_.ok()) {
    CompleteAll(entries, local_failure_);
    return;
  }
  Status s = comm->executor->Execute(response, entries);
  if (!s.ok()) local_failure_ = s;
}

}  // namespace hvd
