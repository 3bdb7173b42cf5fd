#include "runtime/tensor_queue.h"

#include <unordered_set>

namespace hvd {

int64_t TensorEntry::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return shape.empty() ? 0 : n;
}

void TensorEntry::ToRequest(int rank, proto::Request* r) const {
  r->Clear();
  r->set_request_rank(rank);
  r->set_type(static_cast<proto::RequestType>(type));
  r->set_name(name);
  r->set_dtype(static_cast<int>(dtype));
  r->set_reduce_op(static_cast<int>(reduce_op));
  for (int64_t d : shape) r->add_shape(d);
  r->set_prescale_factor(prescale_factor);
  r->set_postscale_factor(postscale_factor);
  r->set_root_rank(root_rank);
  r->set_device(device);
  for (int64_t s : splits) r->add_splits(s);
  r->set_group_id(group_id);
  r->set_group_size(group_size);
}

Status TensorQueue::Enqueue(std::vector<TensorEntry> entries, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!refusal_.ok()) return refusal_;
  auto in_flight = [](const std::string& name) {
    return Status::InvalidUsage("tensor '" + name +
                                "' is already in flight: a name may be enqueued again only "
                                "after its earlier collective completed");
  };
  if (entries.size() == 1) {
    // The common case (one tensor per call) needs no set of the batch's names.
    if (entries_.count(entries[0].name)) return in_flight(entries[0].name);
  } else {
    std::unordered_set<std::string> names;
    for (const auto& e : entries) {
      if (entries_.count(e.name) || !names.insert(e.name).second) return in_flight(e.name);
    }
  }
  for (auto& e : entries) {
    e.ToRequest(rank, new_requests_.add_requests());
    std::string name = e.name;
    entries_.emplace(std::move(name), std::move(e));
  }
  return Status::OK();
}

void TensorQueue::PopRequests(proto::RequestList* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->mutable_requests()->Clear();
  out->mutable_requests()->Swap(new_requests_.mutable_requests());
}

void TensorQueue::TakeAll(const google::protobuf::RepeatedPtrField<std::string>& names,
                          std::vector<TensorEntry>* out, std::vector<bool>* found) {
  out->resize(names.size());
  found->assign(names.size(), false);
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < names.size(); ++i) {
    auto it = entries_.find(names[i]);
    if (it == entries_.end()) continue;
    (*out)[i] = std::move(it->second);
    entries_.erase(it);
    (*found)[i] = true;
  }
}

void TensorQueue::FailAll(const Status& status, bool refuse_new) {
  std::unordered_map<std::string, TensorEntry> failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed.swap(entries_);
    new_requests_.mutable_requests()->Clear();
    if (refuse_new) refusal_ = status;
  }
  for (auto& [name, e] : failed) e.work->Complete(status);
}

size_t TensorQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace hvd
