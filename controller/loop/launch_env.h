// LaunchEnv: how a rank finds its place in the job when dprun did not start it.
//
// dprun gives each rank HVD_RANK and the rest of the layout, the store's address and a
// secret. A rank started by mpirun, srun or torchrun has that launcher's variables
// instead. DetectLaunchEnv reads them through an injected getenv (as
// RuntimeOptions::FromEnv does) and returns the HVD_* values they imply; Bootstrap
// (controller/loop/bootstrap.h, which hvd_init calls) overlays those on the environment and
// then calls FromEnv, so FromEnv stays the one reader of HVD_* variables.
//
// Which launcher (the first that matches; the innermost launcher sets the most specific
// variables, so torchrun inside srun is torchrun):
//   HVD_RANK set      dprun, or a hand-made environment: nothing is detected.
//   torchrun          RANK, WORLD_SIZE, LOCAL_RANK (and LOCAL_WORLD_SIZE) set.
//   Open MPI          OMPI_COMM_WORLD_RANK set (with _SIZE, _LOCAL_RANK, _LOCAL_SIZE).
//   PMI               PMI_RANK and PMI_SIZE set: MPICH's and Intel MPI's mpiexec (Hydra),
//                     with the local rank and size in MPI_LOCALRANKID and MPI_LOCALNRANKS;
//                     without those, `srun --mpi=pmi2` (PMI_RANK is SLURM_PROCID), whose
//                     layout is Slurm's below.
//   Slurm (srun)      SLURM_PROCID and SLURM_LOCALID set (with SLURM_NODEID, the size from
//                     SLURM_STEP_NUM_TASKS or SLURM_NTASKS, and the per-node task counts
//                     from SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE).
//   PyTorchJob        RANK and WORLD_SIZE set without LOCAL_RANK: Kubeflow's PyTorchJob
//                     (one process per pod, with MASTER_ADDR and MASTER_PORT), or any
//                     torch.distributed "env://" launch of one process per node: local
//                     rank 0 of 1, cross rank = rank.
//   none of these     a single process: rank 0 of 1, no store.
// PMI comes before Slurm because mpiexec run inside an sbatch script inherits the batch
// step's SLURM_PROCID=0; so does Open MPI's mpirun, which comes first anyway.
//
// Cross rank and size follow Horovod: a rank's cross rank is its index, by global rank,
// among the ranks with the same local rank. Slurm's per-node counts and torchrun's
// GROUP_RANK/GROUP_WORLD_SIZE give it directly; for Open MPI (and torchrun-style
// environments without GROUP_*) the ranks exchange their local ranks through the store.
//
// The store rule (docs/multi-node.md): rank 0 serves the store in-process, the others
// connect to it, retrying until HVD_TIMEOUT.
//   host  HVD_STORE_ADDR's host; else MASTER_ADDR (any launcher); else the first host of
//         SLURM_STEP_NODELIST / SLURM_JOB_NODELIST / SLURM_NODELIST (Slurm, a step across
//         nodes: a node's name need not resolve on itself, loopback does); else the
//         first host of the hostfile mpirun was given through the environment
//         (OMPI_MCA_orte_default_hostfile, PRTE_MCA_prte_default_hostfile: the MPI
//         Operator's /etc/mpi/hostfile; HYDRA_HOST_FILE for mpiexec), where rank 0 runs,
//         when this node can read it; else 127.0.0.1 when every rank is on one node
//         (local size == size); else an error asking for MASTER_ADDR or HVD_STORE_ADDR.
//   port  HVD_STORE_ADDR's port; else HVD_STORE_PORT; else MASTER_PORT + 1 (any
//         launcher: torch.distributed's own store holds MASTER_PORT); else 20000 +
//         (SLURM_JOB_ID * 10 + SLURM_STEP_ID) % 10000 (Slurm); else 20000 + the job id
//         % 10000 (Open MPI: OMPI_MCA_ess_base_jobid, or a hash of PMIX_NAMESPACE);
//         else, for PMI on one node, 20000 + the pid of the node's Hydra proxy
//         (hydra_pmi_proxy or pmi_proxy, the nearest such ancestor) % 10000, which every
//         rank of the job on that node shares; else an error asking for HVD_STORE_PORT
//         or HVD_STORE_ADDR.
//   Rank 0 listens on the host itself when it is a numeric address, on 127.0.0.1 for
//   "localhost", and on every interface (0.0.0.0) for any other name, because a node's
//   own name often resolves to a loopback address on that node.
//   secret  HVD_STORE_SECRET if set, else none: without dprun there is nobody to make
//         one up, so an empty secret is accepted in these modes only. Set one (the same
//         on every rank) wherever the store port is reachable by others.
//
// Gloo's address: in a job that spans nodes (local size < size) with neither
// HVD_GLOO_HOSTNAME nor HVD_GLOO_IFACE set, each rank binds the source address of its
// route to the store host (a UDP connect(), which sends nothing); a loopback result in
// such a job is an error that asks for HVD_GLOO_IFACE.
#ifndef HVD_CONTROLLER_LOOP_LAUNCH_ENV_H_
#define HVD_CONTROLLER_LOOP_LAUNCH_ENV_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/options.h"
#include "runtime/common/status.h"

