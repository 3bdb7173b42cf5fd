// The C API over hvd::Runtime (see hvd.h for the contract).
//
// The default Runtime is the only process-wide state. Handles are ids into a
// registry rather than pointers, so a released or forged handle is detected
// instead of being dereferenced. No exception crosses this boundary.
#include "bindings/c/hvd.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/bootstrap.h"
#include "runtime/data/device_ops.h"
#include "runtime/runtime.h"

// hvd_reduce_op_t mirrors hvd::ReduceOp value for value (runtime/common/types.h).
static_assert(HVD_SUM == static_cast<int>(hvd::ReduceOp::kSum) &&
                  HVD_AVERAGE == static_cast<int>(hvd::ReduceOp::kAverage) &&
                  HVD_MIN == static_cast<int>(hvd::ReduceOp::kMin) &&
                  HVD_MAX == static_cast<int>(hvd::ReduceOp::kMax) &&
                  HVD_PRODUCT == static_cast<int>(hvd::ReduceOp::kProduct) &&
                  HVD_ADASUM == static_cast<int>(hvd::ReduceOp::kAdasum) &&
                  HVD_ADASUM + 1 == hvd::kNumReduceOps,
              "hvd_reduce_op_t and hvd::ReduceOp must agree");
// hvd_dtype_t mirrors hvd::DataType, and hvd_status_t hvd::StatusCode.
static_assert(HVD_FLOAT32 == static_cast<int>(hvd::DataType::kFloat32) &&
                  HVD_FLOAT64 == static_cast<int>(hvd::DataType::kFloat64) &&
                  HVD_FLOAT16 == static_cast<int>(hvd::DataType::kFloat16) &&
                  HVD_BFLOAT16 == static_cast<int>(hvd::DataType::kBFloat16) &&
                  HVD_INT8 == static_cast<int>(hvd::DataType::kInt8) &&
                  HVD_UINT8 == static_cast<int>(hvd::DataType::kUInt8) &&
                  HVD_INT32 == static_cast<int>(hvd::DataType::kInt32) &&
                  HVD_INT64 == static_cast<int>(hvd::DataType::kInt64) &&
                  HVD_INT16 == static_cast<int>(hvd::DataType::kInt16) &&
                  HVD_INT16 + 1 == hvd::kNumDataTypes,
              "hvd_dtype_t and hvd::DataType must agree");
static_assert(HVD_SUCCESS == static_cast<int>(hvd::StatusCode::kOk) &&
                  HVD_INVALID_ARGUMENT == static_cast<int>(hvd::StatusCode::kInvalidArgument) &&
                  HVD_INVALID_USAGE == static_cast<int>(hvd::StatusCode::kInvalidUsage) &&
                  HVD_NOT_INITIALIZED == static_cast<int>(hvd::StatusCode::kNotInitialized) &&
                  HVD_MISMATCH == static_cast<int>(hvd::StatusCode::kMismatch) &&
                  HVD_TIMEOUT == static_cast<int>(hvd::StatusCode::kTimeout) &&
                  HVD_REMOTE_ERROR == static_cast<int>(hvd::StatusCode::kRemoteError) &&
                  HVD_SHUT_DOWN == static_cast<int>(hvd::StatusCode::kShutDown) &&
                  HVD_INTERNAL == static_cast<int>(hvd::StatusCode::kInternal) &&
                  HVD_IN_PROGRESS == static_cast<int>(hvd::StatusCode::kInProgress),
              "hvd_status_t and hvd::StatusCode must agree");

namespace {

using hvd::Status;
using hvd::StatusCode;

thread_local std::string t_last_error;

hvd_status_t Report(const Status& s) {
  if (!s.ok()) t_last_error = s.message();
  return static_cast<hvd_status_t>(s.code());
}

enum class State { kNeverInitialized, kRunning, kShutDown };

struct Handle {
  std::shared_ptr<hvd::Work> work;
  hvd::OpType type;
};

// Live handles in reusable slots, so registering one allocates nothing in the
// steady state. A handle's value is (generation << 32 | slot + 1): a released
// handle's slot moves on a generation, so using it again is detected, as is a
// value that was never handed out.
class HandleTable {
  static_assert(sizeof(uintptr_t) >= sizeof(uint64_t),
                "a handle carries a 64-bit value in a pointer");

 public:
  uint64_t Add(Handle h) {
    uint32_t i;
    if (free_.empty()) {
      i = static_cast<uint32_t>(slots_.size());
      slots_.emplace_back();
    } else {
      i = free_.back();
      free_.pop_back();
    }
    Slot& slot = slots_[i];
    slot.handle = std::move(h);
    slot.used = true;
    return (static_cast<uint64_t>(slot.generation) << 32) | (static_cast<uint64_t>(i) + 1);
  }

  // The live handle with this value, or null.
  Handle* Find(uint64_t id) {
    const uint64_t low = id & 0xffffffffu;
    if (low == 0 || low > slots_.size()) return nullptr;
    Slot& slot = slots_[low - 1];
    if (!slot.used || slot.generation != static_cast<uint32_t>(id >> 32)) return nullptr;
    return &slot.handle;
  }

