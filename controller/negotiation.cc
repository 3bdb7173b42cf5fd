#include "controller/negotiation.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>

#include "controller/response_cache.h"
#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {
namespace {

std::string RankList(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string ShapeString(const proto::Request& r, int from_dim) {
  std::string s = "[";
  for (int i = from_dim; i < r.shape_size(); ++i)
    s += (i > from_dim ? ", " : "") + std::to_string(r.shape(i));
  return s + "]";
}

int64_t NumElements(const proto::Request& r) {
  int64_t n = 1;
  for (int64_t d : r.shape()) n *= d;
  return n;
}

// Shortest text that still tells apart any two different doubles.
std::string Number(double v) {
  for (int precision = 6; precision <= 17; ++precision) {
    std::ostringstream o;
    o.precision(precision);
    o << v;
    if (std::strtod(o.str().c_str(), nullptr) == v) return o.str();
  }
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

// Groups the ranks by `value(request)`; returns "" when all agree, else
// "<what> differs across ranks: rank 0 has X; ranks 1, 2 have Y".
std::string Differ(const std::string& what, const std::vector<proto::Request>& requests,
                   const std::function<std::string(const proto::Request&)>& value) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const auto& r : requests) {
    std::string v = value(r);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == v; });
    if (it == groups.end()) {
      groups.push_back({v, {r.request_rank()}});
    } else {
      it->second.push_back(r.request_rank());
    }
  }
  if (groups.size() <= 1) return "";
  std::string s = what + " differs across ranks: ";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += (i ? "; " : "") + RankList(groups[i].second) +
         (groups[i].second.size() == 1 ? " has " : " have ") + groups[i].first;
  }
  return s;
}

// A grouped call's tensors must be as many on every rank (an ungrouped call counts as
// a group of one); "" if they are.
std::string GroupSizesDiffer(const std::vector<proto::Request>& requests) {
  return Differ("the number of tensors in its grouped call", requests,
                [](const proto::Request& r) { return std::to_string(std::max(1, r.group_size())); });
}

proto::ResponseType ResponseTypeFor(proto::RequestType t) {
  return static_cast<proto::ResponseType>(static_cast<int>(t));
}

}  // namespace

