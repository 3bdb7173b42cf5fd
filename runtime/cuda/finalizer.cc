#include "runtime/cuda/finalizer.h"

#include "runtime/cuda/cuda_util.h"

namespace hvd {
namespace cuda {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr auto kErrorCheckInterval = std::chrono::milliseconds(10);

}  // namespace

Status Finalizer::Create(int device, std::chrono::milliseconds timeout,
                         std::function<Status()> check, std::function<void(const Status&)> abort,
                         std::unique_ptr<Finalizer>* out) {
  DeviceGuard guard(device);
  cudaStream_t signals = nullptr;
  HVD_CUDA_RETURN(cudaStreamCreateWithFlags(&signals, cudaStreamNonBlocking),
                  "creating the completion stream on cuda:" + std::to_string(device));
  std::unique_ptr<Finalizer> f(new Finalizer(device, timeout, std::move(check), std::move(abort)));
  f->signals_ = signals;
  f->thread_ = std::thread([p = f.get()] { p->Loop(); });
  *out = std::move(f);
  return Status::OK();
}

Finalizer::Finalizer(int device, std::chrono::milliseconds timeout, std::function<Status()> check,
                     std::function<void(const Status&)> abort)
    : device_(device), timeout_(timeout), check_(std::move(check)), abort_(std::move(abort)) {}

Finalizer::~Finalizer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (signals_ != nullptr) {
    DeviceGuard guard(device_);
    cudaStreamDestroy(signals_);  // returns at once; queued signals still run
  }
}

Status Finalizer::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

void CUDART_CB Finalizer::Signal(void* arg) {
  // Runs on a CUDA driver thread: no CUDA calls here.
  std::unique_ptr<std::shared_ptr<Shared>> shared(static_cast<std::shared_ptr<Shared>*>(arg));
  {
    std::lock_guard<std::mutex> lock((*shared)->mu);
    ++(*shared)->fired;
  }
  (*shared)->cv.notify_all();
}

void Finalizer::Push(cudaEvent_t done, std::string what, Complete complete) {
  std::unique_lock<std::mutex> lock(mu_);
  Status failed = broken_;
  if (failed.ok()) {
    // Queued under mu_, so that signals and items keep the same order.
    cudaError_t e = cudaStreamWaitEvent(signals_, done, 0);
    if (e == cudaSuccess) {
      auto* arg = new std::shared_ptr<Shared>(shared_);
      e = cudaLaunchHostFunc(signals_, &Finalizer::Signal, arg);
      if (e != cudaSuccess) delete arg;
    }
    if (e == cudaSuccess) {
      if (items_.empty()) head_since_ = SteadyClock::now();
      items_.push_back(Item{++pushed_, std::move(what), std::move(complete)});
      lock.unlock();
      cv_.notify_all();
      return;
    }
    failed = CudaStatus(e, what + ": queueing its completion signal");
  }
  lock.unlock();
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
  for (Item& item : items) item.complete(failure);
}

void Finalizer::Loop() {
  cudaSetDevice(device_);
  auto last_check = SteadyClock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    const auto fired = [&] { return !items_.empty() && shared_->fired >= items_.front().seq; };
    if (items_.empty()) {
      if (stop_) break;  // stopping, and drained
      cv_.wait(lock, [&] { return stop_ || !items_.empty(); });
      last_check = SteadyClock::now();
      continue;
    }
    if (!fired()) cv_.wait_for(lock, kErrorCheckInterval, fired);
    if (fired()) {
      Item item = std::move(items_.front());
      items_.pop_front();
      head_since_ = SteadyClock::now();
      lock.unlock();
      item.complete(Status::OK());
      lock.lock();
      continue;
    }
    const std::string what = items_.front().what;
    const auto since = head_since_;
    lock.unlock();
    const auto now = SteadyClock::now();
    Status failure;
    if (now - last_check >= kErrorCheckInterval) {
      // A kernel fault is sticky and keeps signals from firing: the stream says so.
      const cudaError_t q = cudaStreamQuery(signals_);
      if (q != cudaSuccess && q != cudaErrorNotReady) failure = CudaStatus(q, what + " failed on the GPU");
      if (failure.ok()) failure = check_();
      last_check = now;
    }
    if (failure.ok() && now - since > timeout_) {
      failure = Status::Timeout(what + " did not complete on the GPU within " +
                                SecondsText(timeout_) +
                                " (HVD_TIMEOUT): a rank may have stopped or submitted "
                                "different work; the NCCL communicator was aborted");
    }
    if (!failure.ok()) {
      abort_(failure);
      FailAll(failure);
    }
    lock.lock();
  }
}

}  // namespace cuda
}  // namespace hvd
