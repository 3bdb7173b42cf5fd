#include "controller/launcher/launcher_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "controller/launcher/host_list.h"

namespace hvd {
namespace launcher {
namespace {

// One command-line flag. `value_name` is null for a flag that takes no value, in
// which case `apply` receives an empty string.
struct FlagSpec {
  const char* name;
  const char* alias;  // May be null.
  const char* value_name;
  const char* default_text;  // Shown in the usage; may be null.
  const char* help;
  bool required;
  Status (*apply)(const std::string& flag, const std::string& value, LauncherOptions* opts);
};

Status ParseInt(const std::string& flag, const std::string& value, int* out) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < -1000000000 || v > 1000000000)
    return Status::InvalidUsage(flag + " expects an integer, got '" + value + "'");
  *out = static_cast<int>(v);
  return Status::OK();
}

Status ParseSeconds(const std::string& flag, const std::string& value, double* out) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v) || v < 0 || v > 1e7)
    return Status::InvalidUsage(flag + " expects a number of seconds >= 0, got '" + value + "'");
  *out = v;
  return Status::OK();
}

Status SetHosts(const std::string& flag, std::vector<HostSlots> hosts, LauncherOptions* o) {
  if (!o->hosts.empty())
    return Status::InvalidUsage(flag + ": give -H or --hostfile once, not both");
  o->hosts = std::move(hosts);
  return Status::OK();
}

