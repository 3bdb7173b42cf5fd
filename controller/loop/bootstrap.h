// Bootstrap: starts this process's Runtime from the environment its launcher gave it,
// which is all that hvd_init does. Bootstrap::Start takes these steps, in order:
//   1. DetectLaunchEnv (controller/loop/launch_env.h): another launcher's variables (mpirun,
//      srun, torchrun) become HVD_* ones, overlaid on the environment;
//   2. RuntimeOptions::FromEnv over that overlay;
//   3. ChooseGlooAddress, when the job spans nodes and no address was given;
//   4. OpenJobStore: the job's store (rank 0 serves it when another launcher started
//      the job);
//   5. ExchangeCrossRanks, when the launcher does not give them, then Validate;
//   6. NCCL_SOCKET_IFNAME defaults to HVD_GLOO_IFACE (--network-interface), unless
//      NCCL's own variable is set;
//   7. Runtime::Create in this start's scope, keys::InitScope(job_id, generation);
//      under dprun its waits also end when dprun records a dead rank, and a failed
//      start names that rank (NewAbortableStore, keys::kLauncherAbortReason); and a
//      rank whose dprun dies ends itself (Runtime::OnStoreLost);
//   8. keys::Started(rank) := the pid, in the launcher's view (dprun's
//      --start-timeout waits for it);
//   9. the process sets of HVD_PROCESS_SETS, in order (ids 1, 2, ...).
// Every variable is read through BootstrapEnv::getenv, so tests boot runtimes from a
// map; the steps' I/O helpers are below, for the tests of each.
#ifndef HVD_CONTROLLER_LOOP_BOOTSTRAP_H_
#define HVD_CONTROLLER_LOOP_BOOTSTRAP_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "controller/loop/launch_env.h"
#include "runtime/common/options.h"
#include "runtime/common/status.h"
#include "runtime/store/store.h"
#include "runtime/store/tcp_store.h"

namespace hvd {

class Runtime;

// Under dprun, how often a wait of hvd_init looks for a rank that died.
constexpr std::chrono::milliseconds kLauncherCheckPeriod{250};
// A rank whose launcher died gets this long between its SIGTERM and its SIGKILL.
constexpr std::chrono::seconds kOrphanGrace{5};
// hvd_shutdown of a failed job waits up to this long for the other ranks to leave the
// store this process serves (Bootstrap::LingerForStoreClients).
constexpr std::chrono::seconds kStoreLingerOnFailure{3};

// The process environment as Bootstrap sees it.
struct BootstrapEnv {
  // Reads a variable (null: unset). Empty: ::getenv.
  RuntimeOptions::GetEnv getenv;
  // Sets a variable for libraries that read the environment themselves (NCCL), only
  // when getenv says it is unset. Empty: ::setenv without overwriting.
  std::function<void(const char* name, const char* value)> setenv;
};

// What a process keeps from one runtime to the next: the store server and the
// generation. Not thread-safe: the caller serialises Start (the C API holds its
// lock). Destroying it stops the store server, which other ranks may still be using:
// keep it for the process's life (the C API's default instance is never destroyed).
class Bootstrap {
 public:
  explicit Bootstrap(BootstrapEnv env = {});
  ~Bootstrap();

  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  // Takes the steps above and hands over the running runtime. Any failure returns
  // the step's status (a malformed variable: kInvalidArgument naming it) and leaves
  // *out untouched; a runtime created before the failing step is shut down. The
  // generation moves on only on success, so every rank of a job counts its starts
  // alike. A store server that rank 0 started stays up either way, and every later
  // Start reuses it: it outlives Runtime::Shutdown, so the other ranks can still
  // finish their own shutdown through it.
  Status Start(std::unique_ptr<Runtime>* out);

  // How many runtimes Start has started: the next one's generation.
  int generation() const { return generation_; }

  // When this process serves the job's store (rank 0 under srun, mpirun, Ray ...: no
  // dprun), waits until no other process is connected to it or `limit` passes, so
  // that the other ranks of a failed job can still read its first failure
  // (FailureDiagnosis) before this process exits and takes the store with it. Returns
  // at once otherwise. The C API calls it from hvd_shutdown when the runtime failed.
  void LingerForStoreClients(std::chrono::milliseconds limit) const;

  // Elastic jobs (HVD_ELASTIC_ID set by dprun --min-np): the dprun generation the last
  // Start joined (-1: none yet, or not elastic). Start joins the latest generation
  // newer than that one that assigns this worker, waiting up to HVD_ELASTIC_TIMEOUT
  // (600 s) for dprun to publish it (and asking for one, keys::kElasticResetRequest,
  // after a generation it ran); its rank, size and the rest come from there.
  // kShutDown if that generation leaves this worker out.
  int64_t elastic_generation() const { return elastic_generation_; }
  // Whether dprun has published a generation newer than the one joined (ranks were
  // added or lost): the workers should reset (shutdown, then Start). One store call.
  Status ElasticUpdatePending(bool* pending) const;

 private:
  struct ElasticAssignment {
    int64_t generation = -1;
    int topology[6] = {};  // rank, size, local rank, local size, cross rank, cross size
    std::string job_id;    // HVD_JOB_ID.g<generation>
    // `base` with this assignment's HVD_RANK ... HVD_CROSS_SIZE and HVD_JOB_ID.
    RuntimeOptions::GetEnv Overlay(RuntimeOptions::GetEnv base) const;
  };
  Status JoinElastic(const std::shared_ptr<Store>& store, const RuntimeOptions& options,
                     ElasticAssignment* out);

  BootstrapEnv env_;
  int64_t elastic_generation_ = -1;
  std::shared_ptr<Store> elastic_store_;
  std::unique_ptr<TcpStoreServer> store_server_;
  int generation_ = 0;
};

// Sets options->gloo_hostname when launch.needs_gloo_address: the source address of
// the route to the store host. It needs no other rank, so a rank that cannot work out
// its address fails on its own, before any rank depends on the store.
Status ChooseGlooAddress(const LaunchEnv& launch, RuntimeOptions* options);

// Gives this rank its store: an in-memory one for a job of one without a store address;
// for rank 0 of a detected launch, the TcpStoreServer it serves (started into *server,
// which the caller keeps for the process's life, or reused if already there);
// otherwise a connection to options.store_addr, retried until options.timeout.
Status OpenJobStore(const LaunchEnv& launch, const RuntimeOptions& options,
                    std::unique_ptr<TcpStoreServer>* server, std::shared_ptr<Store>* store);

// When launch.exchange_cross_ranks, sets options->cross_rank and cross_size from every
// rank's local rank, exchanged through `store` (keys under "hvd_launch/"; rank 0
// gathers them and publishes the list). Then validates *options.
Status ExchangeCrossRanks(const LaunchEnv& launch, Store& store, RuntimeOptions* options);

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_BOOTSTRAP_H_