  // Releases the handle; false if it was not live.
  bool Erase(uint64_t id) {
    Handle* h = Find(id);
    if (h == nullptr) return false;
    const uint32_t i = static_cast<uint32_t>((id & 0xffffffffu) - 1);
    Slot& slot = slots_[i];
    slot.handle.work.reset();
    slot.used = false;
    ++slot.generation;
    free_.push_back(i);
    return true;
  }

 private:
  struct Slot {
    Handle handle;
    uint32_t generation = 1;
    bool used = false;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

// The default instance. Leaked on purpose: it must outlive static destructors
// that may still call in during process exit.
struct Instance {
  std::mutex mu;
  State state = State::kNeverInitialized;
  std::shared_ptr<hvd::Runtime> runtime;
  // Starts the runtime from the environment, and keeps what outlives one runtime:
  // the store server rank 0 serves for other launchers, and the generation.
  hvd::Bootstrap bootstrap;

  std::mutex handles_mu;
  HandleTable handles;  // guarded by handles_mu
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

hvd_handle_t* Register(std::shared_ptr<hvd::Work> work, hvd::OpType type) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  const uint64_t id = in.handles.Add(Handle{std::move(work), type});
  return reinterpret_cast<hvd_handle_t*>(static_cast<uintptr_t>(id));
}

Status Lookup(hvd_handle_t* handle, std::shared_ptr<hvd::Work>* out,
              hvd::OpType* type = nullptr) {
  if (handle == nullptr) return Status::InvalidArgument("handle is NULL");
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  const Handle* h = in.handles.Find(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
  if (h == nullptr)
    return Status::InvalidArgument("unknown handle (already released, or never returned by hvd)");
  *out = h->work;
  if (type) *type = h->type;
  return Status::OK();
}

Status Init() {
  Instance& in = Default();
  std::unique_ptr<hvd::Runtime> runtime;
  HVD_RETURN_IF_ERROR(in.bootstrap.Start(&runtime));
  in.runtime = std::move(runtime);
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

// Waits for `work`, first telling the runtime to start the cycle for newly
// enqueued work (the caller is done enqueuing, for now).
Status WaitFor(const std::shared_ptr<hvd::Work>& work, std::chrono::milliseconds timeout) {
  if (timeout.count() != 0 && !work->Poll()) {
    std::shared_ptr<hvd::Runtime> rt;
    if (Current(&rt).ok()) rt->Flush();
  }
  return work->Wait(timeout);
}

// The size of hvd_allreduce_args_t in its first version (up to `stream`).
constexpr size_t kAllreduceArgsFirstSize = offsetof(hvd_allreduce_args_t, stream) + sizeof(void*);
constexpr size_t kAllreduceArgsMaxSize = 4096;

hvd_allreduce_args_t DefaultAllreduceArgs() {
  hvd_allreduce_args_t d{};
  d.struct_size = sizeof(d);
  d.dtype = HVD_FLOAT32;
  d.op = HVD_SUM;
  d.prescale_factor = 1.0;
  d.postscale_factor = 1.0;
  d.process_set = HVD_GLOBAL_PROCESS_SET;
  d.device = -1;
  d.stream = nullptr;
  return d;
}

// The caller's struct as this library knows it: fields the caller's (older)
// header lacks keep their defaults; fields past this library's end must be zero.
Status ReadAllreduceArgs(const hvd_allreduce_args_t* given, hvd_allreduce_args_t* out) {
  const size_t size = given->struct_size;
  if (size < kAllreduceArgsFirstSize)
    return Status::InvalidArgument(
        "args->struct_size is " + std::to_string(size) + ", below the " +
        std::to_string(kAllreduceArgsFirstSize) +
        " bytes of the first hvd_allreduce_args_t: initialise args with hvd_allreduce_args_init");
  // A later header adds a few fields, not pages of them: a larger size is a struct
  // that was never initialised, and its bytes past ours are not there to check.
  if (size > kAllreduceArgsMaxSize)
    return Status::InvalidArgument(
        "args->struct_size is " + std::to_string(size) + ", more than " +
        std::to_string(kAllreduceArgsMaxSize) +
        " bytes: initialise args with hvd_allreduce_args_init");
  *out = DefaultAllreduceArgs();
  std::memcpy(static_cast<void*>(out), given, std::min(size, sizeof(*out)));
  const auto* bytes = reinterpret_cast<const unsigned char*>(given);
  for (size_t i = sizeof(*out); i < size; ++i)
    if (bytes[i] != 0)
      return Status::InvalidArgument(
          "args sets a field at byte " + std::to_string(i) + " that this libhvd does not know (its "
          "hvd_allreduce_args_t has " + std::to_string(sizeof(*out)) + " bytes, the caller's " +
          std::to_string(size) + "): use a libhvd as new as the hvd.h the caller was built with");
  out->struct_size = sizeof(*out);
  return Status::OK();
}

// The runtime's arguments for one hvd_allreduce_args_t.
Status ToAllreduceArgs(const hvd_allreduce_args_t* given, hvd::AllreduceArgs* out) {
  if (given == nullptr) return Status::InvalidArgument("args is NULL");
  hvd_allreduce_args_t copy;
  HVD_RETURN_IF_ERROR(ReadAllreduceArgs(given, &copy));
  const hvd_allreduce_args_t* a = &copy;
  if (a->name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  if (!hvd::IsValidDataType(a->dtype))
    return Status::InvalidArgument(std::string("tensor '") + a->name + "': unknown dtype " +
                                   std::to_string(static_cast<int>(a->dtype)));
  if (!hvd::IsValidReduceOp(a->op))
    return Status::InvalidArgument(std::string("tensor '") + a->name + "': unknown reduce op " +
                                   std::to_string(static_cast<int>(a->op)));
  if (a->ndim != 0) {
    if (a->ndim < 0 || a->ndim > 64)
      return Status::InvalidArgument(std::string("tensor '") + a->name + "': ndim " +
                                     std::to_string(a->ndim) + " is not in 0..64");
    if (a->shape == nullptr)
      return Status::InvalidArgument(std::string("tensor '") + a->name + "': shape is NULL");
  }
  hvd::AllreduceArgs& args = *out;
  args.shape.assign(a->shape, a->shape + a->ndim);
  args.name = a->name;
  args.input = a->sendbuf;
  args.output = a->recvbuf;
  args.count = a->count;
  args.dtype = static_cast<hvd::DataType>(a->dtype);
  args.op = static_cast<hvd::ReduceOp>(a->op);
  args.prescale_factor = a->prescale_factor;
  args.postscale_factor = a->postscale_factor;
  args.process_set = a->process_set;
  args.device = a->device;
  args.stream = a->stream;
  return Status::OK();
}

Status Allreduce(const hvd_allreduce_args_t* given, hvd_handle_t** handle) {
  hvd::AllreduceArgs args;
  HVD_RETURN_IF_ERROR(ToAllreduceArgs(given, &args));
  std::shared_ptr<hvd::Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  std::shared_ptr<hvd::Work> work;
  HVD_RETURN_IF_ERROR(rt->Allreduce(std::move(args), &work));
  if (handle != nullptr) {
    *handle = Register(std::move(work), hvd::OpType::kAllreduce);
    return Status::OK();
  }
  return WaitFor(work, std::chrono::milliseconds(-1));
}


Status CheckName(const char* name) {
  if (name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  return Status::OK();
}

Status CheckDtype(const char* name, hvd_dtype_t dtype) {
  if (!hvd::IsValidDataType(dtype))
    return Status::InvalidArgument(std::string("tensor '") + name + "': unknown dtype " +
                                   std::to_string(static_cast<int>(dtype)));
  return Status::OK();
}

Status CheckOp(const char* name, hvd_reduce_op_t op) {
  if (!hvd::IsValidReduceOp(op))
    return Status::InvalidArgument(std::string("tensor '") + name + "': unknown reduce op " +
                                   std::to_string(static_cast<int>(op)));
  return Status::OK();
}

Status MakeShape(const char* name, const int64_t* shape, int ndim, std::vector<int64_t>* out) {
  if (ndim < 1 || ndim > 64)
    return Status::InvalidArgument(std::string("tensor '") + name + "': ndim " +
                                   std::to_string(ndim) + " is not in 1..64");
  if (shape == nullptr) return Status::InvalidArgument(std::string("tensor '") + name + "': shape is NULL");
  out->assign(shape, shape + ndim);
  return Status::OK();
}

// Enqueues `entries` as one group and returns a handle per entry.
Status EnqueueWithHandles(std::vector<hvd::TensorEntry> entries, int32_t process_set,
                          hvd_handle_t** handles) {
  std::shared_ptr<hvd::Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  std::vector<hvd::OpType> types;
  for (const auto& e : entries) types.push_back(e.type);
  std::vector<std::shared_ptr<hvd::Work>> works;
  HVD_RETURN_IF_ERROR(rt->Enqueue(std::move(entries), process_set, &works));
  for (size_t i = 0; i < works.size(); ++i) handles[i] = Register(std::move(works[i]), types[i]);
  return Status::OK();
}

Status EnqueueOne(hvd::TensorEntry entry, int32_t process_set, hvd_handle_t** handle) {
  if (handle == nullptr) return Status::InvalidArgument("handle is NULL");
  *handle = nullptr;
  std::vector<hvd::TensorEntry> entries;
  entries.push_back(std::move(entry));
  return EnqueueWithHandles(std::move(entries), process_set, handle);
}

// Waits for and releases a handle made for a blocking call.
Status WaitAndRelease(hvd_handle_t* handle, int64_t* scalar = nullptr) {
  std::shared_ptr<hvd::Work> work;
  HVD_RETURN_IF_ERROR(Lookup(handle, &work));
  Status s = WaitFor(work, std::chrono::milliseconds(-1));
  if (scalar) *scalar = work->scalar_result();
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  in.handles.Erase(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle)));
  return s;
}

Status CheckGroup(int n, const char* const* names, const void* const* sendbufs,
                  const hvd_dtype_t* dtypes, hvd_handle_t** handles) {
  if (n < 1) return Status::InvalidArgument("a group needs at least one tensor, got " + std::to_string(n));
  if (!names || !sendbufs || !dtypes || !handles)
    return Status::InvalidArgument("grouped call: names, sendbufs, dtypes and handles must not be NULL");
  for (int i = 0; i < n; ++i) handles[i] = nullptr;
  for (int i = 0; i < n; ++i) {
    HVD_RETURN_IF_ERROR(CheckName(names[i]));
    HVD_RETURN_IF_ERROR(CheckDtype(names[i], dtypes[i]));
  }
  return Status::OK();
}

std::atomic<int64_t> g_next_group{1};

Status GroupedAllreduce(int n, const char* const* names, const void* const* sendbufs,
                        void* const* recvbufs, const int64_t* counts, const hvd_dtype_t* dtypes,
                        hvd_reduce_op_t op, double pre, double post, int32_t ps,
                        hvd_handle_t** handles) {
  HVD_RETURN_IF_ERROR(CheckGroup(n, names, sendbufs, dtypes, handles));
  if (!recvbufs || !counts) return Status::InvalidArgument("grouped allreduce: recvbufs and counts must not be NULL");
  HVD_RETURN_IF_ERROR(CheckOp(names[0], op));
  const int64_t group = g_next_group++;
  std::vector<hvd::TensorEntry> entries(n);
  for (int i = 0; i < n; ++i) {
    if (counts[i] < 0)
      return Status::InvalidArgument(std::string("tensor '") + names[i] + "': negative count " +
                                     std::to_string(counts[i]));
    auto& e = entries[i];
    e.name = names[i];
    e.type = hvd::OpType::kAllreduce;
    e.dtype = static_cast<hvd::DataType>(dtypes[i]);
    e.reduce_op = static_cast<hvd::ReduceOp>(op);
    e.input = sendbufs[i];
    e.output = recvbufs[i];
    e.shape = {counts[i]};
    e.prescale_factor = pre;
    e.postscale_factor = post;
    e.group_id = group;
    e.group_size = n;
  }
  return EnqueueWithHandles(std::move(entries), ps, handles);
}

// hvd_grouped_allreduce_ex: one group of all-reduces, each from its own args.
Status GroupedAllreduceEx(int n, const hvd_allreduce_args_t* const* args, hvd_handle_t** handles) {
  if (n < 1) return Status::InvalidArgument("a group needs at least one tensor, got " + std::to_string(n));
  if (args == nullptr || handles == nullptr)
    return Status::InvalidArgument("grouped all-reduce: args and handles must not be NULL");
  for (int i = 0; i < n; ++i) handles[i] = nullptr;
  const int64_t group = g_next_group++;
  std::vector<hvd::TensorEntry> entries(n);
  int32_t process_set = 0;
  for (int i = 0; i < n; ++i) {
    hvd::AllreduceArgs a;
    HVD_RETURN_IF_ERROR(ToAllreduceArgs(args[i], &a).Prepend("args[" + std::to_string(i) + "]"));
    if (i == 0) process_set = a.process_set;
    const hvd::TensorEntry& first = entries[0];
    if (i > 0 && (a.process_set != process_set || a.op != first.reduce_op ||
                  a.prescale_factor != first.prescale_factor ||
                  a.postscale_factor != first.postscale_factor || a.device != first.device))
      return Status::InvalidArgument("grouped all-reduce: tensor '" + a.name + "' differs from '" +
                                     first.name + "' in its process set, reduce op, scale factors or "
                                     "device; a group's tensors must share them");
    HVD_RETURN_IF_ERROR(hvd::MakeAllreduceEntry(std::move(a), &entries[i]));
    entries[i].group_id = group;
    entries[i].group_size = n;
  }
  return EnqueueWithHandles(std::move(entries), process_set, handles);
}

Status GroupedShaped(hvd::OpType type, int n, const char* const* names,
                     const void* const* sendbufs, const int64_t* const* shapes, const int* ndims,
                     const hvd_dtype_t* dtypes, hvd_reduce_op_t op, double pre, double post,
                     int32_t ps, hvd_handle_t** handles, int32_t device = -1,
                     void* stream = nullptr) {
  HVD_RETURN_IF_ERROR(CheckGroup(n, names, sendbufs, dtypes, handles));
  if (!shapes || !ndims) return Status::InvalidArgument("grouped call: shapes and ndims must not be NULL");
  if (type == hvd::OpType::kReducescatter) HVD_RETURN_IF_ERROR(CheckOp(names[0], op));
  const int64_t group = g_next_group++;
  std::vector<hvd::TensorEntry> entries(n);
  for (int i = 0; i < n; ++i) {
    auto& e = entries[i];
    HVD_RETURN_IF_ERROR(MakeShape(names[i], shapes[i], ndims[i], &e.shape));
    e.name = names[i];
    e.type = type;
    e.dtype = static_cast<hvd::DataType>(dtypes[i]);
    e.reduce_op = static_cast<hvd::ReduceOp>(op);
    e.input = sendbufs[i];
    e.prescale_factor = pre;
    e.postscale_factor = post;
    e.device = device;
    e.stream = stream;
    e.group_id = n > 1 ? group : 0;
    e.group_size = n;
  }
  return EnqueueWithHandles(std::move(entries), ps, handles);
}

Status ProcessSetInfo(int32_t id, int* rank, std::vector<int>* ranks) {
  std::shared_ptr<hvd::Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  return rt->ProcessSetInfo(id, rank, ranks);
}

// hvd_allreduce and hvd_allreduce_async: the defaults but for these fields.
hvd_allreduce_args_t PlainAllreduceArgs(const char* name, const void* sendbuf, void* recvbuf,
                                        int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op) {
  hvd_allreduce_args_t a;
  hvd_allreduce_args_init(&a);
  a.name = name;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return a;
}

// hvd_barrier_async and hvd_join_async: `enqueue` is the Runtime's member for it.
hvd_status_t EnqueueTensorless(int32_t process_set, hvd_handle_t** handle, hvd::OpType type,
                               Status (hvd::Runtime::*enqueue)(int, std::shared_ptr<hvd::Work>*)) {
  if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
  *handle = nullptr;
  std::shared_ptr<hvd::Runtime> rt;
  Status s = Current(&rt);
  std::shared_ptr<hvd::Work> work;
  if (s.ok()) s = ((*rt).*enqueue)(process_set, &work);
  if (!s.ok()) return Report(s);
  *handle = Register(std::move(work), type);
  return HVD_SUCCESS;
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

void hvd_allreduce_args_init_sized(hvd_allreduce_args_t* args, size_t struct_size) {
  if (args == nullptr || struct_size < kAllreduceArgsFirstSize) return;
  std::memset(static_cast<void*>(args), 0, struct_size);
  hvd_allreduce_args_t d = DefaultAllreduceArgs();
  d.struct_size = struct_size;
  std::memcpy(static_cast<void*>(args), &d, std::min(struct_size, sizeof(d)));
}

hvd_status_t hvd_allreduce_ex(const hvd_allreduce_args_t* args, hvd_handle_t** handle) {
  HVD_C_GUARD({
    if (handle != nullptr) *handle = nullptr;
    return Report(Allreduce(args, handle));
  })
}

hvd_status_t hvd_allreduce(const char* name, const void* sendbuf, void* recvbuf, int64_t count,
                           hvd_dtype_t dtype, hvd_reduce_op_t op) {
  const hvd_allreduce_args_t a = PlainAllreduceArgs(name, sendbuf, recvbuf, count, dtype, op);
  return hvd_allreduce_ex(&a, nullptr);
}

hvd_status_t hvd_allreduce_async(const char* name, const void* sendbuf, void* recvbuf,
                                 int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                 hvd_handle_t** handle) {
  if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
  const hvd_allreduce_args_t a = PlainAllreduceArgs(name, sendbuf, recvbuf, count, dtype, op);
  return hvd_allreduce_ex(&a, handle);
}

hvd_status_t hvd_allgather_async(const char* name, const void* sendbuf, const int64_t* shape,
                                 int ndim, hvd_dtype_t dtype, int32_t process_set,
                                 hvd_handle_t** handle) {
  return hvd_allgather_ex(name, sendbuf, shape, ndim, dtype, process_set, -1, nullptr, handle);
}

hvd_status_t hvd_allgather_ex(const char* name, const void* sendbuf, const int64_t* shape,
                              int ndim, hvd_dtype_t dtype, int32_t process_set, int32_t device,
                              void* stream, hvd_handle_t** handle) {
  HVD_C_GUARD({
    const hvd_dtype_t dtypes[1] = {dtype};
    const int ndims[1] = {ndim};
    const int64_t* shapes[1] = {shape};
    const char* names[1] = {name};
    const void* bufs[1] = {sendbuf};
    if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
    return Report(GroupedShaped(hvd::OpType::kAllgather, 1, names, bufs, shapes, ndims, dtypes,
                                HVD_SUM, 1.0, 1.0, process_set, handle, device, stream));
  })
}

hvd_status_t hvd_broadcast_async(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                                 int root_rank, int32_t process_set, hvd_handle_t** handle) {
  return hvd_broadcast_ex(name, buf, count, dtype, root_rank, process_set, -1, nullptr, handle);
}

hvd_status_t hvd_broadcast_ex(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                              int root_rank, int32_t process_set, int32_t device, void* stream,
                              hvd_handle_t** handle) {
  HVD_C_GUARD({
    Status s = CheckName(name);
    if (s.ok()) s = CheckDtype(name, dtype);
    if (s.ok() && count < 0)
      s = Status::InvalidArgument(std::string("tensor '") + name + "': negative count " +
                                  std::to_string(count));
    if (!s.ok()) return Report(s);
    hvd::TensorEntry e;
    e.name = name;
    e.type = hvd::OpType::kBroadcast;
    e.dtype = static_cast<hvd::DataType>(dtype);
    e.input = buf;
    e.output = buf;
    e.shape = {count};
    e.root_rank = root_rank;
    e.device = device;
    e.stream = stream;
    return Report(EnqueueOne(std::move(e), process_set, handle));
  })
}

hvd_status_t hvd_broadcast(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                           int root_rank, int32_t process_set) {
  HVD_C_GUARD({
    hvd_handle_t* h = nullptr;
    hvd_status_t s = hvd_broadcast_async(name, buf, count, dtype, root_rank, process_set, &h);
    if (s != HVD_SUCCESS) return s;
    return Report(WaitAndRelease(h));
  })
}

hvd_status_t hvd_alltoall_async(const char* name, const void* sendbuf, const int64_t* shape,
                                int ndim, hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                                int32_t process_set, hvd_handle_t** handle) {
  return hvd_alltoall_ex(name, sendbuf, shape, ndim, dtype, splits, nsplits, process_set, -1, nullptr,
                         handle);
}

hvd_status_t hvd_alltoall_ex(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                             hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                             int32_t process_set, int32_t device, void* stream,
                             hvd_handle_t** handle) {
  HVD_C_GUARD({
    Status s = CheckName(name);
    if (s.ok()) s = CheckDtype(name, dtype);
    hvd::TensorEntry e;
    if (s.ok()) s = MakeShape(name, shape, ndim, &e.shape);
    if (s.ok() && splits == nullptr && nsplits != 0)
      s = Status::InvalidArgument(std::string("tensor '") + name + "': splits is NULL but nsplits is " +
                                  std::to_string(nsplits));
    if (s.ok() && nsplits < 0)
      s = Status::InvalidArgument(std::string("tensor '") + name + "': negative nsplits");
    if (!s.ok()) return Report(s);
    e.name = name;
    e.type = hvd::OpType::kAlltoall;
    e.dtype = static_cast<hvd::DataType>(dtype);
    e.input = sendbuf;
    e.device = device;
    e.stream = stream;
    if (splits != nullptr) e.splits.assign(splits, splits + nsplits);
    return Report(EnqueueOne(std::move(e), process_set, handle));
  })
}

hvd_status_t hvd_reducescatter_async(const char* name, const void* sendbuf, const int64_t* shape,
                                     int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                     double prescale_factor, double postscale_factor,
                                     int32_t process_set, hvd_handle_t** handle) {
  return hvd_reducescatter_ex(name, sendbuf, shape, ndim, dtype, op, prescale_factor,
                              postscale_factor, process_set, -1, nullptr, handle);
}

hvd_status_t hvd_reducescatter_ex(const char* name, const void* sendbuf, const int64_t* shape,
                                  int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                  double prescale_factor, double postscale_factor,
                                  int32_t process_set, int32_t device, void* stream,
                                  hvd_handle_t** handle) {
  HVD_C_GUARD({
    const hvd_dtype_t dtypes[1] = {dtype};
    const int ndims[1] = {ndim};
    const int64_t* shapes[1] = {shape};
    const char* names[1] = {name};
    const void* bufs[1] = {sendbuf};
    if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
    return Report(GroupedShaped(hvd::OpType::kReducescatter, 1, names, bufs, shapes, ndims, dtypes,
                                op, prescale_factor, postscale_factor, process_set, handle, device,
                                stream));
  })
}

// Waits for a handle made by a blocking call; on failure releases it and NULLs it.
static hvd_status_t FinishBlocking(hvd_status_t enqueued, hvd_handle_t** handle) {
  if (enqueued != HVD_SUCCESS) return enqueued;
  std::shared_ptr<hvd::Work> work;
  Status s = Lookup(*handle, &work);
  if (s.ok()) s = WaitFor(work, std::chrono::milliseconds(-1));
  if (!s.ok()) {
    hvd_handle_release(*handle);
    *handle = nullptr;
  }
  return Report(s);
}

hvd_status_t hvd_allgather(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                           hvd_dtype_t dtype, int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return FinishBlocking(hvd_allgather_async(name, sendbuf, shape, ndim, dtype, process_set, handle),
                          handle);
  })
}

hvd_status_t hvd_alltoall(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                          hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                          int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return FinishBlocking(hvd_alltoall_async(name, sendbuf, shape, ndim, dtype, splits, nsplits,
                                             process_set, handle),
                          handle);
  })
}

hvd_status_t hvd_reducescatter(const char* name, const void* sendbuf, const int64_t* shape,
                               int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                               double prescale_factor, double postscale_factor,
                               int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return FinishBlocking(hvd_reducescatter_async(name, sendbuf, shape, ndim, dtype, op,
                                                  prescale_factor, postscale_factor, process_set,
                                                  handle),
                          handle);
  })
}

