// The collectives other than all-reduce: allgather, broadcast, alltoall,
// reducescatter (each plain, async, blocking-with-result and device forms), their
// grouped forms, barrier and join. Each fills its tensors' entries from its
// arguments in a CollectiveArgs and submits it (enqueue.cc).
//
// The forms of one collective: _async returns a handle; _ex adds the device and the
// stream; the blocking form of a collective whose result the handle owns (allgather,
// alltoall, reducescatter) waits and still returns the handle, or NULL on failure;
// the blocking broadcast, barrier and join return only the status.
#include <string>
#include <utility>

#include "bindings/c/c_api_internal.h"
#include "runtime/data/validate.h"

namespace hvd {
namespace capi {

Status ReadGroup(int n, const char* const* names, const void* const* sendbufs,
                 const hvd_dtype_t* dtypes, hvd_handle_t** handles, bool blocking,
                 CollectiveArgs* call) {
  if (n < 1)
    return Status::InvalidArgument("a group needs at least one tensor, got " + std::to_string(n));
  if (!names || !sendbufs || !dtypes || (!blocking && !handles))
    return Status::InvalidArgument(
        "grouped call: names, sendbufs, dtypes and handles must not be NULL");
  if (!blocking)
    for (int i = 0; i < n; ++i) handles[i] = nullptr;
  call->tensors.resize(n);
  for (int i = 0; i < n; ++i) {
    if (names[i] == nullptr) return Status::InvalidArgument("tensor name is NULL");
    TensorEntry& e = call->tensors[i];
    e.name = names[i];
    e.type = call->type;
    e.input = sendbufs[i];
    e.dtype = static_cast<DataType>(dtypes[i]);
  }
  call->grouped = true;
  return Status::OK();
}

void SetReduction(hvd_reduce_op_t op, double prescale_factor, double postscale_factor,
                  TensorEntry* e) {
  e->reduce_op = static_cast<ReduceOp>(op);
  e->prescale_factor = prescale_factor;
  e->postscale_factor = postscale_factor;
}

namespace {

// e->shape from `ndim` (1..kMaxDims) dimensions at `shape` (non-NULL).
Status ReadShape(const int64_t* shape, int ndim, TensorEntry* e) {
  if (ndim < 1 || ndim > kMaxDims)
    return Status::InvalidArgument("tensor '" + e->name + "': ndim " + std::to_string(ndim) +
                                   " is not in 1.." + std::to_string(kMaxDims));
  if (shape == nullptr) return Status::InvalidArgument("tensor '" + e->name + "': shape is NULL");
  e->shape.assign(shape, shape + ndim);
  return Status::OK();
}

// One tensor of a shaped collective (allgather, alltoall, reducescatter) as a call.
Status ReadShaped(OpType type, const char* name, const void* sendbuf, const int64_t* shape,
                  int ndim, hvd_dtype_t dtype, int32_t process_set, int32_t device, void* stream,
                  CollectiveArgs* call) {
  if (name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  call->type = type;
  call->process_set = process_set;
  TensorEntry& e = call->tensors.emplace_back();
  e.name = name;
  e.type = type;
  e.input = sendbuf;
  e.dtype = static_cast<DataType>(dtype);
  e.device = device;
  e.stream = stream;
  return ReadShape(shape, ndim, &e);
}

// A grouped allgather or reducescatter.
Status ReadGroupedShaped(OpType type, int n, const char* const* names,
                         const void* const* sendbufs, const int64_t* const* shapes,
                         const int* ndims, const hvd_dtype_t* dtypes, hvd_handle_t** handles,
                         CollectiveArgs* call) {
  call->type = type;
  HVD_RETURN_IF_ERROR(ReadGroup(n, names, sendbufs, dtypes, handles, false, call));
  if (!shapes || !ndims)
    return Status::InvalidArgument("grouped call: shapes and ndims must not be NULL");
  for (int i = 0; i < n; ++i)
    HVD_RETURN_IF_ERROR(ReadShape(shapes[i], ndims[i], &call->tensors[i]));
  // A group of one is a plain call.
  call->grouped = n > 1;
  return Status::OK();
}

// An async call of one tensor: checks the handle, NULLs it, reads, submits.
template <typename Read>
hvd_status_t Async(hvd_handle_t** handle, Read read) {
  if (handle == nullptr) return Report(Status::InvalidArgument("handle is NULL"));
  *handle = nullptr;
  CollectiveArgs call;
  Status s = read(&call);
  if (s.ok()) s = SubmitAsync(std::move(call), handle);
  return Report(s);
}

// The blocking form of a call whose handle owns the result: waits for the handle
// `enqueued` returned; on failure releases it and NULLs *handle.
hvd_status_t FinishBlocking(hvd_status_t enqueued, hvd_handle_t** handle) {
  if (enqueued != HVD_SUCCESS) return enqueued;
  std::shared_ptr<Work> work;
  Status s = Lookup(*handle, &work);
  if (s.ok()) s = WaitFor(work, std::chrono::milliseconds(-1));
  if (!s.ok()) {
    Release(*handle);
    *handle = nullptr;
  }
  return Report(s);
}

// A broadcast of `count` elements of `buf` from root_rank, as a call.
Status ReadBroadcast(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                     int root_rank, int32_t process_set, int32_t device, void* stream,
                     CollectiveArgs* call) {
  if (name == nullptr) return Status::InvalidArgument("tensor name is NULL");
  call->type = OpType::kBroadcast;
  call->process_set = process_set;
  TensorEntry& e = call->tensors.emplace_back();
  e.name = name;
  e.type = OpType::kBroadcast;
  e.dtype = static_cast<DataType>(dtype);
  e.input = buf;
  e.output = buf;
  e.root_rank = root_rank;
  e.device = device;
  e.stream = stream;
  return SetCountShape(count, nullptr, 0, &e);
}

CollectiveArgs Tensorless(OpType type, int32_t process_set) {
  CollectiveArgs call;
  call.type = type;
  call.process_set = process_set;
  return call;
}

}  // namespace
}  // namespace capi
}  // namespace hvd

using hvd::OpType;
using hvd::Status;
using hvd::capi::Async;
using hvd::capi::CollectiveArgs;
using hvd::capi::FinishBlocking;
using hvd::capi::Report;

extern "C" {

hvd_status_t hvd_allgather_ex(const char* name, const void* sendbuf, const int64_t* shape,
                              int ndim, hvd_dtype_t dtype, int32_t process_set, int32_t device,
                              void* stream, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      return hvd::capi::ReadShaped(OpType::kAllgather, name, sendbuf, shape, ndim, dtype,
                                   process_set, device, stream, call);
    });
  })
}

