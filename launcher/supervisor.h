// Supervisor: runs a job's ranks from their spawn to their end, in one poll loop on the
// launcher's thread.
//
// Run() spawns the ranks (RanksToSpawn paces remote logins), then loops, waking at
// least every kMaxPoll, until every rank is reaped, its pipes are drained and its
// process group is empty. Each round it:
//   - checks the deadlines: the start timeout (a running rank that has not set
//     hvd/started/<rank> in the store fails the job, exit status 1) and the teardown's
//     (teardown.h);
//   - spawns the ranks still pending, while the job runs;
//   - relays the ranks' output lines (rank_output.h);
//   - acts on dprun's signals (signal_scope.h): a first SIGINT or SIGTERM fails the job
//     (exit status 128 + the signal) and starts the teardown; a second one sends SIGKILL;
//   - reaps every child that has exited, ranks and adopted orphans alike, and reports
//     each rank's exit as the teardown judges it. The cause is also stored under
//     keys::kLauncherAbortReason, where the other ranks' runtimes look when they lose a
//     peer, so each reports the real cause; so is a rank's exit with code 0 while
//     others still run. The cause line names the failure the runtimes agreed on
//     (keys::kJobFailure: a frozen rank, a rank that left) when there is one, else the
//     first failing exit, after the rank that left early if one did.
// A signal goes to each rank's process group: the rank and whatever it started. SIGTERM
// comes with SIGCONT, so a stopped (frozen) rank acts on it now; for a remote rank,
// SIGTERM is the close of its ssh's stdin (remote_spawner.h) and SIGKILL goes to its ssh.
// Once every rank has exited, whatever they left running is terminated the same way.
//
// Elastic jobs (--min-np): a rank that fails while enough remain does not end the job:
// the others rejoin in a new generation that dprun publishes in the store
// (keys::kElasticGeneration), as do new workers started on free slots of discovered
// hosts (--host-discovery-script, polled every second) and workers asking for a reset;
// workers on vanished hosts get SIGTERM. The ranks of later generations print under
// their first rank's prefix.
//
// The supervisor owns the calling process's children while it runs: it reaps any child
// that exits. It uses the store and the signals it is given, which must outlive it.
#ifndef HVD_LAUNCHER_SUPERVISOR_H_
#define HVD_LAUNCHER_SUPERVISOR_H_

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "launcher/elastic_membership.h"
#include "launcher/job_report.h"
#include "launcher/launcher_options.h"
#include "launcher/rank_process.h"
#include "launcher/signal_scope.h"
#include "launcher/teardown.h"
#include "runtime/store/store.h"

namespace hvd {
namespace launcher {

// The supervising loop wakes at least this often.
constexpr std::chrono::milliseconds kMaxPoll{100};
// Elastic jobs: how long a rank's request for a new generation (its runtime failed
// while dprun saw nobody die) waits before dprun publishes one. A rank that raised
// an exception shuts its runtime down (which fails the others' collectives, and
// they ask) before its process exits; within the wait dprun reaps it, and the one
// generation that follows leaves it out, instead of a first one that includes it
// and a second one once it has gone.
constexpr std::chrono::milliseconds kResetRequestWait{1000};

class Supervisor {
 public:
  // Relayed stdout lines go to `out_fd`; stderr lines and dprun's messages to the
  // reporter's fd. `signals` must be initialised.
  // `local_address` is the Gloo address of ranks on this machine (JobSetup's), which
  // an elastic job's new local workers get.
  Supervisor(const LauncherOptions& options, std::vector<RankSpec> ranks, RankCommand command,
             std::string local_address, SignalScope& signals, Store& store, int out_fd,
             const Reporter& reporter);
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the job to its end, closes every rank's streams and returns dprun's exit
  // status: 0, or the cause's (see Teardown::Judge and the header comment).
  int Run();

 private:
  using Clock = std::chrono::steady_clock;

  void Loop();
  void SpawnPending();
  void CheckDeadlines(Clock::time_point now);
  void CheckStarted();
  int PollTimeoutMs() const;
  void HandleSignals();
  void Reap();
  void OnRankExit(RankProcess& r, int status);
  std::string CauseOf(const RankProcess& r, int status);
  static bool LostContact(const RankProcess& r, int status);
  static std::string LostContactMessage(const RankProcess& r, int status);
  // Reports `why` and hands the failure to the teardown.
  void Fail(const std::string& why, int exit_code, bool let_others_report = false);
  void SignalAll(int sig);
  bool AnyRunning() const;
  bool Finished() const;

  // Elastic jobs (elastic_membership.h). ElasticExit handles a rank's exit while the
  // job runs; false leaves it to the usual path.
  bool ElasticExit(size_t index, int status);
  void PublishGeneration();
  void ElasticTick(Clock::time_point now);
  void Discover();
  // Whether a new worker can start on `host`; if not, `why` says so.
  bool CanStartOn(const std::string& host, std::string* why) const;
  // A worker on `host` (CanStartOn), spawned by the next SpawnPending; false (and
  // `why`) if the host's address does not resolve.
  bool AddWorker(const std::string& host, std::string* why);
  // SIGTERM to a rank's process group (and SIGCONT, so a stopped rank acts on it); for
  // a remote rank, the close of its ssh's stdin.
  void Terminate(RankProcess& r);
  // Gives each worker not yet started the topology variables of its place in the
  // coming generation (AddWorker copies rank 0's).
  void PlaceNewWorkers();

  const LauncherOptions& options_;
  std::vector<RankProcess> ranks_;
  const RankCommand command_;
  const std::string local_address_;
  SignalScope& signals_;
  Store& store_;
  const int out_fd_;
  const Reporter& reporter_;
  Teardown teardown_;
  int interrupts_ = 0;
  // The first rank that exited with code 0 while others still ran, described.
  std::string left_early_;
  // Elastic jobs only.
  std::unique_ptr<ElasticMembership> elastic_;
  std::vector<std::string> worker_ids_;  // ranks_[i]'s HVD_ELASTIC_ID
  int64_t reset_requests_seen_ = 0;
  // A request waiting (kResetRequestWait): the generation it was made in, and when
  // dprun publishes the next unless one came meanwhile. -1: none waits.
  int64_t reset_requested_in_ = -1;
  Clock::time_point reset_request_due_{};
  Clock::time_point next_discovery_{};
  std::set<std::string> refused_hosts_;  // Discovered hosts refused, reported once each.
  bool start_check_pending_ = false;
  Clock::time_point start_deadline_;
};

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_SUPERVISOR_H_
