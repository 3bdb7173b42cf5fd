// What the files of the C API (bindings/c/*.cc) share; nothing here is public.
//
// The default instance is the only process-wide state: the running Runtime, the
// Bootstrap that starts it (and keeps rank 0's store server between runtimes) and the
// handle table. It is created on first use and never destroyed, so static destructors
// that call in during process exit still find it.
//
// Every extern "C" body runs inside HVD_C_GUARD, so no exception crosses the
// boundary, and returns its status through Report, which keeps a failure's message as
// the calling thread's hvd_last_error().
//
// Every collective goes through one path (enqueue.cc): its entry point checks only
// what must be checked before a pointer is read (a NULL name, array or out-parameter;
// an ndim, n or nsplits that sizes a read), fills the TensorEntry of each tensor
// straight from its C arguments (the one struct that carries them to the queue) in a
// CollectiveArgs, and Submit enqueues them; the runtime's ValidateEntry
// (runtime/data/validate.h) checks everything else, with the messages
// docs/c_api_errors.md quotes. A single all-reduce (allreduce.cc's AllreduceOne, a
// step's call per gradient) fills its one entry and enqueues it without a
// CollectiveArgs.
#ifndef HVD_BINDINGS_C_C_API_INTERNAL_H_
#define HVD_BINDINGS_C_C_API_INTERNAL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "bindings/c/hvd.h"
#include "controller/loop/bootstrap.h"
#include "controller/loop/runtime.h"

namespace hvd {
namespace capi {

// errors.cc: keeps `s`'s message as this thread's last error when it failed, and
// returns its code.
hvd_status_t Report(const Status& s);

// handles.cc. Live handles in reusable slots, so registering one allocates nothing in
// the steady state. A handle's value is (generation << 32 | slot + 1): a released
// handle's slot moves on a generation, so using it again is detected, as is a value
// that was never handed out. Not thread-safe: Instance::handles_mu guards it.
class HandleTable {
 public:
  struct Entry {
    std::shared_ptr<Work> work;
    OpType type = OpType::kAllreduce;
  };
  uint64_t Add(Entry entry);
  // The live entry with this value, or null.
  Entry* Find(uint64_t id);
  // Releases the handle; false if it was not live.
  bool Erase(uint64_t id);

 private:
  struct Slot {
    Entry entry;
    uint32_t generation = 1;
    bool used = false;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

enum class State { kNeverInitialized, kRunning, kShutDown };

struct Instance {
  std::mutex mu;  // guards state, runtime and bootstrap
  State state = State::kNeverInitialized;
  std::shared_ptr<Runtime> runtime;
  Bootstrap bootstrap;  // reads the process environment

  std::mutex handles_mu;
  HandleTable handles;  // guarded by handles_mu

  std::atomic<int64_t> next_group{1};  // a grouped call's group id
};

// lifecycle.cc: the default instance.
Instance& Default();
// The running runtime, or kNotInitialized / kShutDown saying why there is none.
Status Current(std::shared_ptr<Runtime>* out);

// handles.cc: the handle for `work` (never fails).
hvd_handle_t* Register(std::shared_ptr<Work> work, OpType type);
// The live handle's Work (and type); kInvalidArgument for NULL or an unknown handle.
Status Lookup(hvd_handle_t* handle, std::shared_ptr<Work>* work, OpType* type = nullptr);
// Releases a live handle; false if it was not live.
bool Release(hvd_handle_t* handle);
// Waits for `work` up to `timeout` (negative: until done), first telling the runtime
// to start the cycle for newly enqueued work (the caller is done enqueuing, for now).
Status WaitFor(const std::shared_ptr<Work>& work, std::chrono::milliseconds timeout);

// enqueue.cc: the one path from an entry point to the runtime.

// One call as its entry point read it: the entry of each tensor (none for a barrier
// or join), filled straight from the C arguments, and what the call shares.
struct CollectiveArgs {
  OpType type = OpType::kAllreduce;
  std::vector<TensorEntry> tensors;
  // The tensors form one group (one fused response), with a fresh group id.
  bool grouped = false;
  int32_t process_set = HVD_GLOBAL_PROCESS_SET;
};

// Enqueues `call`'s entries atomically on the default runtime, as one group if
// `grouped` (a barrier or join: asks the runtime for its own). works[i] tracks
// tensors[i] (a barrier or join: works[0]). Fails with the runtime's status
// (ValidateEntry's message naming the tensor), enqueuing nothing and leaving
// *works empty.
Status Submit(CollectiveArgs&& call, std::vector<std::shared_ptr<Work>>* works);
// Submit, then a handle per Work in handles[0..n) (left as they are on failure:
// entry points NULL them first).
Status SubmitAsync(CollectiveArgs&& call, hvd_handle_t** handles);
// Submit, then waits for every Work: the first failure, else OK. *scalar (if given)
// receives the first Work's scalar_result() (a join's last rank).
Status SubmitAndWait(CollectiveArgs&& call, int64_t* scalar = nullptr);

// collectives.cc: readers of the C arguments that allreduce.cc shares.

// The most dimensions a shape may have.
constexpr int kMaxDims = 64;
// The tensors of a grouped call from its arrays (name, input, dtype; the type from
// call->type): n at least 1, the arrays and (unless `blocking`) handles non-NULL,
// every name non-NULL. NULLs handles[0..n) first. Sets call->grouped.
Status ReadGroup(int n, const char* const* names, const void* const* sendbufs,
                 const hvd_dtype_t* dtypes, hvd_handle_t** handles, bool blocking,
                 CollectiveArgs* call);
// A reduction's op and scale factors on its entry.
void SetReduction(hvd_reduce_op_t op, double prescale_factor, double postscale_factor,
                  TensorEntry* e);

}  // namespace capi
}  // namespace hvd

// The body of every extern "C" function: no exception leaves it.
#define HVD_C_GUARD(body)                                                           \
  try {                                                                             \
    body                                                                            \
  } catch (const std::exception& e) {                                               \
    return ::hvd::capi::Report(                                                     \
        ::hvd::Status::Internal(std::string("unexpected exception: ") + e.what())); \
  } catch (...) {                                                                   \
    return ::hvd::capi::Report(::hvd::Status::Internal("unexpected exception"));    \
  }

#endif  // HVD_BINDINGS_C_C_API_INTERNAL_H_