hvd_status_t hvd_barrier_async(int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return EnqueueTensorless(process_set, handle, hvd::OpType::kBarrier, &hvd::Runtime::Barrier);
  })
}

hvd_status_t hvd_join_async(int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return EnqueueTensorless(process_set, handle, hvd::OpType::kJoin, &hvd::Runtime::Join);
  })
}

hvd_status_t hvd_handle_join_rank(hvd_handle_t* handle, int* last_rank) {
  HVD_C_GUARD({
    if (last_rank == nullptr) return Report(Status::InvalidArgument("last_rank is NULL"));
    std::shared_ptr<hvd::Work> work;
    hvd::OpType type;
    Status s = Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kJoin) return Report(Status::InvalidUsage("not a join handle"));
    s = work->Wait(std::chrono::milliseconds(0));
    if (!s.ok()) return Report(s);
    *last_rank = static_cast<int>(work->scalar_result());
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_grouped_allreduce(int n, const char* const* names, const void* const* sendbufs,
                                   void* const* recvbufs, const int64_t* counts,
                                   const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                   int32_t process_set) {
  HVD_C_GUARD({
    if (n < 1 || n > (1 << 20))
      return Report(Status::InvalidArgument("a group needs 1 to 2^20 tensors, got " + std::to_string(n)));
    std::vector<hvd_handle_t*> handles(n, nullptr);
    Status s = GroupedAllreduce(n, names, sendbufs, recvbufs, counts, dtypes, op, 1.0, 1.0,
                                process_set, handles.data());
    if (!s.ok()) return Report(s);
    Status first;
    for (hvd_handle_t* h : handles) {
      Status w = WaitAndRelease(h);
      if (!w.ok() && first.ok()) first = w;
    }
    return Report(first);
  })
}

hvd_status_t hvd_barrier(int32_t process_set) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    std::shared_ptr<hvd::Work> work;
    s = rt->Barrier(process_set, &work);
    if (!s.ok()) return Report(s);
    return Report(WaitFor(work, std::chrono::milliseconds(-1)));
  })
}

