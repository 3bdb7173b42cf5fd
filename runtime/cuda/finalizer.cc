#include "runtime/cuda/finalizer.h"

#include "runtime/cuda/cuda_util.h"

namespace hvd {
namespace cuda {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kPollInterval = std::chrono::microseconds(20);
constexpr auto kErrorCheckInterval = std::chrono::milliseconds(10);

}  // namespace

Finalizer::Finalizer(int device, std::chrono::milliseconds timeout, std::function<Status()> check,
                     std::function<void(const Status&)> abort)
    : device_(device), timeout_(timeout), check_(std::move(check)), abort_(std::move(abort)) {
  thread_ = std::thread([this] { Loop(); });
}

Finalizer::~Finalizer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Status Finalizer::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void Finalizer::Push(cudaEvent_t done, std::string what, Complete complete) {
  Status failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = broken_;
    if (failed.ok()) {
      if (items_.empty()) head_since_ = SteadyClock::now();
      items_.push_back(Item{done, std::move(what), std::move(complete)});
    }
  }
  if (failed.ok()) {
    cv_.notify_all();
    return;
  }
  cudaEventDestroy(done);
  complete(failed);
}

void Finalizer::FailAll(const Status& why) {
  std::deque<Item> items;
  Status failure;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.ok()) broken_ = why;
    failure = broken_;
    items.swap(items_);
  }
  for (Item& item : items) {
    // Destroying an event that has not fired is allowed: CUDA frees it once it has.
    cudaEventDestroy(item.done);
    item.complete(failure);
  }
}

void Finalizer::Loop() {
  cudaSetDevice(device_);
  auto last_check = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
    if (items_.empty()) break;  // stopping, and drained
    const cudaEvent_t done = items_.front().done;
    const std::string what = items_.front().what;
    const auto since = head_since_;
    lock.unlock();

    const cudaError_t q = cudaEventQuery(done);
    const auto now = SteadyClock::now();
    if (q == cudaSuccess) {
      lock.lock();
      Item item = std::move(items_.front());
      items_.pop_front();
      head_since_ = now;
      lock.unlock();
      cudaEventDestroy(item.done);
      item.complete(Status::OK());
      lock.lock();
      continue;
    }
    Status failure;
    if (q != cudaErrorNotReady) {
      failure = CudaStatus(q, what + " failed on the GPU");
    } else {
      if (now - last_check >= kErrorCheckInterval) {
        failure = check_();
        last_check = now;
      }
      if (failure.ok() && now - since > timeout_) {
        failure = Status::Timeout(what + " did not complete on the GPU within " +
                                  SecondsText(timeout_) +
                                  " (HVD_TIMEOUT): a rank may have stopped or submitted "
                                  "different work; the NCCL communicator was aborted");
      }
    }
    if (!failure.ok()) {
      abort_(failure);
      FailAll(failure);
    } else {
      std::this_thread::sleep_for(kPollInterval);
    }
    lock.lock();
  }
}

}  // namespace cuda
}  // namespace hvd