namespace hvd {

// What detection reads besides the environment, injected for tests.
struct LaunchProbes {
  // The pid of this process's nearest ancestor named one of `names` (its comm, as in
  // /proc/PID/stat), or 0 if none. Empty: walks /proc.
  std::function<int(const std::vector<std::string>& names)> ancestor_pid;
  // Reads a whole file; false if it cannot. Empty: reads the file system.
  std::function<bool(const std::string& path, std::string* text)> read_file;
};

struct LaunchEnv {
  // "torchrun", "Open MPI", "PMI", "Slurm" or "PyTorchJob"; empty when nothing was detected (dprun,
  // or a single process), in which case every other field is empty too.
  std::string launcher;
  // HVD_* values to overlay on the environment: HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK,
  // HVD_LOCAL_SIZE, HVD_CROSS_RANK and HVD_CROSS_SIZE (when known), HVD_STORE_ADDR.
  std::map<std::string, std::string> vars;
  // Rank 0 serves the store on listen_host:listen_port.
  bool serve_store = false;
  std::string listen_host;
  int listen_port = 0;
  // The store's host as the other ranks reach it (for the Gloo address route).
  std::string store_host;
  // Cross rank and size are not in the environment: exchange local ranks via the store.
  bool exchange_cross_ranks = false;
  // Gloo needs an address other nodes can reach, and none was given.
  bool needs_gloo_address = false;

  // A getenv that answers from `vars` first, then from `base` (::getenv if empty).
  // The returned function refers to this LaunchEnv, which must outlive it.
  RuntimeOptions::GetEnv Overlay(const RuntimeOptions::GetEnv& base = nullptr) const;
};

// Detects the launcher from `getenv_fn` (::getenv if empty) and fills *out. Returns
// kInvalidArgument naming the variable when a launcher's variable is malformed, missing
// or inconsistent (a rank not below the size, say), or when the store's address cannot
// be worked out.
// `probes` answers what the environment does not (empty members: the real ones).
Status DetectLaunchEnv(const RuntimeOptions::GetEnv& getenv_fn, LaunchEnv* out,
                       const LaunchProbes& probes = {});

// Horovod's cross rank of `rank` and cross size, given every rank's local rank.
void CrossRanks(const std::vector<int>& local_ranks, int rank, int* cross_rank, int* cross_size);

// Slurm's compressed per-node task counts, "2(x3),1" -> {2, 2, 2, 1}.
Status ParseSlurmTasksPerNode(const std::string& text, std::vector<int>* counts);

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01". Empty for an
// empty list.
std::string FirstSlurmHost(const std::string& nodelist);

// The first host of an Open MPI or Hydra hostfile ("host slots=N", "host:N", "#"
// comments); empty if it names none.
std::string FirstHostfileHost(const std::string& text);

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_LAUNCH_ENV_H_
