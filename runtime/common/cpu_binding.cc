#include "runtime/common/cpu_binding.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace hvd {

std::vector<int> CoresForLocalRank(const std::vector<int>& allowed, int local_rank,
                                   int local_size) {
  const size_t n = allowed.size();
  if (n == 0 || local_size < 1 || local_rank < 0 || local_rank >= local_size) return {};
  const size_t ls = static_cast<size_t>(local_size), lr = static_cast<size_t>(local_rank);
  if (n < ls) return {allowed[lr % n]};
  return std::vector<int>(allowed.begin() + lr * n / ls, allowed.begin() + (lr + 1) * n / ls);
}

std::string CpuListString(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

Status BindToCores(int local_rank, int local_size, std::vector<int>* cpus) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof(mask), &mask) != 0)
    return Status::Internal("HVD_BIND_TO=core: cannot read this process's CPUs: " + ErrnoText(errno));
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) allowed.push_back(c);
  *cpus = CoresForLocalRank(allowed, local_rank, local_size);
  if (cpus->empty())
    return Status::Internal("HVD_BIND_TO=core: no CPU for local rank " + std::to_string(local_rank) +
                            " of " + std::to_string(local_size));
  cpu_set_t bound;
  CPU_ZERO(&bound);
  for (int c : *cpus) CPU_SET(c, &bound);
  // Every thread, so that threads started before hvd_init (a framework's pools)
  // follow too. A thread that exits meanwhile is no error.
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr)
    return Status::Internal("HVD_BIND_TO=core: cannot list this process's threads: " + ErrnoText(errno));
  Status status;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(e->d_name));
    if (::sched_setaffinity(tid, sizeof(bound), &bound) != 0 && errno != ESRCH && status.ok())
      status = Status::Internal("HVD_BIND_TO=core: cannot bind thread " + std::to_string(tid) +
                                " to CPUs " + CpuListString(*cpus) + ": " + ErrnoText(errno));
  }
  ::closedir(dir);
  return status;
}

int CallingThreadCpuCount() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof(mask), &mask) != 0) return 0;
  return CPU_COUNT(&mask);
}

}  // namespace hvd
