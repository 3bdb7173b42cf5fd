#include "controller/loop/launch_env.h"

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
#include <fstream>
#include <sstream>
#include <system_error>

#include "runtime/store/net_address.h"

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

// MPICH's and Intel MPI's mpiexec (Hydra): PMI_RANK, PMI_SIZE, MPI_LOCALRANKID and
// MPI_LOCALNRANKS. Cross ranks are exchanged.
Status PmiLayout(const GetEnv& env, Layout* l) {
  const std::string who = "PMI (mpiexec)";
  HVD_RETURN_IF_ERROR(Required(env, who, {"PMI_RANK"}, 0, &l->rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"PMI_SIZE"}, 1, &l->size));
  HVD_RETURN_IF_ERROR(Required(env, who, {"MPI_LOCALRANKID"}, 0, &l->local_rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"MPI_LOCALNRANKS"}, 1, &l->local_size));
  l->names = "PMI_RANK, PMI_SIZE";
  return Status::OK();
}

// Kubeflow's PyTorchJob (and any env:// launch of one process per node): RANK and
// WORLD_SIZE only. Every process is alone on its node.
Status PyTorchJobLayout(const GetEnv& env, Layout* l) {
  const std::string who = "PyTorchJob";
  HVD_RETURN_IF_ERROR(Required(env, who, {"RANK"}, 0, &l->rank));
  HVD_RETURN_IF_ERROR(Required(env, who, {"WORLD_SIZE"}, 1, &l->size));
  l->names = "RANK, WORLD_SIZE";
  l->local_rank = 0;
  l->local_size = 1;
  l->cross_rank = l->rank;
  l->cross_size = l->size;
  l->cross_known = true;
  return Status::OK();
}

// Picks the launcher from the environment and reads its layout; *launcher stays empty
// when none is detected.
Status DetectLayout(const GetEnv& env, std::string* launcher, Layout* l) {
  const bool torch_env = env("RANK") != nullptr && env("WORLD_SIZE") != nullptr;
  const bool slurm = env("SLURM_PROCID") != nullptr && env("SLURM_LOCALID") != nullptr;
  const bool pmi = env("PMI_RANK") != nullptr && env("PMI_SIZE") != nullptr;
  if (torch_env && env("LOCAL_RANK") != nullptr) {
    *launcher = "torchrun";
    return TorchrunLayout(env, l);
  }
  if (env("OMPI_COMM_WORLD_RANK") != nullptr) {
    *launcher = "Open MPI";
    return OpenMpiLayout(env, l);
  }
  if (pmi && (env("MPI_LOCALRANKID") != nullptr || !slurm)) {
    *launcher = "PMI";
    return PmiLayout(env, l);
  }
  if (slurm) {
    *launcher = "Slurm";
    HVD_RETURN_IF_ERROR(SlurmLayout(env, l));
    if (pmi && std::string(env("PMI_RANK")) != env("SLURM_PROCID"))
      return Status::InvalidArgument(std::string("Slurm: PMI_RANK=") + env("PMI_RANK") +
                                     " differs from SLURM_PROCID=" + env("SLURM_PROCID") +
                                     " (a launcher inside srun that sets neither "
                                     "MPI_LOCALRANKID nor OMPI_COMM_WORLD_RANK)");
    return Status::OK();
  }
  if (torch_env) {
    *launcher = "PyTorchJob";
    return PyTorchJobLayout(env, l);
  }
  return Status::OK();
}

