// Handles: what an async collective returns, and the calls that take one (poll,
// wait, wait until queued on a device and order a stream after it, a completion
// callback, release, and the results a completed handle owns: an allgather's,
// alltoall's or reducescatter's buffer, an alltoall's received splits, a join's
// last rank).
//
// A handle is an id into the default instance's HandleTable, not a pointer, so a
// released or forged handle is detected instead of being dereferenced. A handle
// answers whether or not the runtime still runs: one from before hvd_shutdown still
// reports its collective's final status.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "bindings/c/c_api_internal.h"

namespace hvd {
namespace capi {

static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "a handle carries a 64-bit value in a pointer");

namespace {

uint64_t HandleId(hvd_handle_t* handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

}  // namespace

uint64_t HandleTable::Add(Entry entry) {
  uint32_t i;
  if (free_.empty()) {
    i = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    i = free_.back();
    free_.pop_back();
  }
  Slot& slot = slots_[i];
  slot.entry = std::move(entry);
  slot.used = true;
  return (static_cast<uint64_t>(slot.generation) << 32) | (static_cast<uint64_t>(i) + 1);
}

HandleTable::Entry* HandleTable::Find(uint64_t id) {
  const uint64_t low = id & 0xffffffffu;
  if (low == 0 || low > slots_.size()) return nullptr;
  Slot& slot = slots_[low - 1];
  if (!slot.used || slot.generation != static_cast<uint32_t>(id >> 32)) return nullptr;
  return &slot.entry;
}

bool HandleTable::Erase(uint64_t id) {
  if (Find(id) == nullptr) return false;
  const uint32_t i = static_cast<uint32_t>((id & 0xffffffffu) - 1);
  Slot& slot = slots_[i];
  slot.entry.work.reset();
  slot.used = false;
  ++slot.generation;
  free_.push_back(i);
  return true;
}

hvd_handle_t* Register(std::shared_ptr<Work> work, OpType type) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  const uint64_t id = in.handles.Add(HandleTable::Entry{std::move(work), type});
  return reinterpret_cast<hvd_handle_t*>(static_cast<uintptr_t>(id));
}

Status Lookup(hvd_handle_t* handle, std::shared_ptr<Work>* work, OpType* type) {
  if (handle == nullptr) return Status::InvalidArgument("handle is NULL");
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  const HandleTable::Entry* e = in.handles.Find(HandleId(handle));
  if (e == nullptr)
    return Status::InvalidArgument("unknown handle (already released, or never returned by hvd)");
  *work = e->work;
  if (type) *type = e->type;
  return Status::OK();
}

bool Release(hvd_handle_t* handle) {
  Instance& in = Default();
  std::lock_guard<std::mutex> lock(in.handles_mu);
  return in.handles.Erase(HandleId(handle));
}

Status WaitFor(const std::shared_ptr<Work>& work, std::chrono::milliseconds timeout) {
  if (timeout.count() != 0 && !work->Poll()) {
    std::shared_ptr<Runtime> rt;
    if (Current(&rt).ok()) rt->Flush();
  }
  return work->Wait(timeout);
}

}  // namespace capi
}  // namespace hvd

using hvd::Status;
using hvd::capi::Report;

extern "C" {

hvd_status_t hvd_poll(hvd_handle_t* handle, int* done) {
  HVD_C_GUARD({
    if (done == nullptr) return Report(Status::InvalidArgument("done is NULL"));
    std::shared_ptr<hvd::Work> work;
    Status s = hvd::capi::Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    *done = work->Poll() ? 1 : 0;
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_wait(hvd_handle_t* handle, int64_t timeout_ms) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    Status s = hvd::capi::Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    return Report(hvd::capi::WaitFor(work, std::chrono::milliseconds(timeout_ms)));
  })
}

hvd_status_t hvd_wait_enqueued(hvd_handle_t* handle, int64_t timeout_ms) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    Status s = hvd::capi::Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    const std::chrono::milliseconds timeout(timeout_ms);
    if (timeout.count() != 0 && !work->PollEnqueued()) {
      std::shared_ptr<hvd::Runtime> rt;
      if (hvd::capi::Current(&rt).ok()) rt->Flush();
    }
    return Report(work->WaitEnqueued(timeout));
  })
}