hvd_status_t hvd_allgather_async(const char* name, const void* sendbuf, const int64_t* shape,
                                 int ndim, hvd_dtype_t dtype, int32_t process_set,
                                 hvd_handle_t** handle) {
  return hvd_allgather_ex(name, sendbuf, shape, ndim, dtype, process_set, -1, nullptr, handle);
}

hvd_status_t hvd_allgather(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                           hvd_dtype_t dtype, int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return FinishBlocking(
        hvd_allgather_async(name, sendbuf, shape, ndim, dtype, process_set, handle), handle);
  })
}

hvd_status_t hvd_broadcast_ex(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                              int root_rank, int32_t process_set, int32_t device, void* stream,
                              hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      return hvd::capi::ReadBroadcast(name, buf, count, dtype, root_rank, process_set, device,
                                      stream, call);
    });
  })
}

hvd_status_t hvd_broadcast_async(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                                 int root_rank, int32_t process_set, hvd_handle_t** handle) {
  return hvd_broadcast_ex(name, buf, count, dtype, root_rank, process_set, -1, nullptr, handle);
}

hvd_status_t hvd_broadcast(const char* name, void* buf, int64_t count, hvd_dtype_t dtype,
                           int root_rank, int32_t process_set) {
  HVD_C_GUARD({
    CollectiveArgs call;
    Status s = hvd::capi::ReadBroadcast(name, buf, count, dtype, root_rank, process_set, -1,
                                        nullptr, &call);
    if (s.ok()) s = hvd::capi::SubmitAndWait(std::move(call));
    return Report(s);
  })
}

hvd_status_t hvd_alltoall_ex(const char* name, const void* sendbuf, const int64_t* shape, int ndim,
                             hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                             int32_t process_set, int32_t device, void* stream,
                             hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      HVD_RETURN_IF_ERROR(hvd::capi::ReadShaped(OpType::kAlltoall, name, sendbuf, shape, ndim,
                                                dtype, process_set, device, stream, call));
      if (splits == nullptr && nsplits != 0)
        return Status::InvalidArgument(std::string("tensor '") + name +
                                       "': splits is NULL but nsplits is " +
                                       std::to_string(nsplits));
      if (nsplits < 0)
        return Status::InvalidArgument(std::string("tensor '") + name + "': negative nsplits");
      if (splits != nullptr) call->tensors[0].splits.assign(splits, splits + nsplits);
      return Status::OK();
    });
  })
}

