#include "controller/response_cache.h"

#include "runtime/common/status.h"

namespace hvd {

bool ResponseCache::SameParameters(const proto::Request& a, const proto::Request& b) {
  auto same_repeated = [](const auto& x, const auto& y) {
    if (x.size() != y.size()) return false;
    for (int i = 0; i < x.size(); ++i)
      if (x.Get(i) != y.Get(i)) return false;
    return true;
  };
  return a.type() == b.type() && a.dtype() == b.dtype() &&
         a.reduce_op() == b.reduce_op() && same_repeated(a.shape(), b.shape()) &&
         a.prescale_factor() == b.prescale_factor() &&
         a.postscale_factor() == b.postscale_factor() && a.root_rank() == b.root_rank() &&
         a.device() == b.device() && same_repeated(a.splits(), b.splits()) &&
         a.group_size() == b.group_size();
}

bool ResponseCache::Find(const std::string& name, uint32_t* index) {
  // A used slot cached under this name is the name's only slot (by_name_'s key is
  // the response's name), so the guess is exact once that name matches.
  // The slot's own request carries the same name as its response.
  uint32_t found = follows_[last_];
  if (found == kNoIndex || !Has(found) || slots_[found].request.name() != name) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      last_ = static_cast<uint32_t>(capacity_);
      return false;
    }
    found = it->second;
    follows_[last_] = found;
  }
  last_ = found;
  *index = found;
  return true;
}

ResponseCache::Match ResponseCache::Lookup(const proto::Request& request, uint32_t* index) {
  if (!Find(request.name(), index)) return Match::kNone;
  return SameParameters(slots_[*index].request, request) ? Match::kHit : Match::kChanged;
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
    index = LeastRecentlyUsed();
    RememberEviction(slots_[index].response.names(0));
    Erase(index, evicted_request);
    free_.pop_back();
    evicted = index;
  }
  Slot& s = slots_[index];
  ++generation_;
  s.request = request;
  s.response = response;
  used_at_[index] = ++clock_;
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
  if (Has(index)) used_at_[index] = ++clock_;
}

uint32_t ResponseCache::LeastRecentlyUsed() const {
  uint32_t oldest = 0;
  for (uint32_t i = 1; i < capacity_; ++i)
    if (used_at_[i] != 0 && (used_at_[oldest] == 0 || used_at_[i] < used_at_[oldest])) oldest = i;
  return oldest;
}

void ResponseCache::Erase(uint32_t index, proto::Request* request) {
  if (!Has(index)) return;
  Slot& s = slots_[index];
  if (request) *request = s.request;
  ++generation_;
  by_name_.erase(s.response.names(0));
  used_at_[index] = 0;
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
