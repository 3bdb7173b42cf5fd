#include "runtime/data/tensor_queue.h"

#include <unordered_set>

namespace hvd {

int64_t TensorEntry::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

namespace {

// At most this many spare nodes are kept (a few steps' worth of tensors).
constexpr size_t kMaxSpareNodes = 4096;

Status InFlight(const std::string& name) {
  return Status::InvalidUsage("tensor '" + name +
                              "' is already in flight: a name may be enqueued again only "
                              "after its earlier collective completed");
}

}  // namespace

bool TensorQueue::Insert(TensorEntry* e) {
  Map::iterator at;
  if (spare_.empty()) {
    auto [it, inserted] = entries_.try_emplace(e->name);
    if (!inserted) return false;
    it->second = std::move(*e);
    at = it;
  } else {
    Map::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.key() = e->name;
    auto result = entries_.insert(std::move(node));
    if (!result.inserted) {
      spare_.push_back(std::move(result.node));
      return false;
    }
    result.position->second = std::move(*e);
    at = result.position;
  }
  at->second.unpopped_slot = static_cast<int64_t>(new_.size());
  new_.push_back(&at->second);
  return true;
}

Status TensorQueue::Enqueue(TensorEntry* entries, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  if (n == 1) {
    // The common case (one tensor per call): one lookup, no set of names.
    return Insert(&entries[0]) ? Status::OK() : InFlight(entries[0].name);
  }
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = entries[i].name;
    if (entries_.count(name) || !names.insert(name).second) return InFlight(name);
  }
  for (size_t i = 0; i < n; ++i) HVD_CHECK(Insert(&entries[i]));
  return Status::OK();
}

void TensorQueue::TakeAll(const std::vector<std::string>& names, Taken* out) {
  out->nodes_.clear();
  out->nodes_.resize(names.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = entries_.find(names[i]);
    if (it == entries_.end()) continue;
    if (it->second.unpopped_slot >= 0) {
      new_[it->second.unpopped_slot] = nullptr;
      it->second.unpopped_slot = -1;
    }
    out->nodes_[i] = entries_.extract(it);
  }
}

void TensorQueue::Recycle(Taken* taken) {
  for (auto& node : taken->nodes_) {
    if (!node) continue;
    node.mapped().work.reset();
    node.mapped().loop_action = nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& node : taken->nodes_) {
      if (node && spare_.size() < kMaxSpareNodes) spare_.push_back(std::move(node));
    }
  }
  taken->nodes_.clear();
}

void TensorQueue::FailAll(const Status& status, bool refuse_new) {
  std::unordered_map<std::string, TensorEntry> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(entries_);
    new_.clear();
    if (refuse_new) refusal_ = status;
  }
  CompletionBatch batch;
  for (auto& [name, e] : failed) batch.Complete(e.work.get(), status);
}

size_t TensorQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace hvd