std::string CheckAgreement(const std::string& name, const std::vector<proto::Request>& requests) {
  HVD_CHECK(!requests.empty());
  const auto type = requests[0].type();
  // Identical requests agree on every check below (each compares the ranks'
  // values): the common case, decided without formatting any value (only a
  // mismatch's message needs them as text, and formatting costs far more than
  // comparing).
  switch (type) {
    case proto::ALLREDUCE:
    case proto::ALLGATHER:
    case proto::BROADCAST:
    case proto::ALLTOALL:
    case proto::REDUCESCATTER:
    case proto::BARRIER:
    case proto::JOIN:
      if (std::all_of(requests.begin() + 1, requests.end(), [&](const proto::Request& r) {
            return ResponseCache::SameParameters(r, requests[0]);
          }))
        return "";
      break;
    default:
      break;
  }
  const std::string prefix =
      "tensor '" + name + "' (" + OpTypeName(static_cast<OpType>(type)) + "): ";
  std::string d = Differ("collective", requests, [](const proto::Request& r) {
    return std::string(OpTypeName(static_cast<OpType>(r.type())));
  });
  if (!d.empty()) return "tensor '" + name + "': " + d;

  std::vector<std::function<std::string()>> checks;
  auto dtype = [&] {
    return Differ("dtype", requests, [](const proto::Request& r) {
      return std::string(DataTypeName(static_cast<DataType>(r.dtype())));
    });
  };
  auto count = [&] {
    return Differ("element count", requests,
                  [](const proto::Request& r) { return std::to_string(NumElements(r)); });
  };
  auto shape = [&] {
    return Differ("shape", requests, [](const proto::Request& r) { return ShapeString(r, 0); });
  };
  auto trailing = [&] {
    return Differ("shape after the first dimension", requests,
                  [](const proto::Request& r) { return ShapeString(r, 1); });
  };
  auto ndim = [&] {
    return Differ("number of dimensions", requests,
                  [](const proto::Request& r) { return std::to_string(r.shape_size()); });
  };
  auto op = [&] {
    return Differ("reduce op", requests, [](const proto::Request& r) {
      return std::string(ReduceOpName(static_cast<ReduceOp>(r.reduce_op())));
    });
  };
  auto scales = [&] {
    std::string s = Differ("prescale factor", requests,
                           [](const proto::Request& r) { return Number(r.prescale_factor()); });
    if (!s.empty()) return s;
    return Differ("postscale factor", requests,
                  [](const proto::Request& r) { return Number(r.postscale_factor()); });
  };
  auto root = [&] {
    return Differ("root rank", requests,
                  [](const proto::Request& r) { return std::to_string(r.root_rank()); });
  };
  // Host versus GPU must agree; the GPU index may differ (rank r usually drives cuda:r).
  auto device = [&] {
    return Differ("device", requests, [](const proto::Request& r) {
      return std::string(r.device() < 0 ? "cpu" : "cuda");
    });
  };
  auto splits_given = [&] {
    return Differ("use of split sizes", requests, [](const proto::Request& r) {
      return std::string(r.splits_size() > 0 ? "splits" : "no splits");
    });
  };

  switch (type) {
    // The shape, not only the count: (2, 3) against (3, 2) is a mismatch, as in Horovod.
    case proto::ALLREDUCE: checks = {dtype, count, shape, op, scales, device}; break;
    case proto::ALLGATHER: checks = {dtype, ndim, trailing, device}; break;
    case proto::BROADCAST: checks = {dtype, shape, root, device}; break;
    case proto::ALLTOALL: checks = {dtype, ndim, trailing, splits_given, device}; break;
    case proto::REDUCESCATTER: checks = {dtype, shape, op, scales, device}; break;
    case proto::BARRIER:
      // Process-set changes ride on barriers with the member ranks as the shape.
      checks = {[&] {
        return Differ("rank list", requests, [](const proto::Request& r) { return ShapeString(r, 0); });
      }};
      break;
    case proto::JOIN: break;
    default: return prefix + "unknown collective " + std::to_string(type);
  }
  for (auto& check : checks) {
    std::string s = check();
    if (!s.empty()) return prefix + s;
  }
  std::string groups = GroupSizesDiffer(requests);
  if (!groups.empty()) return prefix + groups;
  return "";
}

MessageTable::MessageTable(int size) : size_(size) {}

std::string MessageTable::BuildSplitMatrix(const std::string& name,
                                           const std::vector<proto::Request>& requests,
                                           proto::Response* resp) const {
  const std::string prefix = "tensor '" + name + "' (alltoall): ";
  for (const auto& r : requests) {
    const int64_t rows = r.shape_size() ? r.shape(0) : 0;
    const std::string who = "rank " + std::to_string(r.request_rank());
    if (r.splits_size() == 0) {
      if (rows % size_ != 0)
        return prefix + who + "'s first dimension " + std::to_string(rows) +
               " is not divisible by " + std::to_string(size_) + " ranks; pass split sizes";
      for (int d = 0; d < size_; ++d) resp->add_split_matrix(rows / size_);
      continue;
    }
    if (r.splits_size() != size_)
      return prefix + who + " gave " + std::to_string(r.splits_size()) +
             " split sizes for " + std::to_string(size_) + " ranks";
    int64_t sum = 0;
    for (int64_t v : r.splits()) {
      if (v < 0) return prefix + who + " gave a negative split size " + std::to_string(v);
      sum += v;
    }
    if (sum != rows)
      return prefix + who + "'s split sizes add up to " + std::to_string(sum) +
             " but its first dimension is " + std::to_string(rows);
    for (int64_t v : r.splits()) resp->add_split_matrix(v);
  }
  return "";
}

