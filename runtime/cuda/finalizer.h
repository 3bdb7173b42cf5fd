// Finalizer: completes Works once the GPU has finished their collective, on a
// thread of its own, so that the background thread never waits for the GPU.
//
// Each pushed item is an event recorded on the device stream after one response's
// GPU work, plus the callback that completes its Works. Items finish in order (one
// stream), so only the oldest is polled (cudaEventQuery, every ~20 us). While work
// is pending the finalizer also polls the communicator for asynchronous errors
// (ncclCommGetAsyncError, every ~10 ms). If the oldest item has not finished within
// the timeout, counted from when it became the oldest, the communicator is aborted
// and every pending item fails with kTimeout; an asynchronous NCCL or CUDA error
// fails them with that error. Failures are sticky: later items fail at once.
// Thread-safe.
#ifndef HVD_RUNTIME_CUDA_FINALIZER_H_
#define HVD_RUNTIME_CUDA_FINALIZER_H_

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
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
  // finalizer thread.
  Finalizer(int device, std::chrono::milliseconds timeout, std::function<Status()> check,
            std::function<void(const Status&)> abort);
  // Waits for pending items (bounded by the timeout, after which they fail).
  ~Finalizer();

  Finalizer(const Finalizer&) = delete;
  Finalizer& operator=(const Finalizer&) = delete;

  // Takes ownership of `done`. Calls complete(status) exactly once: from the
  // finalizer thread when the event has fired or the work failed, or at once with
  // the sticky failure. `what` names the collective in errors.
  void Push(cudaEvent_t done, std::string what, Complete complete);

  // OK until the first failure.
  Status status();

 private:
  struct Item {
    cudaEvent_t done;
    std::string what;
    Complete complete;
  };
  void Loop();
  // Fails every pending item with `why`. mu_ not held.
  void FailAll(const Status& why);

  const int device_;
  const std::chrono::milliseconds timeout_;
  const std::function<Status()> check_;
  const std::function<void(const Status&)> abort_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  std::chrono::steady_clock::time_point head_since_;  // when items_.front() became the oldest
  bool stop_ = false;
  Status broken_;
  std::thread thread_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_FINALIZER_H_