Status ReadHostfile(const std::string& flag, const std::string& path, LauncherOptions* o) {
  std::ifstream in(path);
  if (!in) return Status::InvalidUsage(flag + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  std::vector<HostSlots> hosts;
  HVD_RETURN_IF_ERROR(ParseHostfile(text.str(), path, &hosts));
  return SetHosts(flag, std::move(hosts), o);
}

Status ParseEnvVar(const std::string& flag, const std::string& value, LauncherOptions* o) {
  const std::string name = value.substr(0, value.find('='));
  const bool ok = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
                  name.find_first_not_of(
                      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                      "0123456789_") == std::string::npos;
  if (!ok) return Status::InvalidUsage(flag + " expects VAR or VAR=VALUE, got '" + value + "'");
  o->env_vars.push_back(value);
  return Status::OK();
}

const FlagSpec kFlags[] = {
    {"-np", "--num-proc", "N", nullptr, "number of ranks to start; required, at least 1", true,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       return ParseInt(f, v, &o->num_ranks);
     }},
    {"--start-timeout", nullptr, "S", "120",
     "fail the job if some rank has not connected to the store (set hvd/started/<rank>) "
     "within S seconds; 0 disables the check",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       return ParseSeconds(f, v, &o->start_timeout_s);
     }},
    {"--grace-period", nullptr, "S", "5",
     "seconds between SIGTERM and SIGKILL when the job is torn down", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       return ParseSeconds(f, v, &o->grace_period_s);
     }},
    {"-H", "--hosts", "LIST", nullptr,
     "run on these hosts, e.g. hostA:4,hostB:4 (host[:slots], 1 slot if omitted); ranks fill "
     "the hosts in order; hosts other than this one are reached over ssh",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       std::vector<HostSlots> hosts;
       HVD_RETURN_IF_ERROR(ParseHostList(v, &hosts));
       return SetHosts(f, std::move(hosts), o);
     }},
    {"--hostfile", nullptr, "FILE", nullptr,
     "read the hosts from FILE, one 'host slots=N' per line", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       return ReadHostfile(f, v, o);
     }},
    {"-p", "--ssh-port", "N", "ssh's own", "the port ssh connects to on every remote host", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->ssh_port));
       if (o->ssh_port < 1 || o->ssh_port > 65535)
         return Status::InvalidUsage(f + " expects a port in 1..65535, got '" + v + "'");
       return Status::OK();
     }},
    {"--ssh-identity-file", nullptr, "FILE", nullptr, "the private key ssh uses (ssh -i FILE)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects a file name");
       o->ssh_identity_file = v;
       return Status::OK();
     }},
    {"--ssh-option", nullptr, "OPT", nullptr,
     "pass -o OPT to ssh, e.g. StrictHostKeyChecking=no; repeatable; wins over dprun's own "
     "BatchMode=yes, ConnectTimeout and ServerAlive settings",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.find('=') == std::string::npos)
         return Status::InvalidUsage(f + " expects Name=value, got '" + v + "'");
       o->ssh_options.push_back(v);
       return Status::OK();
     }},
    {"--ssh-connect-timeout", nullptr, "S", "10",
     "seconds ssh may take to reach a host before the job fails naming it", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->ssh_connect_timeout_s));
       if (o->ssh_connect_timeout_s < 1)
         return Status::InvalidUsage(f + " expects a whole number of seconds >= 1, got '" + v +
                                     "'");
       return Status::OK();
     }},
    {"-x", nullptr, "VAR[=VALUE]", nullptr,
     "give every rank VAR, with dprun's value or VALUE; repeatable. Remote ranks get only "
     "these, the HVD_*, HOROVOD_* and NCCL_* variables of dprun's environment, and their own",
     false, ParseEnvVar},
    {"--network-interface", nullptr, "IFACE", nullptr,
     "the interface ranks talk over: Gloo binds it (HVD_GLOO_IFACE), NCCL uses it "
     "(NCCL_SOCKET_IFNAME), and the store listens on its IPv4 address; default: the "
     "interface of the route to the first remote host",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects an interface name");
       o->network_interface = v;
       return Status::OK();
     }},
    {"--bind-to", nullptr, "none|core", "none",
     "core: bind each rank's threads to its own block of its host's CPUs (the CPUs "
     "divided evenly among the host's ranks; sets HVD_BIND_TO for the ranks)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v != "none" && v != "core")
         return Status::InvalidUsage(f + " expects none or core, got '" + v + "'");
       o->bind_to = v;
       return Status::OK();
     }},
    {"--timeline", nullptr, "PATH", nullptr,
     "rank 0 writes a Chrome/Perfetto trace of every tensor's negotiation and execution to "
     "PATH (sets HVD_TIMELINE for the ranks)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects a file name");
       o->timeline_path = v;
       return Status::OK();
     }},
    {"--straggler-report", nullptr, nullptr, "off",
     "at the end of the job, print rank 0's report of which ranks tensors waited on last, "
     "and for how long (sets HVD_STRAGGLER_REPORT=1 for the ranks)",
     false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->straggler_report = true;
       return Status::OK();
     }},
    {"--verbose", nullptr, nullptr, "off", "print the store address and each rank's pid", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->verbose = true;
       return Status::OK();
     }},
    {"--min-np", nullptr, "N", nullptr,
     "elastic job: a failed rank does not end the job while at least N ranks remain; "
     "the others rejoin in a new generation (hvd.elastic.run; docs/elastic.md)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->min_np));
       if (o->min_np < 1) return Status::InvalidUsage(f + " expects N >= 1, got '" + v + "'");
       return Status::OK();
     }},
    {"--max-np", nullptr, "N", "-np", "elastic job: at most N ranks at once", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->max_np));
       if (o->max_np < 1) return Status::InvalidUsage(f + " expects N >= 1, got '" + v + "'");
       return Status::OK();
     }},
    {"--host-discovery-script", nullptr, "FILE", nullptr,
     "elastic job: run FILE every second; it prints the usable hosts, one host[:slots] per "
     "line; ranks start on free slots (up to --max-np) and stop on vanished hosts",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects a file name");
       o->host_discovery_script = v;
       return Status::OK();
     }},
    {"--slots-per-host", nullptr, "N", "1",
     "elastic job: the slots of a discovered host printed without :slots", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->slots_per_host));
       if (o->slots_per_host < 1)
         return Status::InvalidUsage(f + " expects N >= 1, got '" + v + "'");
       return Status::OK();
     }},
    {"--reset-limit", nullptr, "N", "100", "elastic job: fail after N resets", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->reset_limit));
       if (o->reset_limit < 0)
         return Status::InvalidUsage(f + " expects N >= 0, got '" + v + "'");
       return Status::OK();
     }},
    {"-h", "--help", nullptr, nullptr, "print this help and exit", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->help = true;
       return Status::OK();
     }},
};

const FlagSpec* FindFlag(const std::string& name) {
  for (const FlagSpec& f : kFlags)
    if (name == f.name || (f.alias != nullptr && name == f.alias)) return &f;
  return nullptr;
}

