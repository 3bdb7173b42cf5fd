#include "controller/fusion_planner.h"

#include <map>
#include <string>
#include <tuple>

#include "runtime/common/types.h"

namespace hvd {
namespace {

bool Fusable(const proto::Response& r) {
  return r.type() == proto::RESPONSE_ALLREDUCE || r.type() == proto::RESPONSE_ALLGATHER ||
         r.type() == proto::RESPONSE_REDUCESCATTER;
}

// Responses with equal keys may share a buffer.
struct FusionKey {
  explicit FusionKey(const proto::Response& r)
      : type(r.type()), dtype(r.dtype()), op(r.reduce_op()), device(r.device()),
        group(r.group_id()), pre(r.prescale_factor()), post(r.postscale_factor()),
        joined(r.joined_ranks().begin(), r.joined_ranks().end()) {}
  bool operator==(const FusionKey& o) const {
    return std::tie(type, dtype, op, device, group, pre, post, joined) ==
           std::tie(o.type, o.dtype, o.op, o.device, o.group, o.pre, o.post, o.joined);
  }
  bool operator<(const FusionKey& o) const {
    return std::tie(type, dtype, op, device, group, pre, post, joined) <
           std::tie(o.type, o.dtype, o.op, o.device, o.group, o.pre, o.post, o.joined);
  }
  int type, dtype, op, device;
  int64_t group;
  double pre, post;
  std::vector<int> joined;
};

int64_t ResponseBytes(const proto::Response& r, int size) {
  int64_t total = 0;
  for (int i = 0; i < r.names_size(); ++i) total += ResponseTensorBytes(r, i, size);
  return total;
}

void Append(proto::Response* group, const proto::Response& r, int size) {
  for (const auto& n : r.names()) group->add_names(n);
  for (int64_t c : r.counts()) group->add_counts(c);
  for (int64_t d : r.rank_dims()) group->add_rank_dims(d);
}

}  // namespace

int64_t ResponseTensorBytes(const proto::Response& r, int i, int size) {
  const int64_t elem = static_cast<int64_t>(DataTypeSize(static_cast<DataType>(r.dtype())));
  if (r.type() == proto::RESPONSE_ALLGATHER) {
    int64_t rows = 0;
    for (int k = 0; k < size; ++k) rows += r.rank_dims(i * size + k);
    return rows * r.counts(i) * elem;
  }
  return r.counts(i) * elem;
}

void PlanFusion(const std::vector<const proto::Response*>& responses, int64_t threshold,
                int size, google::protobuf::RepeatedPtrField<proto::Response>* out) {
  using Open = std::map<FusionKey, std::pair<int, int64_t>>;  // key -> (index in out, bytes)
  Open open;
  // Consecutive responses mostly share a key: the last one found skips the map.
  Open::iterator last = open.end();
  for (const proto::Response* p : responses) {
    const proto::Response& r = *p;
    if ((threshold <= 0 && r.group_id() == 0) || !Fusable(r) || r.names_size() != 1) {
      *out->Add() = r;
      continue;
    }
    const int64_t bytes = ResponseBytes(r, size);
    FusionKey key(r);
    auto it = last != open.end() && key == last->first ? last : open.find(key);
    last = open.end();
    // A group stays together whatever the threshold.
    const bool grouped = r.group_id() != 0;
    if (it != open.end() && (grouped || it->second.second + bytes <= threshold)) {
      Append(out->Mutable(it->second.first), r, size);
      it->second.second += bytes;
      last = it;
      continue;
    }
    *out->Add() = r;
    if (grouped || bytes <= threshold) {
      if (it != open.end()) {
        it->second = {out->size() - 1, bytes};
        last = it;
      } else {
        last = open.emplace(std::move(key), std::make_pair(out->size() - 1, bytes)).first;
      }
    } else if (it != open.end()) {
      open.erase(it);
    }
  }
}

std::vector<proto::Response> PlanFusion(const std::vector<const proto::Response*>& responses,
                                        int64_t threshold, int size) {
  google::protobuf::RepeatedPtrField<proto::Response> planned;
  PlanFusion(responses, threshold, size, &planned);
  std::vector<proto::Response> out;
  out.reserve(planned.size());
  for (auto& r : planned) out.push_back(std::move(r));
  return out;
}

std::vector<proto::Response> PlanFusion(const std::vector<proto::Response>& responses,
                                        int64_t threshold, int size) {
  std::vector<const proto::Response*> pointers;
  pointers.reserve(responses.size());
  for (const auto& r : responses) pointers.push_back(&r);
  return PlanFusion(pointers, threshold, size);
}

}  // namespace hvd
