// Negotiation: the coordinator's pure bookkeeping (see docs/protocol.md).
//
// The coordinator (rank 0 of a communicator) feeds every rank's requests into a
// MessageTable. A tensor is ready once every rank has submitted it; ready tensors
// come out in the order they became ready, which is the order every rank executes
// them. BuildResponse checks that the ranks agree (collective, dtype, shape, op,
// scale factors, root, device) and returns either the collective's response or an
// error response whose message names the tensor, the ranks and the values.
//
// No I/O and no clock: time is passed in, so all of it is unit-tested directly.
// Not thread-safe; only the background thread of rank 0 uses it.
#ifndef HVD_CONTROLLER_NEGOTIATION_H_
#define HVD_CONTROLLER_NEGOTIATION_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "controller/messages.pb.h"
#include "runtime/common/types.h"

namespace hvd {

using Clock = std::chrono::steady_clock;

// A tensor some ranks have submitted and others have not.
struct PendingTensor {
  std::string name;
  std::vector<int> submitted;  // ranks that have submitted, ascending
  std::vector<int> missing;    // ranks that have not
  Clock::time_point first_seen;
};

class MessageTable {
 public:
  explicit MessageTable(int size);

  // Records `request` from `rank`. A second request for the same name from the same
  // rank before the tensor completed is recorded as a conflict and reported by
  // BuildResponse.
  void Add(int rank, const proto::Request& request, Clock::time_point now);

  // Ranks that have joined count as having submitted every allreduce.
  void SetJoined(const std::set<int>& joined);

  // Names that became ready since the last call, in the order they became ready.
  std::vector<std::string> TakeReady();

  // Builds the response for ready tensor `name` and forgets it. The response's
  // counts/rank_dims describe the tensor; on disagreement it is RESPONSE_ERROR.
  proto::Response BuildResponse(const std::string& name);

  // Fails every pending tensor that `rank` has not submitted (that rank will never
  // submit again, e.g. it shut down). Returns their error responses.
  std::vector<proto::Response> FailWaitingOn(int rank, int error_code, const std::string& why);

  // Fails pending non-allreduce tensors that wait on a joined rank (they can never
  // complete: a joined rank only stands in for allreduce).
  std::vector<proto::Response> FailUnjoinable();

  // After BuildResponse found a grouped call whose number of tensors differs across
  // ranks: fails the pending tensors of those groups too (the extra members that
  // some ranks will never submit), with kMismatch naming the ranks and the sizes.
  std::vector<proto::Response> FailBrokenGroups();

  // Forgets pending tensor `name` and returns an error response for it.
  proto::Response Fail(const std::string& name, int error_code, const std::string& message);

  // Tensors submitted by some ranks but not all, oldest first.
  std::vector<PendingTensor> Pending() const;

  // For each ready tensor, when its last rank submitted it relative to its first:
  // the straggler report reads these through this hook (rank, lag).
  struct Arrival {
    int last_rank = -1;
    Clock::duration lag{};
    OpType op = OpType::kAllreduce;  // the collective (the first submitting rank's)
    // When each rank submitted it; time_point{} for a rank that had joined.
    std::vector<Clock::time_point> arrivals;
  };
  const Arrival& last_arrival() const { return last_arrival_; }

  size_t pending_count() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<proto::Request> requests;  // by rank; request_rank < 0 when absent
    std::vector<bool> have;
    std::vector<Clock::time_point> arrivals;
    int count = 0;
    bool duplicate = false;
    int duplicate_rank = -1;
    Clock::time_point first_seen;
    Clock::time_point last_seen;
    int last_rank = -1;
  };

  bool IsReady(const Entry& e) const;
  // Fills resp->split_matrix for an alltoall; returns an error message if a rank's
  // splits are invalid.
  std::string BuildSplitMatrix(const std::string& name, const std::vector<proto::Request>& requests,
                               proto::Response* resp) const;

  int size_;
  std::map<std::string, Entry> entries_;
  std::vector<std::string> ready_;
  std::set<int> joined_;
  Arrival last_arrival_;
  // (rank, that rank's group id) of grouped calls found to differ in size, with the
  // message for their other members; emptied by FailBrokenGroups.
  std::map<std::pair<int, int64_t>, std::string> broken_groups_;
};

// Returns the error message for requests that disagree, or "" if they agree.
// Exposed for tests; BuildResponse uses it.
std::string CheckAgreement(const std::string& name, const std::vector<proto::Request>& requests);

}  // namespace hvd

#endif  // HVD_CONTROLLER_NEGOTIATION_H_
