// RankPlacement: which host each rank runs on and the environment it gets.
//
// Placement is a pure function of the host list and the job's store endpoint, kept
// apart from spawning: local launching passes one host, and a later `-H host:slots`
// launcher (ssh) passes several and spawns each placement remotely.
//
// Ranks fill hosts in order: host 0 gets ranks 0..slots0-1, and so on. As in Horovod,
// a rank's local rank is its index on its host, local size the number of ranks there,
// cross rank the index of its host among the hosts that have a rank with the same local
// rank, and cross size the number of such hosts.
#ifndef HVD_CONTROLLER_LAUNCHER_RANK_PLACEMENT_H_
#define HVD_CONTROLLER_LAUNCHER_RANK_PLACEMENT_H_

#include <string>
#include <utility>
#include <vector>

#include "runtime/status.h"

namespace hvd {
namespace launcher {

// A host and how many ranks it may run. `host` is the address other ranks reach it
// by; it becomes HVD_GLOO_HOSTNAME.
struct HostSlots {
  std::string host;
  int slots = 0;
};

// What every rank of the job shares.
struct JobEndpoint {
  std::string store_addr;    // host:port of the TcpStoreServer.
  std::string store_secret;  // Presented by every store connection.
  std::string job_id;        // Distinguishes jobs in logs and keys.
};

struct RankPlacement {
  int rank = 0;
  std::string host;
  // Variables to set in the rank's environment, in a fixed order.
  std::vector<std::pair<std::string, std::string>> env;
};

// Places `num_ranks` ranks on `hosts`. Returns kInvalidArgument if a host has fewer
// than 1 slot or the hosts have fewer slots than ranks in all.
Status PlaceRanks(int num_ranks, const std::vector<HostSlots>& hosts, const JobEndpoint& job,
                  std::vector<RankPlacement>* out);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_CONTROLLER_LAUNCHER_RANK_PLACEMENT_H_
