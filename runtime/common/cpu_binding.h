// CPU binding (HVD_BIND_TO=core, `dprun --bind-to core`): each rank of a host runs
// on its own share of the CPUs the job may use, instead of wherever the scheduler
// puts its threads.
//
// A rank has a caller thread and a background thread that hand each step's work to
// each other; bound together, they share a core's caches, and ranks stop landing on
// one core while another idles, which shortens a step of many small all-reduces
// on a busy machine (docs/benchmarks.md, "Ranks bound to cores"). Open MPI
// binds ranks to cores by default at 2 ranks; dprun leaves it off by
// default, since a rank's own threads (PyTorch's intra-op pool, data loaders) then
// share only its block of CPUs.
#ifndef HVD_RUNTIME_COMMON_CPU_BINDING_H_
#define HVD_RUNTIME_COMMON_CPU_BINDING_H_

#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {

// The CPUs that local rank `local_rank` of `local_size` gets from `allowed` (the
// CPUs this process may use, ascending): block local_rank of local_size contiguous,
// nearly equal blocks when there are at least as many CPUs as ranks, else the one
// CPU allowed[local_rank % allowed.size()] (ranks then share CPUs evenly).
std::vector<int> CoresForLocalRank(const std::vector<int>& allowed, int local_rank,
                                   int local_size);

// "0-3,8,10-11".
std::string CpuListString(const std::vector<int>& cpus);

// Binds every thread of this process, those already running included, to
// CoresForLocalRank(the calling thread's allowed CPUs, local_rank, local_size);
// threads created later inherit it. *cpus receives the CPUs. kInternal, naming the
// CPUs and the reason, if the kernel refuses.
Status BindToCores(int local_rank, int local_size, std::vector<int>* cpus);

// How many CPUs the calling thread may run on (0 if the kernel will not say). A
// wait that spins for another thread of the process gains nothing at 1: the
// thread it waits for shares the CPU (Work::Wait then sleeps at once).
int CallingThreadCpuCount();

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_CPU_BINDING_H_
