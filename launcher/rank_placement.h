// RankPlacement: which host each rank runs on and the environment it gets.
//
// Placement is a pure function of the host list and the job's store endpoint, kept
// apart from spawning: a local job passes one host; a `-H host:slots` job passes
// several, and the launcher spawns each placement locally or over ssh.
//
// Ranks fill hosts in order: host 0 gets ranks 0..slots0-1, and so on. As in Horovod,
// a rank's local rank is its index on its host, local size the number of ranks there,
// cross rank the index of its host among the hosts that have a rank with the same local
// rank, and cross size the number of such hosts.
#ifndef HVD_LAUNCHER_RANK_PLACEMENT_H_
#define HVD_LAUNCHER_RANK_PLACEMENT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

// A host and how many ranks it may run. `host` is the name dprun was given (the ssh
// destination); `address` is the address other ranks reach it by, which becomes
// HVD_GLOO_HOSTNAME (empty: `host` itself).
struct HostSlots {
  std::string host;
  int slots = 0;
  std::string address;
};

// What every rank of the job shares.
struct JobEndpoint {
  std::string store_addr;    // host:port of the TcpStoreServer.
  std::string store_secret;  // Presented by every store connection.
  std::string job_id;        // Distinguishes jobs in logs and keys.
  // --network-interface: set as HVD_GLOO_IFACE and NCCL_SOCKET_IFNAME when not empty.
  std::string network_interface;
  // torch.distributed's env:// rendezvous, as torchrun sets it: MASTER_ADDR and
  // MASTER_PORT, each set when not empty (empty: the user's own, from dprun's
  // environment, carries over).
  std::string master_addr;
  std::string master_port;
};

// Where a rank stands in its job (see the file comment for the terms).
struct RankTopology {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;
  int cross_rank = 0, cross_size = 1;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// A rank's topology as variables: HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE,
// HVD_CROSS_RANK, HVD_CROSS_SIZE (the runtime's), then the same values under
// horovodrun's names, HOROVOD_RANK ... HOROVOD_CROSS_SIZE, and HOROVOD_HOSTNAME =
// `host`, as horovodrun sets them: scripts written for horovodrun read them before
// or without init (Horovod's own tests do); then torchrun's RANK, WORLD_SIZE,
// LOCAL_RANK and LOCAL_WORLD_SIZE, which torch.distributed's env:// rendezvous
// reads. The runtime reads only the HVD_ ones.
EnvVars TopologyVariables(const RankTopology& t, const std::string& host);

struct RankPlacement {
  int rank = 0;
  int host_index = 0;  // Index into the host list.
  std::string host;
  // Variables to set in the rank's environment, in a fixed order.
  std::vector<std::pair<std::string, std::string>> env;
};

// Places `num_ranks` ranks on `hosts`. Returns kInvalidArgument if a host has fewer
// than 1 slot or the hosts have fewer slots than ranks in all.
Status PlaceRanks(int num_ranks, const std::vector<HostSlots>& hosts, const JobEndpoint& job,
                  std::vector<RankPlacement>* out);

// The variables dprun passes on beyond the placement's (remote ranks get only these
// and the placement's; local ones inherit dprun's whole environment anyway): as
// horovodrun, every variable of `environment` ("NAME=value" entries, dprun's own)
// but those of this login and machine (BASH_FUNC_*, OLDPWD, PWD, SHLVL, _, HOSTNAME,
// HOME, USER, LOGNAME, SHELL, MAIL, TERM, SSH_*, *CUDA_VISIBLE_DEVICES) and names that
// are not identifiers; then each -x flag, "VAR" (its value in `environment`, even one
// of those; skipped if unset there) or "VAR=VALUE". A later entry replaces an earlier
// one of the same name. While the environment's share exceeds `budget` bytes
// ("NAME=value" each), its largest variables are left out, named in *left_out (not
// HVD_*, HOROVOD_*, NCCL_* or one -x names): a remote rank's variables travel on one
// ssh command line, which Linux limits to 128 KiB (kRemoteEnvBudget).
constexpr size_t kRemoteEnvBudget = 64 << 10;
EnvVars ForwardedVariables(const std::vector<std::string>& x_flags,
                           const std::vector<std::string>& environment,
                           size_t budget = SIZE_MAX, std::vector<std::string>* left_out = nullptr);

// `base` with `overrides` appended, dropping base entries that `overrides` names.
EnvVars MergeVariables(const EnvVars& base, const EnvVars& overrides);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_RANK_PLACEMENT_H_
