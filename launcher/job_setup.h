// JobSetup: everything a job needs before its first rank starts.
//
// SetUpJob, in order:
//   1. makes the job's store secret (32 random bytes) and id (8), hex, from /dev/urandom;
//   2. chooses the addresses: the store listens on 127.0.0.1 when every host is this
//      machine; otherwise on the IPv4 address of --network-interface, or the source
//      address of the route to the first remote host (an elastic job with a discovery
//      script and --network-interface: that interface's, from the start). A host that is this machine gets
//      the store's address as its Gloo address; a remote host its own, resolved here;
//      torch.distributed's MASTER_ADDR is rank 0's host and MASTER_PORT a free port
//      there (when that host is this machine; else 29500 + a number from the job id
//      below 1000), each unless dprun's own environment sets it;
//   3. starts the TcpStoreServer there, on an ephemeral port (its log lines go to the
//      reporter's fd as "dprun: store: ...");
//   4. places the ranks (rank_placement.h) and marks each local or remote;
//   5. resolves the command on $PATH if any rank is local, and ssh if any is remote
//      (both, as far as they are found, for a job with a discovery script);
//   6. gives each rank its environment: the forwarded variables (HVD_*, HOROVOD_*,
//      NCCL_* and -x), those of dprun's own flags (FlagVariables), then the placement's.
//
// It starts no rank and no thread other than the store server's: call it after the
// launcher's signals are set up (signal_scope.h). On failure the returned Status says
// why and *exit_code is what dprun exits with: 127 when the command is not found, 1
// otherwise; `job` may then hold a started server, which its destructor stops.
#ifndef HVD_LAUNCHER_JOB_SETUP_H_
#define HVD_LAUNCHER_JOB_SETUP_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "launcher/job_report.h"
#include "launcher/launcher_options.h"
#include "launcher/rank_process.h"
#include "runtime/common/status.h"
#include "runtime/store/store.h"
#include "runtime/store/tcp_store.h"

namespace hvd {
namespace launcher {

struct JobSetup {
  std::unique_ptr<TcpStoreServer> server;
  std::shared_ptr<Store> store;  // The server's own client (TcpStoreServer::LocalStore).
  std::vector<RankSpec> ranks;   // In rank order.
  RankCommand command;
  // The address ranks on this machine use for Gloo: the store's (step 2).
  std::string local_address;
};

// True when ranks on `host` (a -H or discovered host, maybe "user@host") run here,
// without ssh: no user part, and IsLocalHost.
bool IsThisMachine(const std::string& host);

// `host` without its "user@" part: what ssh connects to and Gloo resolves.
std::string MachineOf(const std::string& host);

Status SetUpJob(const LauncherOptions& options, const Reporter& reporter, JobSetup* job,
                int* exit_code);

// The variables dprun's own flags give every rank: HVD_TIMELINE (--timeline),
// HVD_BIND_TO (--bind-to), HVD_STRAGGLER_REPORT=1 (--straggler-report) and those of
// horovodrun's tuning flags (LauncherOptions::flag_variables; the last of a name
// wins). Pure.
EnvVars FlagVariables(const LauncherOptions& options);

// `bytes` random bytes from /dev/urandom, hex-encoded (2 * bytes characters).
Status RandomHex(size_t bytes, std::string* out);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_JOB_SETUP_H_