hvd_status_t hvd_handle_order_stream(hvd_handle_t* handle, void* stream) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    Status s = hvd::capi::Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    return Report(work->OrderAfter(stream));
  })
}

hvd_status_t hvd_handle_on_done(hvd_handle_t* handle, hvd_done_fn fn, void* arg) {
  HVD_C_GUARD({
    if (fn == nullptr) return Report(Status::InvalidArgument("hvd_handle_on_done: fn is NULL"));
    std::shared_ptr<hvd::Work> work;
    Status s = hvd::capi::Lookup(handle, &work);
    if (!s.ok()) return Report(s);
    // The Work runs the callback inside its completion (runtime/data/work.h): no
    // exception may leave it, so a throwing fn (a C++ caller's bug) ends the
    // process there rather than unwinding through the runtime.
    const bool set = work->OnDone([fn, arg](const Status& status) noexcept {
      fn(arg, static_cast<hvd_status_t>(status.code()),
         status.ok() ? "" : status.message().c_str());
    });
    if (!set)
      return Report(Status::InvalidUsage("hvd_handle_on_done: tensor '" + work->name() +
                                         "' already has a completion callback"));
    // A caller that waits for the callback waits as one blocked in hvd_wait: the
    // runtime starts its next cycle now rather than after the enqueues' quiet time.
    if (!work->Poll()) {
      std::shared_ptr<hvd::Runtime> rt;
      if (hvd::capi::Current(&rt).ok()) rt->Flush();
    }
    return HVD_SUCCESS;
  })
}

void hvd_handle_release(hvd_handle_t* handle) {
  if (handle == nullptr) return;
  try {
    if (!hvd::capi::Release(handle))
      Report(Status::InvalidArgument("hvd_handle_release: unknown handle (released twice?)"));
  } catch (...) {
  }
}

hvd_status_t hvd_handle_result(hvd_handle_t* handle, const void** data, int64_t* nbytes,
                               int* ndim, const int64_t** shape) {
  HVD_C_GUARD({
    std::shared_ptr<hvd::Work> work;
    hvd::OpType type;
    Status s = hvd::capi::Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kAllgather && type != hvd::OpType::kAlltoall &&
        type != hvd::OpType::kReducescatter)
      return Report(Status::InvalidUsage(std::string("a ") + hvd::OpTypeName(type) +
                                         " handle has no result buffer"));
    s = work->ResultReady();
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
    Status s = hvd::capi::Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kAlltoall)
      return Report(Status::InvalidUsage("only an alltoall handle has received splits"));
    s = work->ResultReady();
    if (!s.ok()) return Report(s);
    if (splits) *splits = work->received_splits().data();
    if (n) *n = static_cast<int>(work->received_splits().size());
    return HVD_SUCCESS;
  })
}

hvd_status_t hvd_handle_join_rank(hvd_handle_t* handle, int* last_rank) {
  HVD_C_GUARD({
    if (last_rank == nullptr) return Report(Status::InvalidArgument("last_rank is NULL"));
    std::shared_ptr<hvd::Work> work;
    hvd::OpType type;
    Status s = hvd::capi::Lookup(handle, &work, &type);
    if (!s.ok()) return Report(s);
    if (type != hvd::OpType::kJoin) return Report(Status::InvalidUsage("not a join handle"));
    s = work->Wait(std::chrono::milliseconds(0));
    if (!s.ok()) return Report(s);
    *last_rank = static_cast<int>(work->scalar_result());
    return HVD_SUCCESS;
  })
}

}  // extern "C"