hvd_status_t hvd_join(int32_t process_set, int* last_rank) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    std::shared_ptr<hvd::Work> work;
    s = rt->Join(process_set, &work);
    if (!s.ok()) return Report(s);
    s = WaitFor(work, std::chrono::milliseconds(-1));
    if (s.ok() && last_rank != nullptr) *last_rank = static_cast<int>(work->scalar_result());
    return Report(s);
  })
}

hvd_status_t hvd_grouped_allreduce_async(int n, const char* const* names,
                                         const void* const* sendbufs, void* const* recvbufs,
                                         const int64_t* counts, const hvd_dtype_t* dtypes,
                                         hvd_reduce_op_t op, double prescale_factor,
                                         double postscale_factor, int32_t process_set,
                                         hvd_handle_t** handles) {
  HVD_C_GUARD({
    return Report(GroupedAllreduce(n, names, sendbufs, recvbufs, counts, dtypes, op,
                                   prescale_factor, postscale_factor, process_set, handles));
  })
}

hvd_status_t hvd_grouped_allreduce_ex(int n, const hvd_allreduce_args_t* const* args,
                                      hvd_handle_t** handles) {
  HVD_C_GUARD({ return Report(GroupedAllreduceEx(n, args, handles)); })
}

hvd_status_t hvd_grouped_allgather_async(int n, const char* const* names,
                                         const void* const* sendbufs,
                                         const int64_t* const* shapes, const int* ndims,
                                         const hvd_dtype_t* dtypes, int32_t process_set,
                                         hvd_handle_t** handles) {
  HVD_C_GUARD({
    return Report(GroupedShaped(hvd::OpType::kAllgather, n, names, sendbufs, shapes, ndims, dtypes,
                                HVD_SUM, 1.0, 1.0, process_set, handles));
  })
}

