#include "controller/loop/launch_env.h"

#include "runtime/store/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace hvd {
namespace {

using GetEnv = RuntimeOptions::GetEnv;

// Store ports derived from a launcher's job id (Slurm, Open MPI) fall in
// [kDerivedPortBase, kDerivedPortBase + kDerivedPortSpan).
constexpr int kDerivedPortBase = 20000;
constexpr int kDerivedPortSpan = 10000;

Status Bad(const std::string& var, const std::string& value, const std::string& expected) {
  return Status::InvalidArgument("environment variable " + var + "='" + value + "' is not " +
                                 expected);
}

// A non-negative decimal integer below 2^31.
Status ParseCount(const char* var, const char* text, int64_t min, int* out) {
  const std::string s = text;
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
    return Bad(var, s, "a non-negative integer");
  const long long v = std::strtoll(text, nullptr, 10);
  if (v > INT32_MAX) return Bad(var, s, "an integer below 2^31");
  if (v < min) return Bad(var, s, "an integer >= " + std::to_string(min));
  *out = static_cast<int>(v);
  return Status::OK();
}

// Reads the first set variable of `names`; kInvalidArgument naming them all if none is.
Status Required(const GetEnv& env, const std::string& launcher,
                std::initializer_list<const char*> names, int64_t min, int* out,
                std::string* which = nullptr) {
  std::string list;
  for (const char* n : names) {
    if (const char* v = env(n)) {
      if (which != nullptr) *which = n;
      return ParseCount(n, v, min, out);
    }
    list += (list.empty() ? "" : " or ") + std::string(n);
  }
  return Status::InvalidArgument(launcher + " launch detected but " + list + " is not set");
}

const char* FirstSet(const GetEnv& env, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = env(n)) return v;
  return nullptr;
}

// The layout that the launcher's variables give, before the store is worked out.
struct Layout {
  int rank = 0, size = 1, local_rank = 0, local_size = 1, cross_rank = 0, cross_size = 1;
  bool cross_known = false;
  std::string names;  // The variables that gave rank/size, for error messages.
};

Status CheckLayout(const std::string& launcher, const Layout& l) {
  if (l.rank >= l.size)
    return Status::InvalidArgument(launcher + ": rank " + std::to_string(l.rank) +
                                   " is not below size " + std::to_string(l.size) + " (" + l.names +
                                   ")");
  if (l.local_rank >= l.local_size || l.local_size > l.size)
    return Status::InvalidArgument(launcher + ": local rank " + std::to_string(l.local_rank) +
                                   " and local size " + std::to_string(l.local_size) +
                                   " do not fit size " + std::to_string(l.size));
  return Status::OK();
}

Status TorchrunLayout(const GetEnv& env, Layout* l) {
  const std::string who = "torchrun";
  HVD_RETURN_IF_ERROR(Required(env, who, {"RANK"}, 0, &l->rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"WORLD_SIZE"}, 1, &l->size));
  HVD_RETURN_IF_ERROR(Required(env, who, {"LOCAL_RANK"}, 0, &l->local_rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"LOCAL_WORLD_SIZE"}, 1, &l->local_size));
  l->names = "RANK, WORLD_SIZE";
  if (env("GROUP_RANK") != nullptr && env("GROUP_WORLD_SIZE") != nullptr) {
    HVD_RETURN_IF_ERROR(Required(env, who, {"GROUP_RANK"}, 0, &l->cross_rank));
    HVD_RETURN_IF_ERROR(Required(env, who, {"GROUP_WORLD_SIZE"}, 1, &l->cross_size));
    if (l->cross_rank >= l->cross_size)
      return Status::InvalidArgument(
          "torchrun: GROUP_RANK=" + std::to_string(l->cross_rank) +
          " is not below GROUP_WORLD_SIZE=" + std::to_string(l->cross_size));
    l->cross_known = true;
  }
  return Status::OK();
}

