#include "controller/loop/process_sets.h"

#include <algorithm>
#include <string>
#include <utility>

namespace hvd {
namespace {

std::string JoinRanks(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Status ProcessSets::CheckNewSet(std::vector<int>* ranks) const {
  std::vector<int>& r = *ranks;
  std::sort(r.begin(), r.end());
  if (r.empty()) return Status::InvalidArgument("a process set needs at least one rank");
  if (std::adjacent_find(r.begin(), r.end()) != r.end())
    return Status::InvalidArgument("process set ranks [" + JoinRanks(r) + "] repeat a rank");
  if (r.front() < 0 || r.back() >= size_)
    return Status::InvalidArgument("process set ranks [" + JoinRanks(r) + "] must lie in 0.." +
                                   std::to_string(size_ - 1));
  return Status::OK();
}

int ProcessSets::NextId() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_++;
}

void ProcessSets::Add(int id, std::vector<int> ranks, std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(mu_);
  members_[id] = std::move(ranks);
  if (!comm) return;
  if (id == 0) global_ = comm.get();
  comms_.push_back(std::move(comm));
}

std::shared_ptr<Communicator> ProcessSets::Remove(int id) {
  std::shared_ptr<Communicator> gone;
  std::lock_guard<std::mutex> lock(mu_);
  members_.erase(id);
  removed_.insert(id);
  for (auto it = comms_.begin(); it != comms_.end(); ++it) {
    if ((*it)->id == id) {
      gone = std::move(*it);
      comms_.erase(it);
      break;
    }
  }
  return gone;
}

Status ProcessSets::CheckLive(int id) const {
  if (removed_.count(id))
    return Status::InvalidArgument("process set " + std::to_string(id) + " has been removed");
  if (!members_.count(id))
    return Status::InvalidArgument("unknown process set " + std::to_string(id));
  return Status::OK();
}

Status ProcessSets::Members(int id, std::vector<int>* ranks) const {
  return Info(id, nullptr, ranks);
}

Status ProcessSets::Info(int id, int* rank_in_set, std::vector<int>* ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  HVD_RETURN_IF_ERROR(CheckLive(id));
  const std::vector<int>& members = members_.at(id);
  if (ranks) *ranks = members;
  if (rank_in_set) {
    auto pos = std::find(members.begin(), members.end(), rank_);
    *rank_in_set = pos == members.end() ? -1 : static_cast<int>(pos - members.begin());
  }
  return Status::OK();
}

Status ProcessSets::Find(int id, std::shared_ptr<Communicator>* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& c : comms_) {
    if (c->id == id) {
      *out = c;
      return Status::OK();
    }
  }
  HVD_RETURN_IF_ERROR(CheckLive(id));
  return Status::InvalidArgument("rank " + std::to_string(rank_) +
                                 " is not a member of process set " + std::to_string(id) +
                                 " (ranks " + JoinRanks(members_.at(id)) + ")");
}

std::vector<std::shared_ptr<Communicator>> ProcessSets::Communicators() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comms_;
}

}  // namespace hvd