hvd_status_t hvd_grouped_reducescatter_async(int n, const char* const* names,
                                             const void* const* sendbufs,
                                             const int64_t* const* shapes, const int* ndims,
                                             const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                             double prescale_factor, double postscale_factor,
                                             int32_t process_set, hvd_handle_t** handles) {
  HVD_C_GUARD({
    return Report(GroupedShaped(hvd::OpType::kReducescatter, n, names, sendbufs, shapes, ndims,
                                dtypes, op, prescale_factor, postscale_factor, process_set,
                                handles));
  })
}

hvd_status_t hvd_add_process_set(const int* ranks, int nranks, int32_t* id) {
  HVD_C_GUARD({
    if (id == nullptr) return Report(Status::InvalidArgument("id is NULL"));
    if (ranks == nullptr && nranks > 0) return Report(Status::InvalidArgument("ranks is NULL"));
    if (nranks < 0) return Report(Status::InvalidArgument("negative nranks"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    int out = 0;
    s = rt->AddProcessSet(std::vector<int>(ranks, ranks + nranks), &out);
    if (s.ok()) *id = out;
    return Report(s);
  })
}

hvd_status_t hvd_remove_process_set(int32_t id) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    return Report(rt->RemoveProcessSet(id));
  })
}

hvd_status_t hvd_process_set_rank(int32_t id, int* rank) {
  HVD_C_GUARD({
    if (rank == nullptr) return Report(Status::InvalidArgument("rank is NULL"));
    return Report(ProcessSetInfo(id, rank, nullptr));
  })
}