// "  --name V    help text..." with the help word-wrapped into a column.
std::string WrapOption(const std::string& names, const std::string& help) {
  constexpr size_t kHelpColumn = 26, kWidth = 80;
  std::string out = names;
  if (out.size() + 1 > kHelpColumn)
    out += "\n" + std::string(kHelpColumn, ' ');
  else
    out.resize(kHelpColumn, ' ');
  size_t column = kHelpColumn;
  size_t pos = 0;
  while (pos < help.size()) {
    size_t end = help.find(' ', pos);
    if (end == std::string::npos) end = help.size();
    const std::string word = help.substr(pos, end - pos);
    if (column > kHelpColumn && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(kHelpColumn, ' ');
      column = kHelpColumn;
    } else if (column > kHelpColumn) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    pos = end + 1;
  }
  return out + "\n";
}

}  // namespace

Status ParseLauncherArgs(const std::vector<std::string>& args, LauncherOptions* out) {
  LauncherOptions opts;
  std::vector<const FlagSpec*> seen;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // The command starts here.
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const FlagSpec* flag = FindFlag(name);
    if (flag == nullptr) return Status::InvalidUsage("unknown option '" + name + "'");
    std::string value;
    if (flag->value_name == nullptr) {
      if (eq != std::string::npos)
        return Status::InvalidUsage("option " + name + " takes no value");
    } else if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return Status::InvalidUsage("option " + name + " needs a value " + flag->value_name);
    }
    HVD_RETURN_IF_ERROR(flag->apply(name, value, &opts));
    seen.push_back(flag);
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!opts.help) {
    for (const FlagSpec& f : kFlags) {
      if (f.required && std::find(seen.begin(), seen.end(), &f) == seen.end())
        return Status::InvalidUsage(std::string("missing ") + f.name + " " + f.value_name + " (" +
                                    f.help + ")");
    }
    if (opts.num_ranks < 1)
      return Status::InvalidUsage("-np must be at least 1, got " + std::to_string(opts.num_ranks));
    if (opts.command.empty()) return Status::InvalidUsage("no command to run");
    const bool elastic_flag = opts.max_np > 0 || !opts.host_discovery_script.empty();
    if (elastic_flag && opts.min_np == 0)
      return Status::InvalidUsage("--max-np and --host-discovery-script need --min-np");
    if (opts.min_np > 0) {
      if (opts.max_np == 0) opts.max_np = opts.num_ranks;
      if (opts.min_np > opts.num_ranks || opts.num_ranks > opts.max_np)
        return Status::InvalidUsage("an elastic job needs --min-np <= -np <= --max-np, got " +
                                    std::to_string(opts.min_np) + " <= " +
                                    std::to_string(opts.num_ranks) + " <= " +
                                    std::to_string(opts.max_np));
    }
  }
  *out = std::move(opts);
  return Status::OK();
}

std::string LauncherUsage() {
  std::string u =
      "usage: dprun -np N [-H host:slots,...] [options] [--] command [args...]\n"
      "\n"
      "Runs N copies of command as the ranks of one job, on this host or, with -H or\n"
      "--hostfile, on several hosts (over ssh, in BatchMode: set up keys first), prefixing\n"
      "each line of their output with [rank]<stdout>: or [rank]<stderr>:. When a rank\n"
      "fails, dprun tells the others how (they report it as the cause), gives them up to\n"
      "3 s to exit, then terminates the rest.\n"
      "\n"
      "options:\n";
  for (const FlagSpec& f : kFlags) {
    std::string names = std::string("  ") + f.name;
    if (f.alias != nullptr) names += std::string(", ") + f.alias;
    if (f.value_name != nullptr) names += std::string(" ") + f.value_name;
    std::string help = f.help;
    if (f.default_text != nullptr) help += std::string(" (default: ") + f.default_text + ")";
    u += WrapOption(names, help);
  }
  u += "\n"
       "each rank's environment:\n"
       "  HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_CROSS_RANK,\n"
       "  HVD_CROSS_SIZE, HVD_STORE_ADDR (host:port), HVD_STORE_SECRET, HVD_GLOO_HOSTNAME,\n"
       "  HVD_JOB_ID; with --network-interface also HVD_GLOO_IFACE and NCCL_SOCKET_IFNAME,\n"
       "  with --timeline HVD_TIMELINE, with --straggler-report HVD_STRAGGLER_REPORT\n"
       "\n"
       "exit status:\n"
       "  0        every rank exited 0\n"
       "  code     the first failing rank's exit code, or 128+signal if it was killed\n"
       "  1        dprun failed the job itself (a rank did not start or could not be\n"
       "           spawned, or ssh could not reach its host)\n"
       "  2        usage error\n"
       "  127      the command was not found\n"
       "  130/143  dprun was interrupted by SIGINT/SIGTERM\n";
  return u;
}

}  // namespace launcher
}  // namespace hvd