// The first host of the hostfile that the launcher's environment names and this node
// can read; empty otherwise. *var is the variable that named it.
std::string HostfileHost(const GetEnv& env, const std::string& launcher, const LaunchProbes& probes,
                         std::string* var) {
  if (launcher != "Open MPI" && launcher != "PMI") return "";
  const std::vector<const char*> names =
      launcher == "Open MPI" ? std::vector<const char*>{"OMPI_MCA_orte_default_hostfile",
                                                        "PRTE_MCA_prte_default_hostfile",
                                                        "OMPI_MCA_prte_default_hostfile"}
                             : std::vector<const char*>{"HYDRA_HOST_FILE"};
  for (const char* n : names) {
    const char* path = env(n);
    if (path == nullptr || *path == '\0') continue;
    *var = std::string(n) + "=" + path;
    std::string text;
    if (!probes.read_file(path, &text)) return "";
    return FirstHostfileHost(text);
  }
  return "";
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
                     const LaunchProbes& probes, std::string* host, int* port) {
  host->clear();
  *port = 0;
  uint64_t job_number = 0;
  if (const char* addr = env("HVD_STORE_ADDR")) {
    return ParseHostPort(addr, host, port).Prepend("HVD_STORE_ADDR");
  }
  // MASTER_ADDR (torch.distributed's) names rank 0's node under any launcher.
  if (const char* master = env("MASTER_ADDR")) {
    *host = master;
  } else if (launcher == "Slurm" && l.local_size < l.size) {
    // A step on one node needs no name: loopback (below), which always resolves.
    const char* list =
        FirstSet(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    if (list != nullptr) *host = FirstSlurmHost(list);
  }
  std::string hostfile;
  if (host->empty() && l.local_size < l.size)
    *host = HostfileHost(env, launcher, probes, &hostfile);
  if (host->empty() && l.local_size == l.size) *host = "127.0.0.1";
  if (host->empty())
    return Status::InvalidArgument(
        launcher +
        " launch across nodes: set MASTER_ADDR to rank 0's node (and MASTER_PORT, or "
        "HVD_STORE_PORT), or HVD_STORE_ADDR to host:port on rank 0's node (rank 0 serves the "
        "store there); this is rank " +
        std::to_string(l.rank) + " of " + std::to_string(l.size) + ", " +
        std::to_string(l.local_size) + " on this node" +
        (hostfile.empty() ? std::string()
                          : "; " + hostfile + " is not readable here or names no host"));

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
    *port = kDerivedPortBase +
            static_cast<int>((static_cast<int64_t>(job) * 10 + step) % kDerivedPortSpan);
  } else if (launcher == "Open MPI" &&
             JobNumber(env, {"OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}, &job_number)) {
    // mpirun gives every job its own id: one port per job, the same on every rank.
    *port = kDerivedPortBase + static_cast<int>(job_number % kDerivedPortSpan);
  } else if (launcher == "PMI" && l.local_size == l.size &&
             probes.ancestor_pid({"hydra_pmi_proxy", "pmi_proxy"}) > 0) {
    // One node: every rank is a child of the same Hydra proxy, whose pid is unique.
    *port =
        kDerivedPortBase + probes.ancestor_pid({"hydra_pmi_proxy", "pmi_proxy"}) % kDerivedPortSpan;
  } else {
    return Status::InvalidArgument(launcher +
                                   " launch: set HVD_STORE_PORT (or HVD_STORE_ADDR) "
                                   "to the port rank 0 serves the job's store on");
  }
  return Status::OK();
}

// The real LaunchProbes::ancestor_pid: follows parent pids through /proc/PID/stat.
int AncestorPid(const std::vector<std::string>& names) {
  int pid = static_cast<int>(::getppid());
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return 0;
    const std::string comm = stat.substr(open + 1, close - open - 1);
    if (std::find(names.begin(), names.end(), comm) != names.end()) return pid;
    std::istringstream rest(stat.substr(close + 1));
    std::string state;
    int parent = 0;
    if (!(rest >> state >> parent)) return 0;
    pid = parent;
  }
  return 0;
}

bool ReadWholeFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream all;
  all << in.rdbuf();
  *text = all.str();
  return true;
}

}  // namespace

RuntimeOptions::GetEnv LaunchEnv::Overlay(const RuntimeOptions::GetEnv& base) const {
  GetEnv fallback = base ? base : GetEnv([](const char* n) { return std::getenv(n); });
  return [this, fallback](const char* name) -> const char* {
    auto it = vars.find(name);
    return it != vars.end() ? it->second.c_str() : fallback(name);
  };
}

Status DetectLaunchEnv(const RuntimeOptions::GetEnv& getenv_fn, LaunchEnv* out,
                       const LaunchProbes& given_probes) {
  GetEnv env = getenv_fn ? getenv_fn : GetEnv([](const char* n) { return std::getenv(n); });
  LaunchProbes probes = given_probes;
  if (!probes.ancestor_pid) probes.ancestor_pid = AncestorPid;
  if (!probes.read_file) probes.read_file = ReadWholeFile;
  *out = LaunchEnv();
  if (env("HVD_RANK") != nullptr) return Status::OK();
  Layout l;
  std::string launcher;
  HVD_RETURN_IF_ERROR(DetectLayout(env, &launcher, &l));
  if (launcher.empty()) return Status::OK();
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
    HVD_RETURN_IF_ERROR(StoreEndpoint(env, launcher, l, probes, &e.store_host, &port));
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

std::string FirstHostfileHost(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    if (host.front() != '[') return host.substr(0, host.find(':'));  // "host:N" (Hydra)
    const size_t close = host.find(']');  // "[fd00::2]:4": the address inside
    return close == std::string::npos ? "" : host.substr(1, close - 1);
  }
  return "";
}

}  // namespace hvd