std::vector<proto::Response> MessageTable::FailUnjoinable() {
  std::vector<proto::Response> out;
  if (joined_.empty()) return out;
  std::vector<std::pair<std::string, std::string>> doomed;
  for (const auto& [name, e] : entries_) {
    int present = -1, joined_rank = -1;
    for (int r = 0; r < size_; ++r) {
      if (e.have[r] && present < 0) present = r;
      if (!e.have[r] && joined_.count(r) && joined_rank < 0) joined_rank = r;
    }
    if (present < 0 || joined_rank < 0) continue;
    const auto type = e.requests[present].type();
    if (type == proto::ALLREDUCE || type == proto::JOIN) continue;
    doomed.push_back({name, std::string(OpTypeName(static_cast<OpType>(type)))});
  }
  for (const auto& [name, type] : doomed) {
    std::string joined_list;
    for (int r : joined_) joined_list += (joined_list.empty() ? "" : ", ") + std::to_string(r);
    out.push_back(Fail(name, static_cast<int>(StatusCode::kInvalidUsage),
                       "tensor '" + name + "' (" + type + ") cannot complete while rank(s) " +
                           joined_list + " have joined: only allreduce works with join"));
  }
  return out;
}

void MessageTable::Add(int rank, const proto::Request& request, Clock::time_point now) {
  auto [it, inserted] = entries_.try_emplace(request.name());
  Entry& e = it->second;
  if (inserted) {
    e.requests.resize(size_);
    e.have.assign(size_, false);
    e.arrivals.assign(size_, Clock::time_point{});
    e.first_seen = now;
  }
  if (e.have[rank]) {
    e.duplicate = true;
    e.duplicate_rank = rank;
    return;
  }
  e.requests[rank] = request;
  e.requests[rank].set_request_rank(rank);
  e.have[rank] = true;
  e.arrivals[rank] = now;
  ++e.count;
  e.last_seen = now;
  e.last_rank = rank;
  if (IsReady(e) && std::find(ready_.begin(), ready_.end(), request.name()) == ready_.end())
    ready_.push_back(request.name());
}

bool MessageTable::IsReady(const Entry& e) const {
  if (e.count == size_) return true;
  if (joined_.empty()) return false;
  // Joined ranks stand in for allreduce only; the first present request decides.
  for (int r = 0; r < size_; ++r) {
    if (!e.have[r]) continue;
    if (e.requests[r].type() != proto::ALLREDUCE) return false;
    break;
  }
  for (int r = 0; r < size_; ++r)
    if (!e.have[r] && joined_.count(r) == 0) return false;
  return true;
}

void MessageTable::SetJoined(const std::set<int>& joined) {
  joined_ = joined;
  if (joined_.empty()) return;
  for (auto& [name, e] : entries_) {
    if (IsReady(e) && std::find(ready_.begin(), ready_.end(), name) == ready_.end())
      ready_.push_back(name);
  }
}

std::vector<std::string> MessageTable::TakeReady() {
  std::vector<std::string> out;
  out.swap(ready_);
  return out;
}

