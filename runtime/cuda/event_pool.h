// EventPool and EventFence: the CUDA events a device backend records per
// response, kept for reuse so that the hot path creates and destroys none.
//
// An EventFence is one recorded event handed to the response's Works
// (Work::MarkEnqueued): a consumer's stream waits on it (stream-ordered
// completion), and it goes back to the pool only when the last Work holding it is
// gone, so an event is never re-recorded while a consumer may still wait on it.
// CUDA builds only. Thread-safe: Works are released on callers' threads.
#ifndef HVD_RUNTIME_CUDA_EVENT_POOL_H_
#define HVD_RUNTIME_CUDA_EVENT_POOL_H_

#include <cuda_runtime_api.h>

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/data/work.h"

namespace hvd {
namespace cuda {

class EventPool {
 public:
  // Events are created on `device` with `flags` (cudaEventDisableTiming for
  // ordering only).
  EventPool(int device, unsigned flags) : device_(device), flags_(flags) {}
  // Destroys the events returned to it; those still out are the holders' to return.
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  // A free event, created only when none is free (makes device_ current then).
  Status Get(cudaEvent_t* out);
  void Put(cudaEvent_t event);
  // Events created so far (for tests and diagnostics).
  int created() const;

 private:
  const int device_;
  const unsigned flags_;
  mutable std::mutex mu_;
  std::vector<cudaEvent_t> free_;
  int created_ = 0;
};

// One recorded event from `pool`, returned to it on destruction.
class EventFence : public DeviceFence {
 public:
  EventFence(std::shared_ptr<EventPool> pool, cudaEvent_t event)
      : pool_(std::move(pool)), event_(event) {}
  ~EventFence() override { pool_->Put(event_); }

  Status OrderStream(void* stream) override;
  cudaEvent_t event() const { return event_; }

 private:
  const std::shared_ptr<EventPool> pool_;
  const cudaEvent_t event_;
};

}  // namespace cuda
}  // namespace hvd

#endif  // HVD_RUNTIME_CUDA_EVENT_POOL_H_
