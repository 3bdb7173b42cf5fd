// Finalizer: completes Works once the GPU has finished their collective, on a
// thread of its own, so that the background thread never waits for the GPU.
//
// Nothing polls the GPU. Push makes the finalizer's own *signal stream* wait for
// the response's completion event and queues a host function there (the
// *signal*); CUDA runs it once the collective is done, and it only counts the
// signal and wakes the finalizer thread, which completes the Works. The device
// stream itself carries no host function, so the collectives behind it are not
// held up, and the training thread's kernel launches do not contend with a
// thread querying events every few microseconds (such polling slows every
// cudaLaunchKernel of the caller). Signals fire in the order they were pushed (one stream).
//
// While work is pending the finalizer wakes every ~10 ms to poll the communicator
// for asynchronous errors (ncclCommGetAsyncError) and to check the timeout: if the
// oldest item has not finished within it, counted from when it became the oldest,
// the communicator is aborted (its kernels exit, so later signals still fire) and
// every pending item fails with kTimeout; an asynchronous NCCL error fails them
// with that error. Failures are sticky: later items fail at once.
// Thread-safe.
#ifndef HVD_RUNTIME_CUDA_FINALIZER_H_
#define HVD_RUNTIME_CUDA_FINALIZER_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/common/status.h"

namespace hvd {
namespace cuda {

class Finalizer {
 public:
  using Complete = std::function<void(const Status&)>;

  // `check` returns the communicator's asynchronous failure (OK if none); `abort`
  // aborts the communicator with the given reason. Both are called from the
  // finalizer thread. Creates the signal stream on `device`.
  static Status Create(int device, std::chrono::milliseconds timeout,
                       std::function<Status()> check, std::function<void(const Status&)> abort,
                       std::unique_ptr<Finalizer>* out);
  // Waits for pending items (bounded by the timeout, after which they fail).
  // Signals still queued then (behind work that was aborted) fire harmlessly later.
  ~Finalizer();

  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;

  // Calls complete(status) exactly once: from the finalizer thread when the work
  // recorded by `done` has finished or failed, or at once with the sticky failure
  // (or the CUDA error that kept it from queueing the signal). `done` is read by
  // Push only: the caller may record it again afterwards. `what` names the
  // collective in errors.
  void Push(cudaEvent_t done, std::string what, Complete complete);

  // OK until the first failure.
  Status status();

 private:
  Finalizer(int device, std::chrono::milliseconds timeout, std::function<Status()> check,
            std::function<void(const Status&)> abort);
  struct Item {
    uint64_t seq;  // done once shared_->fired >= seq
    std::string what;
    Complete complete;
  };
  // What a signal touches; shared with the signals still queued, so a signal
  // firing after the Finalizer is gone is harmless. Guards every field below too.
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    uint64_t fired = 0;  // signals run
  };
  // `arg`: a heap std::shared_ptr<Shared>, deleted here.
  static void CUDART_CB Signal(void* arg);
  void Loop();
  // Fails every pending item with `why`. mu_ not held.
  void FailAll(const Status& why);

  const int device_;
  const std::chrono::milliseconds timeout_;
  const std::function<Status()> check_;
  const std::function<void(const Status&)> abort_;
  cudaStream_t signals_ = nullptr;

  const std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  std::mutex& mu_ = shared_->mu;
  std::condition_variable& cv_ = shared_->cv;
  std::deque<Item> items_;
  uint64_t pushed_ = 0;  // signals queued
  std::chrono::steady_clock::time_point head_since_;  // when items_.front() became the oldest
  bool stop_ = false;
  Status broken_;
  std::thread thread_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_FINALIZER_H_
