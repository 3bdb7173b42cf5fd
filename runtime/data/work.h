// Work: the completion state of one enqueued collective, shared between the caller
// (through a C API handle) and the background thread.
//
// The background thread calls Complete exactly once; callers Poll or Wait, or ask
// (OnDone) to be called back when it completes. Results
// whose size is known only after negotiation (allgather, alltoall) are owned by
// the Work and read through result() after it completed successfully.
//
// Stream-ordered completion (device tensors): before it completes, a Work may be
// marked *enqueued* with a DeviceFence, once its collective has been queued on
// the device. From then on a caller need not wait on the host: WaitEnqueued
// returns, and OrderAfter(stream) makes a device stream wait for the collective
// on the device (the consumer's kernels run after it; the host does not block).
// The Work still completes later, when the device is done.
// Thread-safe.
#ifndef HVD_RUNTIME_DATA_WORK_H_
#define HVD_RUNTIME_DATA_WORK_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/cpu_binding.h"
#include "runtime/common/cpu_relax.h"
#include "runtime/common/pool_allocator.h"
#include "runtime/common/status.h"

namespace hvd {

// Result bytes: left uninitialised by resize() (every result is written in full by
// its collective right after it is sized, so zeroing it first would be a wasted pass
// over memory the collective writes anyway), and aligned to kResultAlignment bytes,
// so a framework can use them as its own tensor's memory without a copy (TensorFlow
// and Eigen assume 64-byte aligned tensors; malloc gives 16).
constexpr size_t kResultAlignment = 64;
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kResultAlignment)));
  }
  // Unsized: clang before 19 declares the sized aligned delete only under
  // -fsized-deallocation, and the sanitizer builds use clang.
  void deallocate(T* p, size_t) noexcept { ::operator delete(p, std::align_val_t(kResultAlignment)); }
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
using ResultBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

// The device side of a queued collective, as its Works hand it to consumers. No
// CUDA type appears here: a stream is the caller's cudaStream_t as a void*.
// Implementations (runtime/cuda) must be callable from any thread and must keep
// what OrderStream waits on (an event) valid while the fence lives.
class DeviceFence {
 public:
  virtual ~DeviceFence() = default;
  // Makes `stream` wait, on the device, for the collective to finish (null: the
  // legacy default stream). Does not block the host.
  virtual Status OrderStream(void* stream) = 0;
};

class Work {
 public:
  // How long Wait spins before it sleeps.
  static constexpr std::chrono::microseconds kSpin{20};

  explicit Work(std::string name) : name_(std::move(name)) {}

  // A new Work, from a per-thread pool of freed ones' memory (PoolAllocator: a
  // step makes and frees one per tensor).
  static std::shared_ptr<Work> Make(std::string name) {
    return std::allocate_shared<Work>(PoolAllocator<Work>(), std::move(name));
  }

  const std::string& name() const { return name_; }

  bool Poll() const { return done_.load(std::memory_order_acquire); }

  // Whether the collective has been queued on its device (MarkEnqueued) or is done.
  bool PollEnqueued() const {
    return enqueued_.load(std::memory_order_acquire) || done_.load(std::memory_order_acquire);
  }

  // Waits up to `timeout` (negative: until done). Returns kInProgress if still
  // running, else the final status.
  //
  // A caller waiting on many tensors in turn (a DDP step's handles) usually finds
  // the next one completing within microseconds of the last: it spins briefly
  // before sleeping, so the background thread's completion loop does not pay a
  // futex wake and a context switch per tensor. Not on a thread bound to one CPU
  // (dprun --bind-to core with a core per rank): the background thread shares it,
  // and every microsecond spun is one it cannot run.
  Status Wait(std::chrono::milliseconds timeout) const {
    if (done_.load(std::memory_order_acquire)) return status_;
    if (!SleepUntil([this] { return done_.load(std::memory_order_seq_cst); }, timeout))
      return InProgress(timeout);
    return status_;
  }

  // As Wait, but returns OK as soon as the collective is queued on its device
  // (MarkEnqueued); a host collective only counts once done. A failure that
  // completes the Work first is returned as Wait would.
  Status WaitEnqueued(std::chrono::milliseconds timeout) const {
    auto ready = [this] {
      return enqueued_.load(std::memory_order_seq_cst) || done_.load(std::memory_order_seq_cst);
    };
    if (!ready() && !SleepUntil(ready, timeout)) return InProgress(timeout);
    if (done_.load(std::memory_order_acquire)) return status_;
    return Status::OK();
  }

