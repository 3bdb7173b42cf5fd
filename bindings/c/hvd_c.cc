// The C API over hvd::Runtime (see hvd.h for the contract).
//
// The default Runtime is the only process-wide state. Handles are ids into a
// registry rather than pointers, so a released or forged handle is detected
// instead of being dereferenced. No exception crosses this boundary.
#include "bindings/c/hvd.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "controller/store.h"
#include "controller/tcp_store.h"
#include "runtime/runtime.h"

namespace {

using hvd::Status;
using hvd::StatusCode;

thread_local std::string t_last_error;

hvd_status_t Report(const Status& s) {
  if (!s.ok()) t_last_error = s.message();
  return static_cast<hvd_status_t>(s.code());
}

enum class State { kNeverInitialized, kRunning, kShutDown };

// The default instance. Leaked on purpose: it must outlive static destructors
// that may still call in during process exit.
struct Instance {
  std::mutex mu;
  State state = State::kNeverInitialized;
  std::shared_ptr<hvd::Runtime> runtime;
  int generation = 0;

  std::mutex handles_mu;
  std::unordered_map<uint64_t, std::shared_ptr<hvd::Work>> handles;
  uint64_t next_handle = 1;
};

Instance& Default() {
  static Instance* instance = new Instance;
  return *instance;
}

// The running runtime, or the status explaining why there is none.
Status Current(std::shared_ptr<hvd::Runtime>* out) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.mu);
  switch (in.state) {
    case State::kNeverInitialized:
      return Status::NotInitialized("hvd_init has not been called");
    case State::kShutDown:
      return Status::ShutDown("the runtime has been shut down (hvd_shutdown)");
    case State::kRunning:
      *out = in.runtime;
      return Status::OK();
  }
  return Status::Internal("bad runtime state");
}

hvd_handle_t* Register(std::shared_ptr<hvd::Work> work) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  const uint64_t id = in.next_handle++;
  in.handles.emplace(id, std::move(work));
  return reinterpret_cast<hvd_handle_t*>(static_cast<uintptr_t>(id));
}

Status Lookup(hvd_handle_t* handle, std::shared_ptr<hvd::Work>* out) {
  if (handle == nullptr) return Status::InvalidArgument("handle is NULL");
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  auto it = in.handles.find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
  if (it == in.handles.end())
    return Status::InvalidArgument("unknown handle (already released, or never returned by hvd)");
  *out = it->second;
  return Status::OK();
}

Status Init() {
  hvd::RuntimeOptions options;
  HVD_RETURN_IF_ERROR(hvd::RuntimeOptions::FromEnv(&options));
  std::shared_ptr<hvd::Store> store;
  if (options.store_addr.empty()) {
    if (options.size > 1)
      return Status::InvalidArgument("HVD_SIZE=" + std::to_string(options.size) +
                                     " but HVD_STORE_ADDR is not set: start the job with dprun");
    store = hvd::NewInMemoryStore();
  } else {
    std::string host;
    int port = 0;
    HVD_RETURN_IF_ERROR(hvd::ParseHostPort(options.store_addr, &host, &port).Prepend("HVD_STORE_ADDR"));
    HVD_RETURN_IF_ERROR(
        hvd::ConnectTcpStore(host, port, options.store_secret, options.timeout, &store));
  }
  Instance& in = Default();
  const std::string scope =
      (options.job_id.empty() ? "" : options.job_id + "/") + "init" + std::to_string(in.generation) + "/";
  std::unique_ptr<hvd::Runtime> runtime;
  HVD_RETURN_IF_ERROR(hvd::Runtime::Create(options, hvd::NewPrefixStore(store, scope), &runtime));
  // dprun's --start-timeout watches for this key.
  HVD_RETURN_IF_ERROR(
      store->Set("hvd/started/" + std::to_string(options.rank), std::to_string(getpid())));
  in.runtime = std::move(runtime);
  ++in.generation;
  in.state = State::kRunning;
  return Status::OK();
}

Status Topology(int* out, int hvd::RuntimeOptions::*field) {
  if (out == nullptr) return Status::InvalidArgument("out is NULL");
  std::shared_ptr<hvd::Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  *out = rt->options().*field;
  return Status::OK();
}

