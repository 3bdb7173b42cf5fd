#include "launcher/rank_placement.h"

#include <algorithm>

namespace hvd {
namespace launcher {

EnvVars TopologyVariables(const RankTopology& t, const std::string& host) {
  const std::pair<const char*, int> values[] = {
      {"RANK", t.rank},           {"SIZE", t.size},
      {"LOCAL_RANK", t.local_rank}, {"LOCAL_SIZE", t.local_size},
      {"CROSS_RANK", t.cross_rank}, {"CROSS_SIZE", t.cross_size},
  };
  EnvVars vars;
  for (const char* prefix : {"HVD_", "HOROVOD_"})
    for (const auto& [name, value] : values)
      vars.emplace_back(prefix + std::string(name), std::to_string(value));
  vars.emplace_back("HOROVOD_HOSTNAME", host);
  const std::pair<const char*, int> torchrun[] = {
      {"RANK", t.rank},
      {"WORLD_SIZE", t.size},
      {"LOCAL_RANK", t.local_rank},
      {"LOCAL_WORLD_SIZE", t.local_size},
  };
  for (const auto& [name, value] : torchrun) vars.emplace_back(name, std::to_string(value));
  return vars;
}

Status PlaceRanks(int num_ranks, const std::vector<HostSlots>& hosts, const JobEndpoint& job,
                  std::vector<RankPlacement>* out) {
  if (num_ranks < 1)
    return Status::InvalidArgument("cannot place " + std::to_string(num_ranks) + " ranks");
  int total_slots = 0;
  for (const HostSlots& h : hosts) {
    if (h.slots < 1)
      return Status::InvalidArgument("host '" + h.host + "' has " + std::to_string(h.slots) +
                                     " slots; each host needs at least 1");
    total_slots += h.slots;
  }
  if (total_slots < num_ranks)
    return Status::InvalidArgument(std::to_string(num_ranks) + " ranks do not fit in the " +
                                   std::to_string(total_slots) + " slots of " +
                                   std::to_string(hosts.size()) + " host(s)");

  // Ranks per used host, in host order.
  std::vector<int> used;
  for (int left = num_ranks, i = 0; left > 0; ++i) {
    used.push_back(std::min(left, hosts[i].slots));
    left -= used.back();
  }

  std::vector<RankPlacement> placements;
  int rank = 0;
  for (size_t host = 0; host < used.size(); ++host) {
    for (int local_rank = 0; local_rank < used[host]; ++local_rank, ++rank) {
      int cross_rank = 0, cross_size = 0;
      for (size_t other = 0; other < used.size(); ++other) {
        if (used[other] <= local_rank) continue;
        if (other < host) ++cross_rank;
        ++cross_size;
      }
      RankPlacement p;
      p.rank = rank;
      p.host_index = static_cast<int>(host);
      p.host = hosts[host].host;
      const std::string& address =
          hosts[host].address.empty() ? hosts[host].host : hosts[host].address;
      p.env = TopologyVariables(
          {rank, num_ranks, local_rank, used[host], cross_rank, cross_size}, p.host);
      const EnvVars job_vars = {
          {"HVD_STORE_ADDR", job.store_addr},
          {"HVD_STORE_SECRET", job.store_secret},
          {"HVD_GLOO_HOSTNAME", address},
          {"HVD_JOB_ID", job.job_id},
      };
      p.env.insert(p.env.end(), job_vars.begin(), job_vars.end());
      if (!job.master_addr.empty()) p.env.emplace_back("MASTER_ADDR", job.master_addr);
      if (!job.master_port.empty()) p.env.emplace_back("MASTER_PORT", job.master_port);
      if (!job.network_interface.empty()) {
        p.env.emplace_back("HVD_GLOO_IFACE", job.network_interface);
        p.env.emplace_back("NCCL_SOCKET_IFNAME", job.network_interface);
      }
      placements.push_back(std::move(p));
    }
  }
  *out = std::move(placements);
  return Status::OK();
}

namespace {

void SetVariable(EnvVars* vars, const std::string& name, const std::string& value) {
  for (auto& [n, v] : *vars) {
    if (n == name) {
      v = value;
      return;
    }
  }
  vars->emplace_back(name, value);
}

// What describes this login or this machine rather than the job: not passed on to
// ranks on other hosts (horovodrun's list, BASH_FUNC_*, OLDPWD and *CUDA_VISIBLE_DEVICES,
// and the login's own variables, so that a remote user's HOME and the like stay theirs).
bool IsForwarded(const std::string& name) {
  static const char* const kLocal[] = {"OLDPWD", "PWD",     "SHLVL", "_",    "HOSTNAME", "HOME",
                                       "USER",   "LOGNAME", "SHELL", "MAIL", "TERM"};
  for (const char* local : kLocal)
    if (name == local) return false;
  for (const char* prefix : {"BASH_FUNC_", "SSH_"})
    if (name.rfind(prefix, 0) == 0) return false;
  const std::string gpus = "CUDA_VISIBLE_DEVICES";
  if (name.size() >= gpus.size() && name.compare(name.size() - gpus.size(), gpus.size(), gpus) == 0)
    return false;
  return name.find_first_not_of(
             "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
         std::string::npos;
}

}  // namespace

EnvVars ForwardedVariables(const std::vector<std::string>& x_flags,
                           const std::vector<std::string>& environment, size_t budget,
                           std::vector<std::string>* left_out) {
  EnvVars vars;
  auto lookup = [&](const std::string& name, std::string* value) {
    for (const std::string& e : environment) {
      if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
        *value = e.substr(name.size() + 1);
        return true;
      }
    }
    return false;
  };
  for (const std::string& e : environment) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    const std::string name = e.substr(0, eq);
    if (IsForwarded(name)) SetVariable(&vars, name, e.substr(eq + 1));
  }
  // Over the budget: the largest of the environment's own variables go, not dprun's
  // (HVD_*, HOROVOD_*, NCCL_*) nor those -x names.
  auto bytes = [](const std::pair<std::string, std::string>& v) {
    return v.first.size() + v.second.size() + 1;
  };
  auto droppable = [&](const std::pair<std::string, std::string>& v) {
    for (const char* prefix : {"HVD_", "HOROVOD_", "NCCL_"})
      if (v.first.rfind(prefix, 0) == 0) return false;
    for (const std::string& flag : x_flags)
      if (flag.substr(0, flag.find('=')) == v.first) return false;
    return true;
  };
  size_t total = 0;
  for (const auto& v : vars) total += bytes(v);
  while (total > budget) {
    auto largest = vars.end();
    for (auto it = vars.begin(); it != vars.end(); ++it)
      if (droppable(*it) && (largest == vars.end() || bytes(*it) > bytes(*largest))) largest = it;
    if (largest == vars.end()) break;
    total -= bytes(*largest);
    if (left_out != nullptr) left_out->push_back(largest->first);
    vars.erase(largest);
  }
  for (const std::string& flag : x_flags) {
    const size_t eq = flag.find('=');
    std::string value;
    if (eq != std::string::npos)
      SetVariable(&vars, flag.substr(0, eq), flag.substr(eq + 1));
    else if (lookup(flag, &value))
      SetVariable(&vars, flag, value);
  }
  return vars;
}

EnvVars MergeVariables(const EnvVars& base, const EnvVars& overrides) {
  EnvVars out;
  for (const auto& [name, value] : base) {
    bool replaced = false;
    for (const auto& o : overrides) replaced = replaced || o.first == name;
    if (!replaced) out.emplace_back(name, value);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

}  // namespace launcher
}  // namespace hvd
