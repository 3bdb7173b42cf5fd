// JobKeys: every store key that more than one process (or more than one file) must
// spell alike, in one place.
//
// A job's store (runtime/store/store.h) is shared by dprun and every rank. Its keys
// live in scopes:
//
//   the launcher's view, as dprun sees the store (no prefix):
//     hvd/started/<rank>     set by a rank once hvd_init succeeded (its pid);
//                            dprun's --start-timeout waits for it
//     hvd/abort/reason       set by dprun: the first rank that died and how
//     hvd/straggler_report   set by rank 0 at shutdown for dprun --straggler-report
//     hvd/failure            set by the first rank to fail: "<status>: <cause>", as
//                            every rank reports it; dprun's cause line names it
//
//   a runtime's scope, "<job_id>/init<generation>/" (InitScope): everything one
//   hvd_init's ranks exchange, so a later hvd_init in the same job never reads an
//   earlier one's keys:
//     hvd_launch/local_rank/<rank>, hvd_launch/local_ranks   cross ranks worked out
//                            from the launcher's local ranks (controller/loop/launch_env.h)
//     host/tree/<rank>, host/all   where each rank runs: each rank's subtree of
//                            records, then all of them (runtime/transport/host_plane.h)
//     alive/<rank>           each rank's heartbeat counter
//     abort/count, abort/reason   the first failure, agreed by every rank
//     global/, ps<id>/       each communicator's own keys (CommunicatorScope); under
//                            them each transport keeps its own sub-scopes
#ifndef HVD_RUNTIME_COMMON_JOB_KEYS_H_
#define HVD_RUNTIME_COMMON_JOB_KEYS_H_

#include <cstdint>
#include <string>

namespace hvd {
namespace keys {

// --- The launcher's view.
inline std::string Started(int rank) { return "hvd/started/" + std::to_string(rank); }
constexpr char kLauncherAbortReason[] = "hvd/abort/reason";
constexpr char kStragglerReport[] = "hvd/straggler_report";
constexpr char kJobFailure[] = "hvd/failure";
constexpr char kJobFailureCount[] = "hvd/failure/count";  // the first to add 1 sets kJobFailure

// --- Elastic jobs (dprun --min-np): dprun numbers each membership of the job, a
// generation, from 0. For generation g it writes every member's assignment, then
// kElasticGeneration := g. A worker (HVD_ELASTIC_ID) joins the latest generation that
// assigns it; each generation's runtimes use ElasticScope(g) as their launcher view
// (the abort reason and the job failure above live under it, so a later generation
// never reads an earlier one's).
constexpr char kElasticGeneration[] = "hvd/elastic/generation";
inline std::string ElasticScope(int64_t generation) {
  return "hvd/elastic/" + std::to_string(generation) + "/";
}
// "rank size local_rank local_size cross_rank cross_size" of worker `id` in `generation`.
inline std::string ElasticAssignment(int64_t generation, const std::string& id) {
  return ElasticScope(generation) + "assign/" + id;
}
// ADDed by a worker whose runtime failed when dprun saw no rank die: dprun then
// publishes a new generation of the workers still running.
constexpr char kElasticResetRequest[] = "hvd/elastic/reset_request";

// --- A runtime's scope.
inline std::string InitScope(const std::string& job_id, int generation) {
  return (job_id.empty() ? "" : job_id + "/") + "init" + std::to_string(generation) + "/";
}
inline std::string LaunchLocalRank(int rank) { return "hvd_launch/local_rank/" + std::to_string(rank); }
constexpr char kLaunchLocalRanks[] = "hvd_launch/local_ranks";
inline std::string HostInfoTree(int rank) { return "host/tree/" + std::to_string(rank); }
constexpr char kHostInfoAll[] = "host/all";
inline std::string Alive(int rank) { return "alive/" + std::to_string(rank); }
constexpr char kAbortCount[] = "abort/count";
constexpr char kAbortReason[] = "abort/reason";
// Process set `id`'s communicator (0 is the global set).
inline std::string CommunicatorScope(int id) {
  return id == 0 ? "global/" : "ps" + std::to_string(id) + "/";
}

}  // namespace keys
}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_JOB_KEYS_H_