Status Allreduce(const hvd_allreduce_args_t* a, hvd_handle_t** handle) {
  if (a == nullptr) return Status::InvalidArgument("args is NULL");
  if (a->name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  std::shared_ptr<hvd::Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  if (!hvd::IsValidDataType(a->dtype))
    return Status::InvalidArgument(std::string("tensor '") + a->name + "': unknown dtype " +
                                   std::to_string(static_cast<int>(a->dtype)));
  if (!hvd::IsValidReduceOp(a->op))
    return Status::InvalidArgument(std::string("tensor '") + a->name + "': unknown reduce op " +
                                   std::to_string(static_cast<int>(a->op)));
  hvd::AllreduceArgs args;
  args.name = a->name;
  args.input = a->sendbuf;
  args.output = a->recvbuf;
  args.count = a->count;
  args.dtype = static_cast<hvd::DataType>(a->dtype);
  args.op = static_cast<hvd::ReduceOp>(a->op);
  args.prescale_factor = a->prescale_factor;
  args.postscale_factor = a->postscale_factor;
  args.process_set = a->process_set;
  std::shared_ptr<hvd::Work> work;
  HVD_RETURN_IF_ERROR(rt->Allreduce(args, &work));
  if (handle != nullptr) {
    *handle = Register(std::move(work));
    return Status::OK();
  }
  return work->Wait(std::chrono::milliseconds(-1));
}

}  // namespace

#define HVD_C_GUARD(body)                                                   \
  try {                                                                     \
    body                                                                    \
  } catch (const std::exception& e) {                                       \
    return Report(Status::Internal(std::string("unexpected exception: ") + e.what())); \
  } catch (...) {                                                           \
    return Report(Status::Internal("unexpected exception"));                \
  }

extern "C" {

hvd_status_t hvd_init(void) {
  HVD_C_GUARD({
    Instance& in = Default();
    std::lock_guard<std::mutex> lock(in.mu);
    if (in.state == State::kRunning) return HVD_SUCCESS;
    return Report(Init());
  })
}

hvd_status_t hvd_shutdown(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    {
      Instance& in = Default();
      std::lock_guard<std::mutex> lock(in.mu);
      if (in.state != State::kRunning) return HVD_SUCCESS;
      rt = std::move(in.runtime);
      in.state = State::kShutDown;
    }
    return Report(rt->Shutdown());
  })
}

hvd_status_t hvd_is_initialized(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    Instance& in = Default();
    std::lock_guard<std::mutex> lock(in.mu);
    *out = in.state == State::kRunning ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_rank(int* out) { HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::rank)); }) }
hvd_status_t hvd_size(int* out) { HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::size)); }) }
hvd_status_t hvd_local_rank(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::local_rank)); })
}
hvd_status_t hvd_local_size(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::local_size)); })
}
hvd_status_t hvd_cross_rank(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::cross_rank)); })
}
hvd_status_t hvd_cross_size(int* out) {
  HVD_C_GUARD({ return Report(Topology(out, &hvd::RuntimeOptions::cross_size)); })
}

hvd_status_t hvd_check_health(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    return Report(rt->LoopStatus());
  })
}

void hvd_allreduce_args_init(hvd_allreduce_args_t* args) {
  if (args == nullptr) return;
  *args = hvd_allreduce_args_t{};
  args->dtype = HVD_FLOAT32;
  args->op = HVD_SUM;
  args->prescale_factor = 1.0;
  args->postscale_factor = 1.0;
  args->process_set = HVD_GLOBAL_PROCESS_SET;
}

hvd_status_t hvd_allreduce_ex(const hvd_allreduce_args_t* args, hvd_handle_t** handle) {
  HVD_C_GUARD({
    if (handle != nullptr) *handle = nullptr;
    return Report(Allreduce(args, handle));
  })
}

hvd_status_t hvd_allreduce(const char* name, const void* sendbuf, void* recvbuf, int64_t count,
                           hvd_dtype_t dtype, hvd_reduce_op_t op) {
  hvd_allreduce_args_t a;
  hvd_allreduce_args_init(&a);
  a.name = name;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return hvd_allreduce_ex(&a, nullptr);
}

hvd_status_t hvd_allreduce_async(const char* name, const void* sendbuf, void* recvbuf,
                                 int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                 hvd_handle_t** handle) {
  if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
  hvd_allreduce_args_t a;
  hvd_allreduce_args_init(&a);
  a.name = name;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return hvd_allreduce_ex(&a, handle);
}

hvd_status_t hvd_poll(hvd_handle_t* handle, int* done) {
  HVD_C_GUARD({
    if (done == nullptr) return Report(Status::InvalidArgument("done is NULL"));
    std::shared_ptr<hvd::Work> work;
    Status s = Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    *done = work->Poll() ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_wait(hvd_handle_t* handle, int64_t timeout_ms) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    Status s = Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    return Report(work->Wait(std::chrono::milliseconds(timeout_ms)));
  })
}

void hvd_handle_release(hvd_handle_t* handle) {
  if (handle == nullptr) return;
  try {
    Instance& in = Default();
    std::lock_guard<std::mutex> lock(in.handles_mu);
    if (in.handles.erase(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle))) == 0)
      Report(Status::InvalidArgument("hvd_handle_release: unknown handle (released twice?)"));
  } catch (...) {
  }
}

const char* hvd_status_string(hvd_status_t status) {
  return hvd::StatusCodeName(static_cast<StatusCode>(status));
}

const char* hvd_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
