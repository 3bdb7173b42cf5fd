// The all-reduce entry points: the plain ones, the extended one that takes a
// versioned hvd_allreduce_args_t, and the grouped ones. Each fills the entry of
// every tensor from its C arguments; a grouped call submits them as a
// CollectiveArgs (enqueue.cc), a single all-reduce enqueues its one entry itself
// (AllreduceOne).
//
// hvd_allreduce_args_t versions (hvd.h): the caller's struct_size says which header
// it was built with. A smaller struct (an earlier header) gets this library's
// defaults for the fields it lacks; a larger one (a later header) is accepted while
// every byte past this library's struct is zero, the defaults of fields it does not
// know. A size below the first version, or above kAllreduceArgsMaxSize, is a struct
// that was never initialised.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "bindings/c/c_api_internal.h"
#include "runtime/data/validate.h"

namespace hvd {
namespace capi {
namespace {

// The size of hvd_allreduce_args_t in its first version (up to `stream`).
constexpr size_t kAllreduceArgsFirstSize = offsetof(hvd_allreduce_args_t, stream) + sizeof(void*);
// A later header adds a few fields, not pages of them.
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

// The caller's struct as this library knows it (see the top of the file).
Status ReadVersioned(const hvd_allreduce_args_t* given, hvd_allreduce_args_t* out) {
  const size_t size = given->struct_size;
  if (size < kAllreduceArgsFirstSize)
    return Status::InvalidArgument(
        "args->struct_size is " + std::to_string(size) + ", below the " +
        std::to_string(kAllreduceArgsFirstSize) +
        " bytes of the first hvd_allreduce_args_t: initialise args with hvd_allreduce_args_init");
  // A larger size is a struct that was never initialised, and its bytes past ours
  // are not there to check.
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

// What must be checked before reading an args' name and shape.
Status CheckAllreduceArgs(const hvd_allreduce_args_t& a) {
  if (a.name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  if (a.ndim != 0) {
    if (a.ndim < 0 || a.ndim > kMaxDims)
      return Status::InvalidArgument(std::string("tensor '") + a.name + "': ndim " +
                                     std::to_string(a.ndim) + " is not in 0.." +
                                     std::to_string(kMaxDims));
    if (a.shape == nullptr)
      return Status::InvalidArgument(std::string("tensor '") + a.name + "': shape is NULL");
  }
  return Status::OK();
}

// The entry of one all-reduce from this library's args (ReadVersioned). Checks what
// must be checked before reading the name and the shape, and the count against the
// shape; the runtime checks the rest.
Status FillAllreduceEntry(const hvd_allreduce_args_t& a, TensorEntry* e) {
  HVD_RETURN_IF_ERROR(CheckAllreduceArgs(a));
  e->name.assign(a.name);
  e->type = OpType::kAllreduce;
  e->dtype = static_cast<DataType>(a.dtype);
  e->input = a.sendbuf;
  e->output = a.recvbuf;
  SetReduction(a.op, a.prescale_factor, a.postscale_factor, e);
  e->device = a.device;
  e->stream = a.stream;
  return SetCountShape(a.count, a.shape, a.ndim, e);
}

// One all-reduce, as this library's args: a handle in *handle, or (handle NULL)
// waits for it. The call a training step makes once per gradient, so its entry is
// enqueued without the general path's CollectiveArgs (enqueue.cc).
Status AllreduceOne(const hvd_allreduce_args_t& a, hvd_handle_t** handle) {
  TensorEntry e;
  HVD_RETURN_IF_ERROR(FillAllreduceEntry(a, &e));
  std::shared_ptr<Runtime> rt;
  HVD_RETURN_IF_ERROR(Current(&rt));
  std::shared_ptr<Work> work;
  HVD_RETURN_IF_ERROR(rt->EnqueueOne(std::move(e), a.process_set, &work));
  if (handle == nullptr) return WaitFor(work, std::chrono::milliseconds(-1));
  *handle = Register(std::move(work), OpType::kAllreduce);
  return Status::OK();
}

// hvd_allreduce and hvd_allreduce_async: the defaults but for these fields.
hvd_allreduce_args_t PlainAllreduceArgs(const char* name, const void* sendbuf, void* recvbuf,
                                        int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op) {
  hvd_allreduce_args_t a = DefaultAllreduceArgs();
  a.name = name;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = count;
  a.dtype = dtype;
  a.op = op;
  return a;
}

// hvd_grouped_allreduce(_async): one group from parallel arrays. `blocking` calls
// take no handles.
Status ReadGroupedAllreduce(int n, const char* const* names, const void* const* sendbufs,
                            void* const* recvbufs, const int64_t* counts,
                            const hvd_dtype_t* dtypes, hvd_reduce_op_t op, double pre,
                            double post, int32_t process_set, hvd_handle_t** handles,
                            bool blocking, CollectiveArgs* call) {
  call->type = OpType::kAllreduce;
  call->process_set = process_set;
  HVD_RETURN_IF_ERROR(ReadGroup(n, names, sendbufs, dtypes, handles, blocking, call));
  if (!recvbufs || !counts)
    return Status::InvalidArgument("grouped allreduce: recvbufs and counts must not be NULL");
  for (int i = 0; i < n; ++i) {
    TensorEntry& e = call->tensors[i];
    e.output = recvbufs[i];
    SetReduction(op, pre, post, &e);
    HVD_RETURN_IF_ERROR(SetCountShape(counts[i], nullptr, 0, &e));
  }
  return Status::OK();
}

// hvd_grouped_allreduce_ex: one group of all-reduces, each from its own args, which
// must share their set, op, scale factors and device.
Status ReadGroupedAllreduceEx(int n, const hvd_allreduce_args_t* const* args,
                              hvd_handle_t** handles, CollectiveArgs* group) {
  if (n < 1)
    return Status::InvalidArgument("a group needs at least one tensor, got " + std::to_string(n));
  if (args == nullptr || handles == nullptr)
    return Status::InvalidArgument("grouped all-reduce: args and handles must not be NULL");
  for (int i = 0; i < n; ++i) handles[i] = nullptr;
  group->type = OpType::kAllreduce;
  group->grouped = true;
  group->tensors.resize(n);
  for (int i = 0; i < n; ++i) {
    const std::string at = "args[" + std::to_string(i) + "]";
    if (args[i] == nullptr) return Status::InvalidArgument("args is NULL").Prepend(at);
    hvd_allreduce_args_t a;
    HVD_RETURN_IF_ERROR(ReadVersioned(args[i], &a).Prepend(at));
    TensorEntry& e = group->tensors[i];
    HVD_RETURN_IF_ERROR(FillAllreduceEntry(a, &e).Prepend(at));
    if (i == 0) {
      group->process_set = a.process_set;
      continue;
    }
    const TensorEntry& first = group->tensors[0];
    if (a.process_set != group->process_set || e.reduce_op != first.reduce_op ||
        e.prescale_factor != first.prescale_factor ||
        e.postscale_factor != first.postscale_factor || e.device != first.device)
      return Status::InvalidArgument(
          "grouped all-reduce: tensor '" + e.name + "' differs from '" + first.name +
          "' in its process set, reduce op, scale factors or device; a group's tensors must "
          "share them");
  }
  return Status::OK();
}

}  // namespace
}  // namespace capi
}  // namespace hvd

using hvd::Status;
using hvd::capi::CollectiveArgs;
using hvd::capi::Report;

extern "C" {

void hvd_allreduce_args_init_sized(hvd_allreduce_args_t* args, size_t struct_size) {
  using hvd::capi::kAllreduceArgsFirstSize;
  if (args == nullptr || struct_size < kAllreduceArgsFirstSize) return;
  std::memset(static_cast<void*>(args), 0, struct_size);
  hvd_allreduce_args_t d = hvd::capi::DefaultAllreduceArgs();
  d.struct_size = struct_size;
  std::memcpy(static_cast<void*>(args), &d, std::min(struct_size, sizeof(d)));
}

hvd_status_t hvd_allreduce_ex(const hvd_allreduce_args_t* args, hvd_handle_t** handle) {
  HVD_C_GUARD({
    if (handle != nullptr) *handle = nullptr;
    if (args == nullptr) return Report(Status::InvalidArgument("args is NULL"));
    hvd_allreduce_args_t a;
    Status s = hvd::capi::ReadVersioned(args, &a);
    if (s.ok()) s = hvd::capi::AllreduceOne(a, handle);
    return Report(s);
  })
}

hvd_status_t hvd_allreduce(const char* name, const void* sendbuf, void* recvbuf, int64_t count,
                           hvd_dtype_t dtype, hvd_reduce_op_t op) {
  HVD_C_GUARD({
    return Report(hvd::capi::AllreduceOne(
        hvd::capi::PlainAllreduceArgs(name, sendbuf, recvbuf, count, dtype, op), nullptr));
  })
}

hvd_status_t hvd_allreduce_async(const char* name, const void* sendbuf, void* recvbuf,
                                 int64_t count, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                 hvd_handle_t** handle) {
  HVD_C_GUARD({
    if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
    *handle = nullptr;
    return Report(hvd::capi::AllreduceOne(
        hvd::capi::PlainAllreduceArgs(name, sendbuf, recvbuf, count, dtype, op), handle));
  })
}

hvd_status_t hvd_grouped_allreduce_ex(int n, const hvd_allreduce_args_t* const* args,
                                      hvd_handle_t** handles) {
  HVD_C_GUARD({
    CollectiveArgs call;
    Status s = hvd::capi::ReadGroupedAllreduceEx(n, args, handles, &call);
    if (s.ok()) s = hvd::capi::SubmitAsync(std::move(call), handles);
    return Report(s);
  })
}

hvd_status_t hvd_grouped_allreduce(int n, const char* const* names, const void* const* sendbufs,
                                   void* const* recvbufs, const int64_t* counts,
                                   const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                   int32_t process_set) {
  HVD_C_GUARD({
    if (n < 1)
      return Report(
          Status::InvalidArgument("a group needs at least one tensor, got " + std::to_string(n)));
    if (n > (1 << 20))
      return Report(
          Status::InvalidArgument("a group has at most 2^20 tensors, got " + std::to_string(n)));
    CollectiveArgs call;
    Status s = hvd::capi::ReadGroupedAllreduce(n, names, sendbufs, recvbufs, counts, dtypes, op,
                                               1.0, 1.0, process_set, nullptr, true, &call);
    if (s.ok()) s = hvd::capi::SubmitAndWait(std::move(call));
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
    CollectiveArgs call;
    Status s = hvd::capi::ReadGroupedAllreduce(n, names, sendbufs, recvbufs, counts, dtypes, op,
                                               prescale_factor, postscale_factor, process_set,
                                               handles, false, &call);
    if (s.ok()) s = hvd::capi::SubmitAsync(std::move(call), handles);
    return Report(s);
  })
}

}  // extern "C"