hvd_status_t hvd_process_set_size(int32_t id, int* size) {
  HVD_C_GUARD({
    if (size == nullptr) return Report(Status::InvalidArgument("size is NULL"));
    std::vector<int> ranks;
    Status s = ProcessSetInfo(id, nullptr, &ranks);
    if (s.ok()) *size = static_cast<int>(ranks.size());
    return Report(s);
  })
}

hvd_status_t hvd_process_set_ranks(int32_t id, int* ranks, int capacity, int* n) {
  HVD_C_GUARD({
    if (n == nullptr) return Report(Status::InvalidArgument("n is NULL"));
    if (ranks == nullptr && capacity > 0) return Report(Status::InvalidArgument("ranks is NULL"));
    std::vector<int> all;
    Status s = ProcessSetInfo(id, nullptr, &all);
    if (!s.ok()) return Report(s);
    *n = static_cast<int>(all.size());
    for (int i = 0; i < capacity && i < *n; ++i) ranks[i] = all[i];
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_handle_result(hvd_handle_t* handle, const void** data, int64_t* nbytes,
                               int* ndim, const int64_t** shape) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    hvd::OpType type;
    Status s = Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kAllgather && type != hvd::OpType::kAlltoall &&
        type != hvd::OpType::kReducescatter)
      return Report(Status::InvalidUsage(std::string("a ") + hvd::OpTypeName(type) +
                                         " handle has no result buffer"));
    s = work->Wait(std::chrono::milliseconds(0));
    if (!s.ok()) return Report(s);
    const auto& device_result = work->device_result();
    const bool on_device = device_result.device >= 0;
    if (data) *data = on_device ? device_result.data.get() : work->result().data();
    if (nbytes)
      *nbytes = on_device ? device_result.bytes : static_cast<int64_t>(work->result().size());
    if (ndim) *ndim = static_cast<int>(work->result_shape().size());
    if (shape) *shape = work->result_shape().data();
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_handle_received_splits(hvd_handle_t* handle, const int64_t** splits, int* n) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    hvd::OpType type;
    Status s = Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kAlltoall)
      return Report(Status::InvalidUsage("only an alltoall handle has received splits"));
    s = work->Wait(std::chrono::milliseconds(0));
    if (!s.ok()) return Report(s);
    if (splits) *splits = work->received_splits().data();
    if (n) *n = static_cast<int>(work->received_splits().size());
    return HVD_SUCCESS;
  })
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
    return Report(WaitFor(work, std::chrono::milliseconds(timeout_ms)));
  })
}

