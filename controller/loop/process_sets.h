// ProcessSets: this rank's registry of process sets. Set 0 is the global set
// (every rank); sets added later get ids 1, 2, ... in the order every rank adds
// them. For each live set it holds the members (global ranks, ascending) and, when
// this rank is one of them, the set's Communicator; it remembers removed ids so
// that using one says so. It does no communication: Runtime::AddProcessSet and
// RemoveProcessSet agree with the other ranks first, and the background loop
// applies the change at the same point of the global order on every rank.
//
// Errors (kInvalidArgument, the texts users see): "unknown process set <id>",
// "process set <id> has been removed", "rank <r> is not a member of process set
// <id> (ranks a, b)", and the ones CheckNewSet lists.
//
// Threads. Every method is thread-safe (one mutex). global() reads no lock: the
// global set is added once, before other threads use the registry, and stays.
#ifndef HVD_CONTROLLER_LOOP_PROCESS_SETS_H_
#define HVD_CONTROLLER_LOOP_PROCESS_SETS_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "controller/loop/communicator.h"
#include "runtime/common/status.h"

namespace hvd {

class ProcessSets {
 public:
  // `rank` is this process's global rank, of `size`.
  ProcessSets(int rank, int size) : rank_(rank), size_(size) {}

  ProcessSets(const ProcessSets&) = delete;
  ProcessSets& operator=(const ProcessSets&) = delete;

  // Sorts `ranks` and checks that they make a set: at least one rank, no repeats,
  // all in 0..size-1; kInvalidArgument listing the ranks otherwise.
  Status CheckNewSet(std::vector<int>* ranks) const;
  // Reserves the next id for a set about to be added.
  int NextId();

  // Adds set `id` with members `ranks`, and this rank's communicator of it (null
  // when this rank is not a member). Adding set 0 (once, first) makes `comm` the
  // global communicator.
  void Add(int id, std::vector<int> ranks, std::shared_ptr<Communicator> comm);
  // Removes set `id` and remembers it as removed; returns this rank's communicator
  // of it (null if none). Removing an id that is not live only remembers it.
  std::shared_ptr<Communicator> Remove(int id);

  // The members of live set `id`, or why there is no such set.
  Status Members(int id, std::vector<int>* ranks) const;
  // Like Members; also this rank's rank in the set (-1 if not a member). Either
  // output may be null.
  Status Info(int id, int* rank_in_set, std::vector<int>* ranks) const;
  // This rank's communicator of set `id`, or why there is none.
  Status Find(int id, std::shared_ptr<Communicator>* out) const;

  // The communicators of every set this rank belongs to, global set first, then in
  // the order they were added.
  std::vector<std::shared_ptr<Communicator>> Communicators() const;
  // The global set's communicator (null before it is added); it lives as long as
  // the registry.
  Communicator* global() const { return global_; }

 private:
  // Why `id` is not a live set, or OK; under mu_.
  Status CheckLive(int id) const;

  const int rank_;
  const int size_;
  Communicator* global_ = nullptr;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<Communicator>> comms_;  // comms_[0] is the global set
  std::map<int, std::vector<int>> members_;           // every live set, member or not
  std::set<int> removed_;
  int next_id_ = 1;
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_PROCESS_SETS_H_