Status OpenMpiLayout(const GetEnv& env, Layout* l) {
  const std::string who = "Open MPI";
  HVD_RETURN_IF_ERROR(Required(env, who, {"OMPI_COMM_WORLD_RANK"}, 0, &l->rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"OMPI_COMM_WORLD_SIZE"}, 1, &l->size));
  HVD_RETURN_IF_ERROR(Required(env, who, {"OMPI_COMM_WORLD_LOCAL_RANK"}, 0, &l->local_rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"OMPI_COMM_WORLD_LOCAL_SIZE"}, 1, &l->local_size));
  l->names = "OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE";
  return Status::OK();
}

Status SlurmLayout(const GetEnv& env, Layout* l) {
  const std::string who = "Slurm";
  HVD_RETURN_IF_ERROR(Required(env, who, {"SLURM_PROCID"}, 0, &l->rank));
  std::string size_var;
  HVD_RETURN_IF_ERROR(
      Required(env, who, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, 1, &l->size, &size_var));
  HVD_RETURN_IF_ERROR(Required(env, who, {"SLURM_LOCALID"}, 0, &l->local_rank));
  int node = 0;
  HVD_RETURN_IF_ERROR(Required(env, who, {"SLURM_NODEID"}, 0, &node));
  l->names = "SLURM_PROCID, " + size_var;
  const char* per_node_var = env("SLURM_STEP_TASKS_PER_NODE") != nullptr
                                 ? "SLURM_STEP_TASKS_PER_NODE"
                                 : "SLURM_TASKS_PER_NODE";
  const char* per_node = env(per_node_var);
  if (per_node == nullptr)
    return Status::InvalidArgument(
        "Slurm launch detected but SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS_PER_NODE is not set");
  std::vector<int> counts;
  HVD_RETURN_IF_ERROR(ParseSlurmTasksPerNode(per_node, &counts).Prepend(per_node_var));
  if (node >= static_cast<int>(counts.size()))
    return Status::InvalidArgument("Slurm: SLURM_NODEID=" + std::to_string(node) + " but " +
                                   per_node_var + "='" + per_node + "' lists " +
                                   std::to_string(counts.size()) + " node(s)");
  int64_t total = 0;
  for (int c : counts) total += c;
  if (total != l->size)
    return Status::InvalidArgument(std::string("Slurm: ") + per_node_var + "='" + per_node +
                                   "' adds up to " + std::to_string(total) + " tasks but " +
                                   size_var + " is " + std::to_string(l->size));
  l->local_size = counts[node];
  if (l->local_rank >= l->local_size)
    return Status::InvalidArgument("Slurm: SLURM_LOCALID=" + std::to_string(l->local_rank) +
                                   " is not below this node's " + std::to_string(l->local_size) +
                                   " task(s) in " + per_node_var);
  l->cross_rank = 0;
  l->cross_size = 0;
  for (size_t n = 0; n < counts.size(); ++n) {
    if (counts[n] <= l->local_rank) continue;
    if (static_cast<int>(n) < node) ++l->cross_rank;
    ++l->cross_size;
  }
  l->cross_known = true;
  return Status::OK();
}