  // Called by the device backend once the collective is queued on the device,
  // before it completes; later calls, and calls after completion, are ignored.
  // Wakes callers in WaitEnqueued.
  void MarkEnqueued(std::shared_ptr<DeviceFence> fence) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fence_ != nullptr || done_.load(std::memory_order_acquire)) return;
      fence_ = std::move(fence);
    }
    enqueued_.store(true, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) WakeWaiters();
  }

  // Makes device stream `stream` wait for the collective (see DeviceFence). Once
  // the Work is done: nothing to wait for, returns its status. Before it was
  // enqueued on a device: kInvalidUsage (call WaitEnqueued first).
  Status OrderAfter(void* stream) const {
    if (done_.load(std::memory_order_acquire)) return status_;
    std::shared_ptr<DeviceFence> fence;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fence = fence_;
    }
    if (fence == nullptr)
      return Status::InvalidUsage("tensor '" + name_ +
                                  "' is not queued on a device yet: wait for it first");
    return fence->OrderStream(stream);
  }

  // Runs `callback(status)` once, with the final status, as soon as the Work
  // completes: on the thread that completes it (the background thread, or the one
  // that fails pending work at shutdown), inside Complete; or, if it already
  // completed, at once on the calling thread before OnDone returns. One callback
  // per Work: false (and `callback` dropped, never called) if one was set before.
  // The callback must not block on work that the completing thread would have to
  // do (Wait on a Work not yet done); it may complete or wait on Works already done.
  bool OnDone(std::function<void(const Status&)> callback) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (has_callback_) return false;
      has_callback_ = true;
      callback_ = std::move(callback);
    }
    // Paired with CompleteQuietly: whichever of the two stores goes second in the
    // seq_cst order sees the other's, so at least one side runs the callback, and
    // RunCallback lets only the first.
    callback_set_.store(true, std::memory_order_seq_cst);
    if (done_.load(std::memory_order_seq_cst)) RunCallback();
    return true;
  }

  // Sets the final status; later calls are ignored (the first completion wins).
  // Takes no lock unless a caller sleeps in Wait (a step's 1000 completions
  // mostly find none).
  void Complete(Status status) {
    if (CompleteQuietly(std::move(status))) WakeWaiters();
  }

  // Complete's first half, for a batch (CompletionBatch): the Work is done (Poll
  // and a spinning Wait see it at once) and its OnDone callback has run, but a
  // caller asleep in Wait is not woken. True if one may be asleep: WakeWaiters must
  // then follow.
  bool CompleteQuietly(Status status) {
    if (claimed_.exchange(true, std::memory_order_acq_rel)) return false;
    status_ = std::move(status);
    done_.store(true, std::memory_order_seq_cst);
    if (callback_set_.load(std::memory_order_seq_cst)) RunCallback();
    return waiters_.load(std::memory_order_seq_cst) > 0;
  }

  // Complete's second half.
  void WakeWaiters() const {
    // A waiter that saw done_ false is inside cv_.wait once we hold mu_.
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_.notify_all();
  }

  // Whether the runtime-owned result may be read: OK once the Work completed
  // successfully, or, for a result in device memory (device_result), once it is
  // queued on the device (its address, size, shape and splits are final then; a
  // reader must order its stream after the collective, OrderAfter, as for any
  // device output). kInProgress before that; the failure if it failed.
  Status ResultReady() const {
    if (done_.load(std::memory_order_acquire)) return status_;
    if (enqueued_.load(std::memory_order_acquire) && device_result_.device >= 0)
      return Status::OK();
    return InProgress(std::chrono::milliseconds(0));
  }

  // Runtime-owned results. Written by the background thread before Complete (a
  // device result and its shape and splits: before MarkEnqueued); read by the
  // caller only once ResultReady.
  ResultBytes& result() { return result_; }
  std::vector<int64_t>& result_shape() { return result_shape_; }
  std::vector<int64_t>& received_splits() { return received_splits_; }
  // For join: the last rank to join.
  int64_t& scalar_result() { return scalar_result_; }

  // A result in device memory (allgather, alltoall, reducescatter of a tensor on a
  // GPU), in place of result(). The memory is released when the Work is destroyed,
  // in the order of the stream the tensor was enqueued with.
  struct DeviceResult {
    std::shared_ptr<void> data;
    int64_t bytes = 0;
    int device = -1;
  };
  DeviceResult& device_result() { return device_result_; }

 private:
  Status InProgress(std::chrono::milliseconds timeout) const {
    return Status::InProgress("tensor '" + name_ + "' is still in progress after " +
                              std::to_string(timeout.count()) + " ms");
  }

  // Runs the OnDone callback if no one has yet (done_ and callback_set_ are both
  // set: it is final and status_ readable). The callback is moved out first, so
  // what it captured is released once it has run.
  void RunCallback() {
    if (callback_claimed_.exchange(true, std::memory_order_acq_rel)) return;
    std::function<void(const Status&)> callback;
    {
      std::lock_guard<std::mutex> lock(mu_);
      callback.swap(callback_);
    }
    callback(status_);
  }

  // Spins briefly, then sleeps until `ready()` or `timeout` (negative: no limit);
  // false on timeout.
  template <typename Ready>
  bool SleepUntil(Ready ready, std::chrono::milliseconds timeout) const {
    if (ready()) return true;
    if (timeout.count() != 0 && CallingThreadCpuCount() != 1) {
      const auto spin_until = std::chrono::steady_clock::now() + kSpin;
      do {
        for (int i = 0; i < 64; ++i) {
          if (ready()) return true;
          CpuRelax();
        }
      } while (std::chrono::steady_clock::now() < spin_until);
    }
    // wait_for converts to nanoseconds; anything past ~100 years waits "forever".
    if (timeout > std::chrono::hours(24 * 365 * 100)) timeout = std::chrono::milliseconds(-1);
    std::unique_lock<std::mutex> lock(mu_);
    // Paired with Complete and MarkEnqueued: whichever of the two goes second in
    // the seq_cst order sees the other (the waiter sees the flag, or the
    // completing side sees a waiter).
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    bool finished = true;
    if (timeout.count() < 0) {
      cv_.wait(lock, ready);
    } else {
      finished = cv_.wait_for(lock, timeout, ready);
    }
    waiters_.fetch_sub(1, std::memory_order_relaxed);
    return finished;
  }

  const std::string name_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable std::atomic<int> waiters_{0};  // callers inside Wait's sleeping part
  std::atomic<bool> claimed_{false};      // the first Complete
  // Set once, after status_; status_ is read without a lock once it is true.
  std::atomic<bool> done_{false};
  std::atomic<bool> enqueued_{false};      // fence_ is set
  std::shared_ptr<DeviceFence> fence_;     // guarded by mu_
  std::function<void(const Status&)> callback_;  // OnDone's; guarded by mu_
  bool has_callback_ = false;                    // OnDone was called; guarded by mu_
  std::atomic<bool> callback_set_{false};       // callback_ is set (once)
  std::atomic<bool> callback_claimed_{false};   // RunCallback ran it
  Status status_;
  ResultBytes result_;
  std::vector<int64_t> result_shape_;
  std::vector<int64_t> received_splits_;
  int64_t scalar_result_ = -1;
  DeviceResult device_result_;
};

// Completes many Works as one: each is done as soon as Complete says so, and the
// callers asleep in Wait are woken together at the end (Wake, or the destructor).
// A caller waiting on a step's handles in turn, woken by the first, then finds
// the rest done, instead of being woken once per tensor; where it shares a CPU with
// the background thread (dprun --bind-to core), each of those wake-ups preempts the
// completing thread and costs two context switches (1000 x 4 KiB at 2 ranks: ~1 ms
// a step). Not thread-safe; the Works must outlive it.
class CompletionBatch {
 public:
  CompletionBatch() = default;
  CompletionBatch(const CompletionBatch&) = delete;
  CompletionBatch& operator=(const CompletionBatch&) = delete;
  ~CompletionBatch() { Wake(); }

  void Complete(Work* work, Status status) {
    if (work->CompleteQuietly(std::move(status))) sleeping_.push_back(work);
  }
  void Wake() {
    for (const Work* w : sleeping_) w->WakeWaiters();
    sleeping_.clear();
  }

 private:
  std::vector<const Work*> sleeping_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_WORK_H_
