#include "runtime/cuda/event_pool.h"

#include "runtime/cuda/cuda_util.h"

namespace hvd {
namespace cuda {

EventPool::~EventPool() {
  for (cudaEvent_t e : free_) cudaEventDestroy(e);
}

Status EventPool::Get(cudaEvent_t* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      *out = free_.back();
      free_.pop_back();
      return Status::OK();
    }
    ++created_;
  }
  DeviceGuard guard(device_);
  HVD_CUDA_RETURN(cudaEventCreateWithFlags(out, flags_),
                  "creating an event on cuda:" + std::to_string(device_));
  return Status::OK();
}

void EventPool::Put(cudaEvent_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(event);
}

int EventPool::created() const {
  std::lock_guard<std::mutex> lock(mu_);
  return created_;
}

Status EventFence::OrderStream(void* stream) {
  HVD_CUDA_RETURN(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), event_, 0),
                  "making the caller's stream wait for a collective");
  return Status::OK();
}

}  // namespace cuda
}  // namespace hvd