// Works out the store's host and port by the rule in the header.
// A number for the launcher's job id in the first of `names` that is set: its
// decimal value, or a hash of its text. False if none is set.
bool JobNumber(const GetEnv& env, std::initializer_list<const char*> names, uint64_t* out) {
  const char* id = FirstSet(env, names);
  if (id == nullptr || *id == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(id, &end, 10);
  if (errno == 0 && end != id && *end == '\0') {
    *out = v;
    return true;
  }
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same text gives the same port
  for (const char* c = id; *c; ++c) h = (h ^ static_cast<unsigned char>(*c)) * 1099511628211ull;
  *out = h;
  return true;
}

Status StoreEndpoint(const GetEnv& env, const std::string& launcher, const Layout& l,
                     std::string* host, int* port) {
  host->clear();
  *port = 0;
  uint64_t job_number = 0;
  if (const char* addr = env("HVD_STORE_ADDR")) {
    return ParseHostPort(addr, host, port).Prepend("HVD_STORE_ADDR");
  }
  // MASTER_ADDR (torch.distributed's) names rank 0's node under any launcher.
  if (const char* master = env("MASTER_ADDR")) {
    *host = master;
  } else if (launcher == "Slurm") {
    const char* list =
        FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    if (list != nullptr) *host = FirstSlurmHost(list);
  }
  if (host->empty() && l.local_size == l.size) *host = "127.0.0.1";
  if (host->empty())
    return Status::InvalidArgument(launcher +
                                   " launch across nodes: set MASTER_ADDR to rank 0's node (and "
                                   "MASTER_PORT, or HVD_STORE_PORT), or HVD_STORE_ADDR to host:port "
                                   "on rank 0's node (rank 0 serves the store there)");

  if (const char* p = env("HVD_STORE_PORT")) {
    HVD_RETURN_IF_ERROR(ParseCount("HVD_STORE_PORT", p, 1, port));
    if (*port > 65535) return Bad("HVD_STORE_PORT", p, "a port in 1..65535");
  } else if (env("MASTER_PORT") != nullptr) {
    int master = 0;
    HVD_RETURN_IF_ERROR(ParseCount("MASTER_PORT", env("MASTER_PORT"), 1, &master));
    if (master >= 65535) return Bad("MASTER_PORT", env("MASTER_PORT"), "a port in 1..65534");
    *port = master + 1;
  } else if (launcher == "Slurm" && FirstSet(env, {"SLURM_JOB_ID", "SLURM_JOBID"}) != nullptr) {
    int job = 0, step = 0;
    HVD_RETURN_IF_ERROR(Required(env, "Slurm", {"SLURM_JOB_ID", "SLURM_JOBID"}, 0, &job));
    if (FirstSet(env, {"SLURM_STEP_ID", "SLURM_STEPID"}) != nullptr)
      HVD_RETURN_IF_ERROR(Required(env, "Slurm", {"SLURM_STEP_ID", "SLURM_STEPID"}, 0, &step));
    *port =
        kDerivedPortBase + static_cast<int>((static_cast<int64_t>(job) * 10 + step) % kDerivedPortSpan);
  } else if (launcher == "Open MPI" && JobNumber(env, {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"},
                                                 &job_number)) {
    // mpirun gives every job its own id: one port per job, the same on every rank.
    *port = kDerivedPortBase + static_cast<int>(job_number % kDerivedPortSpan);
  } else {
    return Status::InvalidArgument(launcher +
                                   " launch: set HVD_STORE_PORT (or HVD_STORE_ADDR) "
                                   "to the port rank 0 serves the job's store on");
  }
  return Status::OK();
}

}  // namespace

RuntimeOptions::GetEnv LaunchEnv::Overlay(const RuntimeOptions::GetEnv& base) const {
  GetEnv fallback = base ? base : GetEnv([](const char* n) { return std::getenv(n); });
  return [this, fallback](const char* name) -> const char* {
    auto it = vars.find(name);
    return it != vars.end() ? it->second.c_str() : fallback(name);
  };
}

Status DetectLaunchEnv(const RuntimeOptions::GetEnv& getenv_fn, LaunchEnv* out) {
  GetEnv env = getenv_fn ? getenv_fn : GetEnv([](const char* n) { return std::getenv(n); });
  *out = LaunchEnv();
  if (env("HVD_RANK") != nullptr) return Status::OK();
  Layout l;
  std::string launcher;
  if (env("RANK") != nullptr && env("WORLD_SIZE") != nullptr && env("LOCAL_RANK") != nullptr) {
    launcher = "torchrun";
    HVD_RETURN_IF_ERROR(TorchrunLayout(env, &l));
  } else if (env("OMPI_COMM_WORLD_RANK") != nullptr) {
    launcher = "Open MPI";
    HVD_RETURN_IF_ERROR(OpenMpiLayout(env, &l));
  } else if (env("SLURM_PROCID") != nullptr && env("SLURM_LOCALID") != nullptr) {
    launcher = "Slurm";
    HVD_RETURN_IF_ERROR(SlurmLayout(env, &l));
  } else {
    return Status::OK();
  }
  HVD_RETURN_IF_ERROR(CheckLayout(launcher, l));

  LaunchEnv e;
  e.launcher = launcher;
  e.vars["HVD_RANK"] = std::to_string(l.rank);
  e.vars["HVD_SIZE"] = std::to_string(l.size);
  e.vars["HVD_LOCAL_RANK"] = std::to_string(l.local_rank);
  e.vars["HVD_LOCAL_SIZE"] = std::to_string(l.local_size);
  if (l.cross_known) {
    e.vars["HVD_CROSS_RANK"] = std::to_string(l.cross_rank);
    e.vars["HVD_CROSS_SIZE"] = std::to_string(l.cross_size);
  } else {
    // Placeholders that pass validation until ExchangeCrossRanks fills them in.
    e.vars["HVD_CROSS_RANK"] = "0";
    e.vars["HVD_CROSS_SIZE"] = "1";
    e.exchange_cross_ranks = l.size > 1;
  }
  if (l.size > 1) {
    int port = 0;
    HVD_RETURN_IF_ERROR(StoreEndpoint(env, launcher, l, &e.store_host, &port));
    e.vars["HVD_STORE_ADDR"] = JoinStoreAddress(e.store_host, port);
    e.serve_store = l.rank == 0;
    e.listen_port = port;
    if (IsNumericAddress(e.store_host))
      e.listen_host = e.store_host;
    else if (e.store_host == "localhost")
      e.listen_host = "127.0.0.1";
    else
      e.listen_host = "0.0.0.0";
    e.needs_gloo_address = l.local_size < l.size && env("HVD_GLOO_HOSTNAME") == nullptr &&
                           env("HVD_GLOO_IFACE") == nullptr && env("HOROVOD_GLOO_IFACE") == nullptr;
  }
  *out = std::move(e);
  return Status::OK();
}

void CrossRanks(const std::vector<int>& local_ranks, int rank, int* cross_rank, int* cross_size) {
  const int mine = local_ranks[rank];
  *cross_rank = 0;
  *cross_size = 0;
  for (size_t r = 0; r < local_ranks.size(); ++r) {
    if (local_ranks[r] != mine) continue;
    if (static_cast<int>(r) < rank) ++*cross_rank;
    ++*cross_size;
  }
}

Status ParseSlurmTasksPerNode(const std::string& text, std::vector<int>* counts) {
  auto bad = [&] {
    return Status::InvalidArgument("'" + text + "' is not a task count list like \"2(x3),1\"");
  };
  std::vector<int> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    std::string count = item, repeat = "1";
    const size_t paren = item.find("(x");
    if (paren != std::string::npos) {
      if (item.back() != ')') return bad();
      count = item.substr(0, paren);
      repeat = item.substr(paren + 2, item.size() - paren - 3);
    }
    for (const std::string* s : {&count, &repeat})
      if (s->empty() || s->size() > 6 || s->find_first_not_of("0123456789") != std::string::npos)
        return bad();
    const int c = std::stoi(count), n = std::stoi(repeat);
    if (c < 1 || n < 1 || out.size() + n > 1000000) return bad();
    out.insert(out.end(), n, c);
    pos = end + 1;
  }
  if (out.empty()) return bad();
  *counts = std::move(out);
  return Status::OK();
}

std::string FirstSlurmHost(const std::string& nodelist) {
  // The first entry: up to the first comma outside brackets.
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == ',' && depth == 0) break;
    if (c == '[') ++depth;
    if (c == ']') --depth;
    entry += c;
  }
  // Each "[a-b,c]" becomes its first number, "a", keeping zero padding.
  std::string host;
  for (size_t i = 0; i < entry.size(); ++i) {
    if (entry[i] != '[') {
      host += entry[i];
      continue;
    }
    const size_t close = entry.find(']', i);
    if (close == std::string::npos) return host;
    const std::string range = entry.substr(i + 1, close - i - 1);
    host += range.substr(0, range.find_first_of("-,"));
    i = close;
  }
  return host;
}

}  // namespace hvd
