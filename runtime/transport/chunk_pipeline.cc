#include "runtime/transport/chunk_pipeline.h"

#include <pthread.h>

#include <utility>

namespace hvd {

ChunkPipeline::~ChunkPipeline() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ChunkPipeline::Run(std::function<void()> job) {
  if (!thread_.joinable()) {
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "hvd-pipeline");
      Loop();
    });
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
  }
  cv_.notify_all();
}

void ChunkPipeline::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !job_; });
}

void ChunkPipeline::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_; });
    if (!job_) return;  // stopping with nothing to do
    lock.unlock();
    job_();  // job_ is only replaced by Run, after Wait saw it empty
    lock.lock();
    job_ = nullptr;
    cv_.notify_all();
  }
}

}  // namespace hvd