proto::Response MessageTable::BuildResponse(const std::string& name) {
  auto it = entries_.find(name);
  HVD_CHECK_MSG(it != entries_.end(), "no entry for tensor '" + name + "'");
  Entry e = std::move(it->second);
  entries_.erase(it);

  std::vector<proto::Request> present;
  std::vector<int32_t> joined;
  for (int r = 0; r < size_; ++r) {
    if (e.have[r]) {
      present.push_back(e.requests[r]);
    } else {
      joined.push_back(r);
    }
  }
  last_arrival_ = {e.last_rank, e.last_seen - e.first_seen,
                   present.empty() ? OpType::kAllreduce : static_cast<OpType>(present[0].type()),
                   e.arrivals};

  proto::Response resp;
  resp.add_names(name);
  std::string error;
  if (e.duplicate) {
    error = "tensor '" + name + "' was submitted twice by rank " +
            std::to_string(e.duplicate_rank) + " before it completed";
  } else {
    error = CheckAgreement(name, present);
  }
  if (!error.empty()) {
    // A grouped call whose size differs across ranks leaves members that some ranks
    // never submit: note each rank's group, so FailBrokenGroups fails those too.
    const std::string groups = e.duplicate ? "" : GroupSizesDiffer(present);
    if (!groups.empty()) {
      for (const auto& r : present)
        if (r.group_id() != 0)
          broken_groups_[{r.request_rank(), r.group_id()}] = "(with '" + name + "') " + groups;
    }
    resp.set_type(proto::RESPONSE_ERROR);
    resp.set_error_code(static_cast<int>(StatusCode::kMismatch));
    resp.set_error_message(error);
    return resp;
  }
  const proto::Request& first = present[0];
  resp.set_type(ResponseTypeFor(first.type()));
  resp.set_dtype(first.dtype());
  resp.set_reduce_op(first.reduce_op());
  resp.set_prescale_factor(first.prescale_factor());
  resp.set_postscale_factor(first.postscale_factor());
  resp.set_root_rank(first.root_rank());
  resp.set_device(first.device());
  resp.set_group_id(first.group_id());
  for (int r : joined) resp.add_joined_ranks(r);
  if (first.type() == proto::JOIN) resp.set_root_rank(e.last_rank);

  int64_t row = 1;
  for (int i = 1; i < first.shape_size(); ++i) row *= first.shape(i);
  switch (first.type()) {
    case proto::ALLGATHER:
      // counts = elements per first-dimension row; rank_dims = each rank's rows.
      resp.add_counts(row);
      for (const auto& r : present) resp.add_rank_dims(r.shape_size() ? r.shape(0) : 0);
      break;
    case proto::ALLTOALL: {
      resp.add_counts(row);
      std::string split_error = BuildSplitMatrix(name, present, &resp);
      if (!split_error.empty()) {
        proto::Response err;
        err.add_names(name);
        err.set_type(proto::RESPONSE_ERROR);
        err.set_error_code(static_cast<int>(StatusCode::kInvalidArgument));
        err.set_error_message(split_error);
        return err;
      }
      break;
    }
    default: {
      int64_t n = 1;
      for (int64_t d : first.shape()) n *= d;
      resp.add_counts(first.shape_size() ? n : 0);
      if (first.type() == proto::REDUCESCATTER) resp.add_rank_dims(first.shape_size() ? first.shape(0) : 0);
    }
  }
  return resp;
}

std::vector<proto::Response> MessageTable::FailBrokenGroups() {
  std::vector<proto::Response> out;
  if (broken_groups_.empty()) return out;
  std::vector<std::pair<std::string, std::string>> doomed;
  for (const auto& [name, e] : entries_) {
    for (int r = 0; r < size_; ++r) {
      if (!e.have[r] || e.requests[r].group_id() == 0) continue;
      auto it = broken_groups_.find({r, e.requests[r].group_id()});
      if (it == broken_groups_.end()) continue;
      doomed.push_back({name, it->second});
      break;
    }
  }
  // A rank enqueues a group's tensors together, so they are all here by now.
  broken_groups_.clear();
  for (const auto& [name, why] : doomed)
    out.push_back(Fail(name, static_cast<int>(StatusCode::kMismatch),
                       "tensor '" + name + "' is in a grouped call " + why));
  return out;
}

std::vector<proto::Response> MessageTable::FailWaitingOn(int rank, int error_code,
                                                         const std::string& why) {
  std::vector<proto::Response> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.have[rank]) {
      ++it;
      continue;
    }
    const std::string name = it->first;
    ++it;
    out.push_back(Fail(name, error_code, "tensor '" + name + "' can no longer complete: " + why));
  }
  return out;
}

proto::Response MessageTable::Fail(const std::string& name, int error_code,
                                   const std::string& message) {
  entries_.erase(name);
  ready_.erase(std::remove(ready_.begin(), ready_.end(), name), ready_.end());
  proto::Response resp;
  resp.set_type(proto::RESPONSE_ERROR);
  resp.add_names(name);
  resp.set_error_code(error_code);
  resp.set_error_message(message);
  return resp;
}

std::vector<PendingTensor> MessageTable::Pending() const {
  std::vector<PendingTensor> out;
  for (const auto& [name, e] : entries_) {
    PendingTensor p{name, {}, {}, e.first_seen};
    for (int r = 0; r < size_; ++r) (e.have[r] ? p.submitted : p.missing).push_back(r);
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const PendingTensor& a, const PendingTensor& b) { return a.first_seen < b.first_seen; });
  return out;
}

}  // namespace hvd