hvd_status_t hvd_alltoall_async(const char* name, const void* sendbuf, const int64_t* shape,
                                int ndim, hvd_dtype_t dtype, const int64_t* splits, int nsplits,
                                int32_t process_set, hvd_handle_t** handle) {
  return hvd_alltoall_ex(name, sendbuf, shape, ndim, dtype, splits, nsplits, process_set, -1,
                         nullptr, handle);
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

hvd_status_t hvd_reducescatter_ex(const char* name, const void* sendbuf, const int64_t* shape,
                                  int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                  double prescale_factor, double postscale_factor,
                                  int32_t process_set, int32_t device, void* stream,
                                  hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      HVD_RETURN_IF_ERROR(hvd::capi::ReadShaped(OpType::kReducescatter, name, sendbuf, shape,
                                                ndim, dtype, process_set, device, stream, call));
      hvd::capi::SetReduction(op, prescale_factor, postscale_factor, &call->tensors[0]);
      return Status::OK();
    });
  })
}

hvd_status_t hvd_reducescatter_async(const char* name, const void* sendbuf, const int64_t* shape,
                                     int ndim, hvd_dtype_t dtype, hvd_reduce_op_t op,
                                     double prescale_factor, double postscale_factor,
                                     int32_t process_set, hvd_handle_t** handle) {
  return hvd_reducescatter_ex(name, sendbuf, shape, ndim, dtype, op, prescale_factor,
                              postscale_factor, process_set, -1, nullptr, handle);
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

hvd_status_t hvd_grouped_allgather_async(int n, const char* const* names,
                                         const void* const* sendbufs,
                                         const int64_t* const* shapes, const int* ndims,
                                         const hvd_dtype_t* dtypes, int32_t process_set,
                                         hvd_handle_t** handles) {
  HVD_C_GUARD({
    CollectiveArgs call;
    call.process_set = process_set;
    Status s = hvd::capi::ReadGroupedShaped(OpType::kAllgather, n, names, sendbufs, shapes, ndims,
                                            dtypes, handles, &call);
    if (s.ok()) s = hvd::capi::SubmitAsync(std::move(call), handles);
    return Report(s);
  })
}

hvd_status_t hvd_grouped_reducescatter_async(int n, const char* const* names,
                                             const void* const* sendbufs,
                                             const int64_t* const* shapes, const int* ndims,
                                             const hvd_dtype_t* dtypes, hvd_reduce_op_t op,
                                             double prescale_factor, double postscale_factor,
                                             int32_t process_set, hvd_handle_t** handles) {
  HVD_C_GUARD({
    CollectiveArgs call;
    call.process_set = process_set;
    Status s = hvd::capi::ReadGroupedShaped(OpType::kReducescatter, n, names, sendbufs, shapes,
                                            ndims, dtypes, handles, &call);
    if (s.ok()) {
      for (hvd::TensorEntry& e : call.tensors)
        hvd::capi::SetReduction(op, prescale_factor, postscale_factor, &e);
      s = hvd::capi::SubmitAsync(std::move(call), handles);
    }
    return Report(s);
  })
}

hvd_status_t hvd_barrier(int32_t process_set) {
  HVD_C_GUARD({
    return Report(hvd::capi::SubmitAndWait(hvd::capi::Tensorless(OpType::kBarrier, process_set)));
  })
}

hvd_status_t hvd_barrier_async(int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      *call = hvd::capi::Tensorless(OpType::kBarrier, process_set);
      return Status::OK();
    });
  })
}

hvd_status_t hvd_join(int32_t process_set, int* last_rank) {
  HVD_C_GUARD({
    int64_t last = 0;
    Status s = hvd::capi::SubmitAndWait(hvd::capi::Tensorless(OpType::kJoin, process_set), &last);
    if (s.ok() && last_rank != nullptr) *last_rank = static_cast<int>(last);
    return Report(s);
  })
}

hvd_status_t hvd_join_async(int32_t process_set, hvd_handle_t** handle) {
  HVD_C_GUARD({
    return Async(handle, [&](CollectiveArgs* call) {
      *call = hvd::capi::Tensorless(OpType::kJoin, process_set);
      return Status::OK();
    });
  })
}

}  // extern "C"
