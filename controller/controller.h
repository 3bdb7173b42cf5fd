// Controller: one communicator's negotiation cycle (see docs/protocol.md).
//
// Every rank calls Cycle once per background-loop iteration with the requests it
// enqueued since the last cycle. Rank 0 (the coordinator) gathers every rank's
// RequestList, feeds the MessageTable, builds the responses for tensors that are
// now ready on every rank, plans fusion, and broadcasts one ResponseList; every
// rank returns that same list and executes it in order.
//
// The coordinator also:
//   - turns a rank's self-reported failure into an abort that names the rank;
//   - fails tensors that wait on a rank that has shut down;
//   - ends the loop (ResponseList.shutdown) once every rank has asked to shut down;
//   - runs the stall inspector over tensors some ranks have not submitted.
// Not thread-safe: only the background thread calls it.
#ifndef HVD_CONTROLLER_CONTROLLER_H_
#define HVD_CONTROLLER_CONTROLLER_H_

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "controller/autotuner.h"
#include "controller/messages.pb.h"
#include "controller/negotiation.h"
#include "controller/response_cache.h"
#include "controller/straggler.h"
#include "runtime/common/control_channel.h"
#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {

struct ControllerOptions {
  int64_t fusion_threshold = 128 << 20;
  // Response cache entries (0 disables the cache).
  int64_t cache_capacity = 1024;
  // The cycle time the coordinator announces to every rank.
  std::chrono::microseconds cycle_time{1000};
  // Tune fusion_threshold and cycle_time online (coordinator only; see autotuner.h).
  bool autotune = false;
  // Where the autotuner writes each scored setting as CSV ("" for nowhere).
  std::string autotune_log;
  std::chrono::milliseconds autotune_window{1000};
  // Warn about a tensor some ranks have submitted and others not after this long.
  std::chrono::milliseconds stall_check{60000};
  // Fail such a tensor on every rank after this long (0: only warn).
  std::chrono::milliseconds stall_shutdown{0};
  // Where warnings go (stderr by default). Injected so tests can capture them.
  std::function<void(const std::string&)> log;
  // Called on the coordinator for each tensor when its last rank submitted it.
  std::function<void(const std::string& name, int last_rank, Clock::duration lag)> on_ready;
  // Called on the coordinator for each tensor that became ready, on the full path
  // or from the cache, with its collective, when the ranks submitted it (each
  // rank's time where the coordinator saw each rank's request, else the summary:
  // straggler.h's Arrivals) and when it became ready. Feeds the straggler report
  // and the timeline.
  std::function<void(const std::string& name, OpType op, const Arrivals& arrivals,
                     Clock::time_point ready, bool cached)>
      on_arrivals;
  // Communicators of at least this many ranks, over a channel with a word
  // all-reduce, run each cycle as a tree cycle (see Cycle); 0: never.
  int tree_cycle_ranks = 8;
};

class Controller {
 public:
  Controller(std::unique_ptr<ControlChannel> channel, ControllerOptions options);

  // One negotiation cycle. `now` comes from the caller's clock.
  //
  // At options.tree_cycle_ranks ranks or more (a channel with SupportsWordAllreduce)
  // the cycle is a *tree cycle*: one ControlChannel::AllreduceWords of a flag word
  // (some rank has full requests, a shutdown or an error to send, or the coordinator
  // needs a full cycle: NeedsFullCycle), the ranks' cache bits OR-ed and AND-ed (as
  // the OR of their complements) and a straggler word (max). When no flag is set,
  // every rank settles the cycle alone: the hits are the AND, fused with the last
  // announced threshold, which is what the coordinator would answer; the
  // coordinator keeps its records (entries some ranks set, arrivals) from the OR
  // and the AND. Nothing in such a cycle is linear in the number of ranks at any
  // rank. Otherwise the Gather and Broadcast follow, as below 8 ranks.
  Status Cycle(const proto::RequestList& mine, Clock::time_point now, proto::ResponseList* out);

  // The cache's fast path, before a request is built (a step's 1000 cached
  // tensors, every step): the request this rank cached for `name`, or null when
  // there is none or its bit is already pending. The caller compares its request
  // with it (ResponseCache::SameParameters' fields) and, when equal, calls
  // SendAsCacheBit(*index) instead of putting the request into the next Cycle's
  // list; that is what Cycle does with it. Otherwise the request goes to Cycle in
  // full as before.
  const proto::Request* CachedRequest(const std::string& name, uint32_t* index);
  void SendAsCacheBit(uint32_t index);

  int rank() const { return channel_->rank(); }
  int size() const { return channel_->size(); }

  // See ControlChannel::Abort.
  void Abort(const Status& why) { channel_->Abort(why); }

  // Counters since construction, for tests and benchmarks.
  struct Stats {
    int64_t cycles = 0;
    int64_t full_requests = 0;  // requests this rank sent in full
    int64_t cache_bits = 0;     // requests this rank sent as a cache bit
    int64_t cache_hits = 0;     // responses rebuilt from the cache
    int64_t cache_refills = 0;  // tensors cached again after their entry was evicted
    int64_t responses = 0;      // responses this rank was given to execute
    int64_t max_fused = 0;      // the most tensors one of them held
    int64_t hit_plans = 0;      // fusion plans built for cache hits (a repeated step reuses one)
    // Cycles each rank settled alone: from the exchanged lists at two ranks, from
    // the word all-reduce in a tree cycle.
    int64_t settled_alone = 0;
    int64_t tree_cycles = 0;  // tree cycles, settled alone or not
    // CPU time of the calling thread inside Cycle (waits that spin count, sleeps do
    // not), and the coordinator's part of it in Coordinate.
    int64_t cpu_ns = 0;
    int64_t coordinate_cpu_ns = 0;
  };
  const Stats& stats() const { return stats_; }

