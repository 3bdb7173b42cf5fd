// The host (CPU) plane of one communicator: the backend that moves host tensors and
// the control channel the coordinator cycles over, chosen from where the ranks are.
//
// At start every rank publishes a HostInfo (which machine and /dev/shm mount it
// sees, and how much of /dev/shm is free) and reads everyone's, so every rank holds
// the same table and, for each communicator, makes the same choice:
//
//   - all ranks on one host: the shared-memory backend and control channel
//     (runtime/transport/shm/shm_backend.h, runtime/transport/shm/shm_control_channel.h), no TCP at all;
//   - several hosts, each with the same number L > 1 of the ranks: a hierarchical
//     all-reduce (runtime/transport/hierarchical_backend.h) over shared memory inside each host
//     and Gloo across, the rest and the control channel over Gloo;
//   - otherwise (one rank per host, uneven hosts, HVD_CPU_OPERATIONS=gloo, or a
//     /dev/shm too small under "auto"): Gloo for everything.
#ifndef HVD_RUNTIME_TRANSPORT_HOST_PLANE_H_
#define HVD_RUNTIME_TRANSPORT_HOST_PLANE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "runtime/common/backend.h"
#include "runtime/common/control_channel.h"
#include "runtime/store/store.h"
#include "runtime/transport/allreduce_algorithm.h"
#include "runtime/transport/hierarchy_choice.h"

namespace hvd {

struct HostInfo {
  std::string id;        // ranks with equal ids share memory
  int64_t shm_free = 0;  // bytes free in /dev/shm
};

// This process's HostInfo. `id_override` (HVD_HOST_ID) replaces the id when set;
// the default id is the kernel's boot id plus the device and inode of /dev/shm.
HostInfo LocalHostInfo(const std::string& id_override);

// Publishes `mine` and reads every rank's, in rank order. Bounded by `timeout`.
// The records go up a tree of fan-out 16 in the store (each rank reads its
// children's subtrees and publishes its own, rank 0 publishes them all, and every
// rank reads that once): a few store calls at each rank, where reading every
// rank's record was size calls at each, size^2 at the store.
Status ExchangeHostInfo(Store* store, int rank, int size, const HostInfo& mine,
                        std::chrono::milliseconds timeout, std::vector<HostInfo>* all);

enum class HostPath { kGloo, kShm, kHierarchical };

// Where a communicator's ranks are: hosts numbered by first appearance in
// communicator order, and each rank's index among its host's ranks.
struct Placement {
  std::vector<int> host_of;   // per communicator rank
  std::vector<int> local_of;  // per communicator rank
  std::vector<int> host_size;  // ranks per host
  std::vector<int64_t> host_free;  // least /dev/shm free among a host's ranks
  int hosts() const { return static_cast<int>(host_size.size()); }
};
Placement PlaceRanks(const std::vector<int>& global_ranks, const std::vector<HostInfo>& info);

// Bytes of /dev/shm the shared-memory backend and control channel of `local_size`
// ranks take.
int64_t ShmBytesNeeded(int local_size);

// The path for `placement` under `mode` ("auto", "shm" or "gloo"). Under "shm", a
// /dev/shm too small is kInvalidUsage naming the host; under "auto" it is Gloo and
// `*note` says why.
Status ChooseHostPath(const std::string& mode, const Placement& placement, HostPath* out,
                      std::string* note);

struct HostPlaneOptions {
  std::shared_ptr<Store> store;  // scoped to the communicator
  std::shared_ptr<gloo::transport::Device> device;
  std::string name_prefix;  // names the shared-memory segments
  int rank = 0;             // in the communicator
  int size = 1;
  Placement placement;      // needed for kHierarchical
  HostPath path = HostPath::kGloo;
  // kHierarchical: which all-reduce each size runs (HierarchyChoice).
  HierarchyChoice::Mode hierarchy = HierarchyChoice::Mode::kAuto;
  // The Gloo backends' ring or halving-doubling choice (allreduce_algorithm.h).
  AllreduceAlgorithmOptions allreduce_algorithm;
  std::chrono::milliseconds timeout{30000};
  // Polled while the shared-memory segments wait for every rank to map them
  // (ShmMembership::interrupt). May be empty.
  std::function<Status()> interrupt;
};

struct HostPlane {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<ControlChannel> channel;
};

// Connects the chosen path; collective over the communicator.
Status ConnectHostPlane(const HostPlaneOptions& opts, HostPlane* out);

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_HOST_PLANE_H_
