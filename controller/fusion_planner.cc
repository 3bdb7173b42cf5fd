#include "controller/fusion_planner.h"

#include <map>
#include <string>
#include <tuple>

#include "runtime/types.h"

namespace hvd {
namespace {

bool Fusable(const proto::Response& r) {
  return r.type() == proto::RESPONSE_ALLREDUCE || r.type() == proto::RESPONSE_ALLGATHER ||
         r.type() == proto::RESPONSE_REDUCESCATTER;
}

// Responses with equal keys may share a buffer.
std::string FusionKey(const proto::Response& r) {
  std::string key = std::to_string(r.type()) + "/" + std::to_string(r.dtype()) + "/" +
                    std::to_string(r.reduce_op()) + "/" + std::to_string(r.device()) + "/";
  const double scales[2] = {r.prescale_factor(), r.postscale_factor()};
  key.append(reinterpret_cast<const char*>(scales), sizeof(scales));
  for (int j : r.joined_ranks()) key += "/" + std::to_string(j);
  if (r.group_id() != 0) key += "/group" + std::to_string(r.group_id());
  return key;
}

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

std::vector<proto::Response> PlanFusion(const std::vector<proto::Response>& responses,
                                        int64_t threshold, int size) {
  std::vector<proto::Response> out;
  out.reserve(responses.size());
  std::map<std::string, std::pair<size_t, int64_t>> open;  // key -> (index in out, bytes)
  for (const auto& r : responses) {
    if ((threshold <= 0 && r.group_id() == 0) || !Fusable(r) || r.names_size() != 1) {
      out.push_back(r);
      continue;
    }
    const int64_t bytes = ResponseBytes(r, size);
    const std::string key = FusionKey(r);
    auto it = open.find(key);
    // A group stays together whatever the threshold.
    const bool grouped = r.group_id() != 0;
    if (it != open.end() && (grouped || it->second.second + bytes <= threshold)) {
      Append(&out[it->second.first], r, size);
      it->second.second += bytes;
      continue;
    }
    out.push_back(r);
    if (grouped || bytes <= threshold) {
      open[key] = {out.size() - 1, bytes};
    } else if (it != open.end()) {
      open.erase(it);
    }
  }
  return out;
}

}  // namespace hvd
