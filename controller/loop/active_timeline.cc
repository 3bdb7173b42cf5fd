#include "controller/loop/active_timeline.h"

#include <utility>

namespace hvd {

Status ActiveTimeline::Start(const std::string& path, bool mark_cycles) {
  if (path.empty()) return Status::InvalidArgument("the timeline's file name is empty");
  std::lock_guard<std::mutex> lock(mu_);
  mark_cycles_.store(mark_cycles, std::memory_order_relaxed);
  auto current = std::atomic_load(&current_);
  if (current && current->path() == path) return Status::OK();
  std::unique_ptr<Timeline> opened;
  HVD_RETURN_IF_ERROR(Timeline::Open(path, rank_, &opened));
  std::atomic_store(&current_, std::shared_ptr<Timeline>(std::move(opened)));
  active_.store(true, std::memory_order_release);
  if (current) current->Close();
  return Status::OK();
}

void ActiveTimeline::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  active_.store(false, std::memory_order_release);
  auto current = std::atomic_exchange(&current_, std::shared_ptr<Timeline>());
  if (current) current->Close();
}

}  // namespace hvd
