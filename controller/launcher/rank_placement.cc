#include "controller/launcher/rank_placement.h"

#include <algorithm>

namespace hvd {
namespace launcher {

Status PlaceRanks(int num_ranks, const std::vector<HostSlots>& hosts, const JobEndpoint& job,
                  std::vector<RankPlacement>* out) {
  if (num_ranks < 1)
    return Status::InvalidArgument("cannot place " + std::to_string(num_ranks) + " ranks");
  int total_slots = 0;
  for (const HostSlots& h : hosts) {
    if (h.slots < 1)
      return Status::InvalidArgument("host '" + h.host + "' has " + std::to_string(h.slots) +
                                     " slots; each host needs at least 1");
    total_slots += h.slots;
  }
  if (total_slots < num_ranks)
    return Status::InvalidArgument(std::to_string(num_ranks) + " ranks do not fit in the " +
                                   std::to_string(total_slots) + " slots of " +
                                   std::to_string(hosts.size()) + " host(s)");

  // Ranks per used host, in host order.
  std::vector<int> used;
  for (int left = num_ranks, i = 0; left > 0; ++i) {
    used.push_back(std::min(left, hosts[i].slots));
    left -= used.back();
  }

  std::vector<RankPlacement> placements;
  int rank = 0;
  for (size_t host = 0; host < used.size(); ++host) {
    for (int local_rank = 0; local_rank < used[host]; ++local_rank, ++rank) {
      int cross_rank = 0, cross_size = 0;
      for (size_t other = 0; other < used.size(); ++other) {
        if (used[other] <= local_rank) continue;
        if (other < host) ++cross_rank;
        ++cross_size;
      }
      RankPlacement p;
      p.rank = rank;
      p.host = hosts[host].host;
      p.env = {
          {"HVD_RANK", std::to_string(rank)},
          {"HVD_SIZE", std::to_string(num_ranks)},
          {"HVD_LOCAL_RANK", std::to_string(local_rank)},
          {"HVD_LOCAL_SIZE", std::to_string(used[host])},
          {"HVD_CROSS_RANK", std::to_string(cross_rank)},
          {"HVD_CROSS_SIZE", std::to_string(cross_size)},
          {"HVD_STORE_ADDR", job.store_addr},
          {"HVD_STORE_SECRET", job.store_secret},
          {"HVD_GLOO_HOSTNAME", hosts[host].host},
          {"HVD_JOB_ID", job.job_id},
      };
      placements.push_back(std::move(p));
    }
  }
  *out = std::move(placements);
  return Status::OK();
}

}  // namespace launcher
}  // namespace hvd
