#include "controller/response_cache.h"

#include "runtime/status.h"

namespace hvd {

bool ResponseCache::SameRequest(const proto::Request& a, const proto::Request& b) {
  auto same_repeated = [](const auto& x, const auto& y) {
    if (x.size() != y.size()) return false;
    for (int i = 0; i < x.size(); ++i)
      if (x.Get(i) != y.Get(i)) return false;
    return true;
  };
  return a.type() == b.type() && a.name() == b.name() && a.dtype() == b.dtype() &&
         a.reduce_op() == b.reduce_op() && same_repeated(a.shape(), b.shape()) &&
         a.prescale_factor() == b.prescale_factor() &&
         a.postscale_factor() == b.postscale_factor() && a.root_rank() == b.root_rank() &&
         a.device() == b.device() && same_repeated(a.splits(), b.splits());
}

ResponseCache::Match ResponseCache::Lookup(const proto::Request& request, uint32_t* index) {
  // A used slot cached under this name is the name's only slot (by_name_'s key is
  // the response's name), so the guess is exact once that name matches.
  uint32_t found = follows_[last_];
  if (found == kNoIndex || !slots_[found].used ||
      slots_[found].response.names(0) != request.name()) {
    auto it = by_name_.find(request.name());
    if (it == by_name_.end()) {
      last_ = static_cast<uint32_t>(capacity_);
      return Match::kNone;
    }
    found = it->second;
    follows_[last_] = found;
  }
  last_ = found;
  *index = found;
  return SameRequest(slots_[found].request, request) ? Match::kHit : Match::kChanged;
}

int64_t ResponseCache::Put(const proto::Request& request, const proto::Response& response,
                           proto::Request* evicted_request) {
  if (capacity_ == 0) return -1;
  HVD_CHECK(response.names_size() == 1);
  const std::string& name = response.names(0);
  if (by_name_.count(name)) return -1;
  if (!evicted_.empty()) {
    auto it = evicted_.find(name);
    if (it != evicted_.end()) {
      ++refills_;
      evicted_.erase(it);
    }
  }
  int64_t evicted = -1;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else if (next_unused_ < capacity_) {
    index = next_unused_++;
  } else {
    index = lru_.front();
    RememberEviction(slots_[index].response.names(0));
    Erase(index, evicted_request);
    free_.pop_back();
    evicted = index;
  }
  Slot& s = slots_[index];
  s.used = true;
  s.request = request;
  s.response = response;
  s.lru = lru_.insert(lru_.end(), index);
  by_name_[name] = index;
  return evicted;
}

void ResponseCache::RememberEviction(const std::string& name) {
  evicted_[name] = ++evictions_;
  eviction_order_.emplace_back(name, evictions_);
  if (eviction_order_.size() > capacity_) {
    auto& [oldest, serial] = eviction_order_.front();
    auto it = evicted_.find(oldest);
    if (it != evicted_.end() && it->second == serial) evicted_.erase(it);
    eviction_order_.pop_front();
  }
}

void ResponseCache::Touch(uint32_t index) {
  if (!Has(index)) return;
  Slot& s = slots_[index];
  lru_.splice(lru_.end(), lru_, s.lru);
}

void ResponseCache::Erase(uint32_t index, proto::Request* request) {
  if (!Has(index)) return;
  Slot& s = slots_[index];
  if (request) *request = s.request;
  by_name_.erase(s.response.names(0));
  lru_.erase(s.lru);
  s.used = false;
  s.request.Clear();
  s.response.Clear();
  free_.push_back(index);
}

std::vector<proto::Response> SplitResponse(const proto::Response& fused, int size) {
  std::vector<proto::Response> out;
  const int n = fused.names_size();
  if (n == 1) {
    out.push_back(fused);
    return out;
  }
  // The fields every tensor shares, copied once (not the whole fused list per tensor).
  proto::Response shared = fused;
  shared.clear_names();
  shared.clear_counts();
  shared.clear_rank_dims();
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    proto::Response r = shared;
    r.add_names(fused.names(i));
    if (i < fused.counts_size()) r.add_counts(fused.counts(i));
    if (fused.type() == proto::RESPONSE_ALLGATHER) {
      for (int k = 0; k < size; ++k) r.add_rank_dims(fused.rank_dims(i * size + k));
    } else if (fused.type() == proto::RESPONSE_REDUCESCATTER) {
      r.add_rank_dims(fused.rank_dims(i));
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace hvd
