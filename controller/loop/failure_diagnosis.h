// FailureDiagnosis: names the cause when the job fails, so that every rank reports
// the same one. "Connection closed by peer" on rank 3 rarely says which rank
// died, or why; this class finds out through the store:
//   - Heartbeat: each rank bumps its counter (keys::Alive) twice a second on a
//     thread of its own, so that after a timeout the others can tell which rank
//     stopped: gone, frozen, or stuck in a long call.
//   - Diagnose: a lost peer or a timeout becomes the launcher's record of the rank
//     that died (keys::kLauncherAbortReason, when dprun runs the job), else the
//     ranks whose heartbeat stopped, else this rank's own view.
//   - AgreeOnFirstFailure: the first rank to fail records its diagnosis in the
//     store (keys::kAbortCount, keys::kAbortReason); the others report that one as
//     the cause and what they saw themselves after it. It is also left where the
//     launcher looks (keys::kJobFailure), so dprun's cause line names it rather than
//     the first rank to exit because of it.
// Store calls are bounded; when the store is gone each rank's own view stands.
//
// Ownership and threads. The stores are shared with the runtime. Diagnose and
// AgreeOnFirstFailure block (for up to about 2.5 s and 2 s) and may be called
// from any thread; StartHeartbeat and StopHeartbeat from one owner thread.
#ifndef HVD_CONTROLLER_LOOP_FAILURE_DIAGNOSIS_H_
#define HVD_CONTROLLER_LOOP_FAILURE_DIAGNOSIS_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/store/store.h"

namespace hvd {

class FailureDiagnosis {
 public:
  // `store` is the job's store (scoped to this runtime), shared by the `size`
  // ranks; `launcher_store`, when not null, the launcher's unscoped view.
  FailureDiagnosis(int rank, int size, std::shared_ptr<Store> store,
                   std::shared_ptr<Store> launcher_store);
  // Stops the heartbeat.
  ~FailureDiagnosis();

  FailureDiagnosis(const FailureDiagnosis&) = delete;
  FailureDiagnosis& operator=(const FailureDiagnosis&) = delete;

  // Starts the heartbeat thread ("hvd-heartbeat"); nothing for a job of one rank.
  void StartHeartbeat();
  // Called once, on the heartbeat thread, when a beat fails: the job's store is gone
  // or unreachable (the heartbeat then stops). Until one is set, the heartbeat keeps
  // trying. May be set at any time.
  void SetStoreLostHandler(std::function<void(const Status&)> handler);
  // Called once, on the heartbeat thread, when two beats in a row find that the
  // launcher has recorded a dead rank (LauncherReported): a rank waiting on a live peer that
  // itself waits on the dead one would otherwise learn of it only at HVD_TIMEOUT.
  // May be set at any time.
  void SetLauncherReportHandler(std::function<void(const Status&)> handler);
  // Stops it, waiting for the thread. Idempotent.
  void StopHeartbeat();

  // kRemoteError with the launcher's record of a rank that died
  // (keys::kLauncherAbortReason), if there is one now; else OK. One store round trip.
  Status LauncherReported() const;

  // Names the cause of a failure this rank saw. kRemoteError and kTimeout keep
  // their code and gain the launcher's reason or the silent ranks, with this
  // rank's view in parentheses; other codes only gain "rank <r>: ", and so do all
  // when another rank has recorded the job's first failure (keys::kAbortReason):
  // then it returns at once, without waiting on the launcher or the heartbeats.
  Status Diagnose(const Status& status);
  // The first diagnosis recorded in the store wins; returns the one to report:
  // `mine` when it was first (or the store failed), else the first one's code and
  // message followed by "[the job's first failure; then <mine>]".
  Status AgreeOnFirstFailure(const Status& mine);

  // Leaves `failure` for the launcher (keys::kJobFailure) unless a failure is there
  // already: one the job cannot continue after (AgreeOnFirstFailure's, or a tensor
  // failed because a rank has shut down). When another rank is recording one, waits
  // (up to 2 s) until it is there, so no rank exits before dprun has the cause.
  void RecordJobFailure(const Status& failure);

  // The ranks other than this one whose heartbeat did not move within ~1.5 s
  // (a rank whose counter the store could not read is left out). Blocks that long.
  std::vector<int> SilentRanks();

 private:
  void Heartbeat();

  const int rank_;
  const int size_;
  const std::shared_ptr<Store> store_;
  const std::shared_ptr<Store> launcher_store_;
  std::thread heartbeat_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool heartbeat_stop_ = false;  // guarded by mu_
  std::function<void(const Status&)> store_lost_;        // guarded by mu_
  std::function<void(const Status&)> launcher_report_;  // guarded by mu_; null once called
};

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_FAILURE_DIAGNOSIS_H_