  // The cycle time announced by the coordinator in the last cycle (every rank
  // sleeps this long between cycles, so autotune's choice reaches all of them).
  std::chrono::microseconds cycle_time() const { return announced_cycle_time_; }

  // True when requests this rank has sent (as cache bits or in full) still wait for
  // other ranks after the last cycle. Entries enqueued since that cycle began, not
  // yet sent, do not count.
  bool waiting_on_others() const;

 private:
  // Cycle at two ranks over a channel with Exchange: the lists cross in one trip;
  // when both carry only cache bits and rank 0 has nothing to add, each rank
  // settles the hits itself (the same ones, as the coordinator would); otherwise
  // rank 0 coordinates and its responses cross in a second trip.
  Status ExchangeCycle(proto::RequestList* send, Clock::time_point now, proto::ResponseList* out);
  // The Gather, Coordinate and Broadcast of a cycle, with this rank's list `send`.
  Status GatherCycle(const proto::RequestList& send, Clock::time_point now,
                     proto::ResponseList* out);
  // A tree cycle (see Cycle).
  Status TreeCycle(const proto::RequestList& send, Clock::time_point now,
                   proto::ResponseList* out);
  // The coordinator's records of a tree cycle settled alone, from the OR (`any`) and
  // AND (`all`) of the ranks' cache bits: entries some ranks set (for
  // NeedsFullCycle), and arrivals of the hits (the straggler word names the rank
  // that set its latest bit in the latest cycle).
  void RecordTreeCycle(const uint64_t* any, const uint64_t* all, size_t words,
                       uint64_t straggler, Clock::time_point now);
  // Rank 0 at two ranks, and in a tree cycle: whether this cycle needs the
  // coordinator's responses (see RequestList.full_cycle).
  bool NeedsFullCycle(Clock::time_point now) const;
  // Applies `in`, the response list every rank runs this cycle, into `out`, and
  // counts it.
  void Finish(const proto::ResponseList& in, proto::ResponseList* out);
  // Coordinator side of Cycle: all lists in, one response list out.
  void Coordinate(const std::vector<proto::RequestList>& lists, Clock::time_point now,
                  proto::ResponseList* out);
  void InspectStalls(Clock::time_point now, std::vector<proto::Response>* errors);
  // Coordinator: says once that the cache is smaller than the tensors in use.
  void WarnIfCacheTooSmall(int64_t refilled);
  // Response cache, every rank: bits or full requests out; hits and inserts in.
  void PrepareRequests(const proto::RequestList& mine, proto::RequestList* send);
  void ApplyResponses(const proto::ResponseList& in, proto::ResponseList* out);
  // Response cache, coordinator: which entries are ready everywhere or must go.
  void CoordinateCache(const std::vector<proto::RequestList>& lists, Clock::time_point now,
                       proto::ResponseList* out);

  std::unique_ptr<ControlChannel> channel_;
  ControllerOptions options_;
  MessageTable table_;
  std::vector<bool> shut_down_;
  std::set<int> joined_;
  ResponseCache cache_;
  // Cache entries this rank has asked for by bit and not yet run (one bit per
  // entry); their requests are the cached ones, resent in full if dropped.
  std::vector<uint64_t> pending_bits_;
  std::map<std::string, proto::Request> own_requests_;     // sent in full, not yet run
  std::vector<proto::Request> resend_;                     // to send in full next cycle
  std::map<uint32_t, Clock::time_point> partial_since_;    // coordinator: bits not all set
  // Coordinator: when each rank first set each cache bit, for the entries marked
  // in arrival_bits_ (an entry's vector stays allocated for reuse).
  std::vector<std::vector<Clock::time_point>> bit_arrivals_;
  std::vector<uint64_t> arrival_bits_;
  // The cycle in which this rank last sent a cache bit for the first time (the
  // straggler word of a tree cycle), and the word all-reduce's buffer.
  int64_t last_new_bit_cycle_ = 0;
  std::vector<uint64_t> tree_words_;
  // Fused plans of recent cycles' cache hits, each with what it was built from: a
  // step that hits the same entries as one of these, with the cache and the
  // threshold unchanged, reuses its plan. Several, since a training step's
  // tensors alternate with others (a metric's all-reduce, a barrier's cycle).
  struct HitPlan {
    google::protobuf::RepeatedPtrField<proto::Response> responses;
    std::vector<uint64_t> bits;
    uint64_t generation = ~uint64_t{0};
    int64_t threshold = -1;
    uint64_t used = 0;  // hit_plan_clock_ when last used; 0: never built
  };
  static constexpr size_t kHitPlans = 4;
  // The plan for `hit_bits` (built from the cached responses if none matches).
  const HitPlan& PlanForHits(const google::protobuf::RepeatedField<uint64_t>& hit_bits,
                             int64_t threshold);
  HitPlan hit_plans_[kHitPlans];
  uint64_t hit_plan_clock_ = 0;
  Stats stats_;
  bool warned_small_cache_ = false;  // coordinator: the cache-size warning is given once
  std::unique_ptr<Autotuner> autotuner_;  // coordinator with autotune only
  std::chrono::microseconds announced_cycle_time_;
  // The fusion threshold the coordinator announced last (-1: none yet), which
  // cycles settled alone plan with.
  int64_t announced_threshold_ = -1;
  Clock::time_point last_stall_check_{};
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_CONTROLLER_H_