void hvd_handle_release(hvd_handle_t* handle) {
  if (handle == nullptr) return;
  try {
    Instance& in = Default();
    std::lock_guard<std::mutex> lock(in.handles_mu);
    if (!in.handles.Erase(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle))))
      Report(Status::InvalidArgument("hvd_handle_release: unknown handle (released twice?)"));
  } catch (...) {
  }
}

hvd_status_t hvd_straggler_report(char* buf, size_t capacity, size_t* length) {
  HVD_C_GUARD({
    if (length == nullptr) return Report(Status::InvalidArgument("length is NULL"));
    if (buf == nullptr && capacity > 0) return Report(Status::InvalidArgument("buf is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    const std::string report = rt->StragglerReport();
    *length = report.size();
    if (capacity > 0) {
      const size_t n = std::min(capacity - 1, report.size());
      std::memcpy(buf, report.data(), n);
      buf[n] = '\0';
    }
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_host_backend(int32_t process_set, const char** name) {
  HVD_C_GUARD({
    if (name == nullptr) return Report(Status::InvalidArgument("name is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (!s.ok()) return Report(s);
    *name = rt->HostBackendName(process_set);
    if (*name == nullptr)
      return Report(Status::InvalidArgument("unknown process set " + std::to_string(process_set)));
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_cuda_built(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    *out = hvd::CudaBuilt() ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_start_timeline(const char* file_path, int mark_cycles) {
  HVD_C_GUARD({
    if (file_path == nullptr) return Report(Status::InvalidArgument("file_path is NULL"));
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (s.ok()) s = rt->StartTimeline(file_path, mark_cycles != 0);
    return Report(s);
  })
}

hvd_status_t hvd_stop_timeline(void) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Runtime> rt;
    Status s = Current(&rt);
    if (s.ok()) rt->StopTimeline();
    return Report(s);
  })
}

hvd_status_t hvd_nccl_version(int* out) {
  HVD_C_GUARD({
    if (out == nullptr) return Report(Status::InvalidArgument("out is NULL"));
    *out = hvd::NcclVersionCode();
    return HVD_SUCCESS;
  })
}

const char* hvd_status_string(hvd_status_t status) {
  return hvd::StatusCodeName(static_cast<StatusCode>(status));
}

const char* hvd_last_error(void) { return t_last_error.c_str(); }

}  // extern "C"
