#include "launcher/launcher_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "launcher/host_list.h"

namespace hvd {
namespace launcher {
namespace {

// One command-line flag. `value_name` is null for a flag that takes no value, in
// which case `apply` receives an empty string; else it has one word per value the
// flag takes ("LO HI": two, given to `apply` joined by a space).
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
    {"-hostfile", "--hostfile", "FILE", nullptr,
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
    {"-i", "--ssh-identity-file", "FILE", nullptr, "the private key ssh uses (ssh -i FILE)",
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
     "give every rank VAR, with dprun's value or VALUE; repeatable. Remote ranks get "
     "dprun's environment, as horovodrun's, but for the login's and machine's variables "
     "(HOME, USER, SSH_*, CUDA_VISIBLE_DEVICES, ...: docs/multi-node.md), which -x can add",
     false, ParseEnvVar},
    {"--network-interface", "--network-interfaces", "IFACE", nullptr,
     "the interface ranks talk over: Gloo binds it (HVD_GLOO_IFACE), NCCL uses it "
     "(NCCL_SOCKET_IFNAME), and the store listens on its IPv4 address; default: the "
     "interface of the route to the first remote host",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects an interface name");
       if (v.find(',') != std::string::npos)
         return Status::InvalidUsage(f + ": dprun uses one interface, got '" + v + "'");
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
    {"--output-filename", nullptr, "DIR", nullptr,
     "also write each rank's output lines to DIR/rank.<rank>/stdout and stderr (the rank "
     "zero-padded; the files are replaced)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       if (v.empty()) return Status::InvalidUsage(f + " expects a directory");
       o->output_dir = v;
       return Status::OK();
     }},
    {"--prefix-output-with-timestamp", "-prefix-timestamp", nullptr, "off",
     "start each line of the ranks' output with the local time", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->prefix_timestamp = true;
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
    {"--min-np", "--min-num-proc", "N", nullptr,
     "elastic job: a failed rank does not end the job while at least N ranks remain; "
     "the others rejoin in a new generation (hvd.elastic.run; docs/elastic.md)",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->min_np));
       if (o->min_np < 1) return Status::InvalidUsage(f + " expects N >= 1, got '" + v + "'");
       return Status::OK();
     }},
    {"--max-np", "--max-num-proc", "N", "-np", "elastic job: at most N ranks at once", false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       HVD_RETURN_IF_ERROR(ParseInt(f, v, &o->max_np));
       if (o->max_np < 1) return Status::InvalidUsage(f + " expects N >= 1, got '" + v + "'");
       return Status::OK();
     }},
    {"--host-discovery-script", nullptr, "FILE", nullptr,
     "elastic job: run FILE every second; it prints the usable hosts, one host[:slots] per "
     "line; ranks start on free slots (up to --max-np; over ssh on other machines) and stop "
     "on vanished hosts; without -H the first ranks start on the hosts it lists",
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
    {"--blacklist-cooldown-range", nullptr, "LO HI", "60 60",
     "elastic job: a host whose ranks failed twice stays out LO*2^n s the n-th time (plus "
     "up to LO s at random), kept within LO..HI s, as horovodrun's; 1 <= LO <= HI <= 3600",
     false,
     [](const std::string& f, const std::string& v, LauncherOptions* o) {
       const size_t space = v.find(' ');
       int lo = 0, hi = 0;
       HVD_RETURN_IF_ERROR(ParseInt(f, v.substr(0, space), &lo));
       HVD_RETURN_IF_ERROR(ParseInt(f, v.substr(space + 1), &hi));
       if (lo < 1 || hi < lo || hi > 3600)
         return Status::InvalidUsage(f + " expects 1 <= LO <= HI <= 3600, got " +
                                     std::to_string(lo) + " " + std::to_string(hi));
       o->cooldown_lo_s = lo;
       o->cooldown_hi_s = hi;
       return Status::OK();
     }},
    {"-h", "--help", nullptr, nullptr, "print this help and exit", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->help = true;
       return Status::OK();
     }},
    {"-v", "--version", nullptr, nullptr, "print dprun's version and exit", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->version = true;
       return Status::OK();
     }},
    {"-cb", "--check-build", nullptr, nullptr,
     "print the frameworks, controllers and tensor operations this build has (horovodrun's "
     "form) and exit",
     false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->check_build = true;
       return Status::OK();
     }},
};

// horovodrun's flags (Horovod 0.28), so that its command lines run unchanged: a
// tuning flag sets the HVD_* variable it stands for (in LauncherOptions::
// flag_variables); a flag dprun has nothing to tune for is accepted, with a notice
// saying why where it asked for something; one dprun cannot honour is refused with
// the reason. Those that name dprun's own flags are aliases in kFlags.
struct HorovodrunFlag {
  enum Kind {
    kSet,       // sets `what`, "NAME=VALUE"
    kCount,     // sets variable `what` to the value, an integer >= 0
    kMiB,       // the same, the value given in MiB and set in bytes
    kNumber,    // sets variable `what` to the value, a number >= 0
    kPositive,  // the same, > 0
    kFile,      // sets variable `what` to the value, a file name
    kAccepted,  // nothing to do; `what` says why
    kNoEffect,  // a notice that it changes nothing; `what` says why
    kRefused,   // a usage error; `what` says why
  };
  const char* name;
  const char* value_name;  // As FlagSpec's.
  Kind kind;
  const char* what;
};

constexpr char kAutotuneWhy[] =
    "dprun's autotuner scores each setting over a fixed window (HVD_AUTOTUNE_WINDOW)";
constexpr char kNoMpi[] = "dprun does not use MPI";
constexpr char kNoTimestamps[] =
    "dprun's own messages carry no timestamps (--prefix-output-with-timestamp stamps the "
    "ranks' lines)";

const HorovodrunFlag kHorovodrunFlags[] = {
    {"--fusion-threshold-mb", "MB", HorovodrunFlag::kMiB, "HVD_FUSION_THRESHOLD"},
    {"--cycle-time-ms", "MS", HorovodrunFlag::kNumber, "HVD_CYCLE_TIME"},
    {"--cache-capacity", "N", HorovodrunFlag::kCount, "HVD_CACHE_CAPACITY"},
    {"--disable-cache", nullptr, HorovodrunFlag::kSet, "HVD_CACHE_CAPACITY=0"},
    {"--hierarchical-allreduce", nullptr, HorovodrunFlag::kSet, "HVD_HIERARCHICAL_ALLREDUCE=1"},
    {"--no-hierarchical-allreduce", nullptr, HorovodrunFlag::kSet,
     "HVD_HIERARCHICAL_ALLREDUCE=0"},
    {"--autotune", nullptr, HorovodrunFlag::kSet, "HVD_AUTOTUNE=1"},
    {"--no-autotune", nullptr, HorovodrunFlag::kSet, "HVD_AUTOTUNE=0"},
    {"--autotune-log-file", "FILE", HorovodrunFlag::kFile, "HVD_AUTOTUNE_LOG"},
    {"--timeline-filename", "PATH", HorovodrunFlag::kFile, "HVD_TIMELINE"},
    {"--timeline-mark-cycles", nullptr, HorovodrunFlag::kSet, "HVD_TIMELINE_MARK_CYCLES=1"},
    {"--no-timeline-mark-cycles", nullptr, HorovodrunFlag::kSet, "HVD_TIMELINE_MARK_CYCLES=0"},
    {"--no-stall-check", nullptr, HorovodrunFlag::kSet, "HVD_STALL_CHECK_DISABLE=1"},
    {"--stall-check", nullptr, HorovodrunFlag::kSet, "HVD_STALL_CHECK_DISABLE=0"},
    {"--stall-check-warning-time-seconds", "S", HorovodrunFlag::kNumber, "HVD_STALL_CHECK_TIME"},
    {"--stall-check-shutdown-time-seconds", "S", HorovodrunFlag::kNumber,
     "HVD_STALL_SHUTDOWN_TIME"},
    {"--gloo-timeout-seconds", "S", HorovodrunFlag::kPositive, "HVD_TIMEOUT"},
    {"--elastic-timeout", "S", HorovodrunFlag::kNumber, "HVD_ELASTIC_TIMEOUT"},
    {"--tcp", nullptr, HorovodrunFlag::kSet, "NCCL_IB_DISABLE=1"},
    {"--gloo", nullptr, HorovodrunFlag::kAccepted, "dprun's ranks always coordinate over Gloo"},
    {"--log-without-timestamp", nullptr, HorovodrunFlag::kAccepted, kNoTimestamps},
    {"--log-hide-timestamp", nullptr, HorovodrunFlag::kAccepted, kNoTimestamps},
    {"--hierarchical-allgather", nullptr, HorovodrunFlag::kNoEffect,
     "dprun's allgather is not hierarchical"},
    {"--no-hierarchical-allgather", nullptr, HorovodrunFlag::kAccepted,
     "dprun's allgather is not hierarchical"},
    {"--torus-allreduce", nullptr, HorovodrunFlag::kNoEffect, "dprun has no torus all-reduce"},
    {"--no-torus-allreduce", nullptr, HorovodrunFlag::kAccepted, "dprun has no torus all-reduce"},
    {"--autotune-warmup-samples", "N", HorovodrunFlag::kNoEffect, kAutotuneWhy},
    {"--autotune-steps-per-sample", "N", HorovodrunFlag::kNoEffect, kAutotuneWhy},
    {"--autotune-bayes-opt-max-samples", "N", HorovodrunFlag::kNoEffect, kAutotuneWhy},
    {"--autotune-gaussian-process-noise", "X", HorovodrunFlag::kNoEffect, kAutotuneWhy},
    {"--mpi-threads-disable", nullptr, HorovodrunFlag::kAccepted, kNoMpi},
    {"--no-mpi-threads-disable", nullptr, HorovodrunFlag::kAccepted, kNoMpi},
    {"--num-nccl-streams", "N", HorovodrunFlag::kNoEffect,
     "dprun runs each device's collectives on its own stream"},
    {"--thread-affinity", "N", HorovodrunFlag::kNoEffect,
     "use --bind-to core to bind each rank to its own CPUs"},
    {"--log-level", "LEVEL", HorovodrunFlag::kNoEffect,
     "dprun's runtime logs only warnings and errors"},
    {"--log-with-timestamp", nullptr, HorovodrunFlag::kNoEffect, kNoTimestamps},
    {"--no-log-hide-timestamp", nullptr, HorovodrunFlag::kNoEffect, kNoTimestamps},
    {"--mpi", nullptr, HorovodrunFlag::kRefused,
     "dprun starts its ranks itself and does not run MPI; drop the flag"},
    {"--jsrun", nullptr, HorovodrunFlag::kRefused,
     "dprun starts its ranks itself (locally or over ssh); give the hosts with -H or "
     "--hostfile"},
    {"--mpi-args", "ARGS", HorovodrunFlag::kRefused,
     "dprun does not run mpirun, so it has no use for mpirun's arguments; drop the flag"},
    {"--binding-args", "ARGS", HorovodrunFlag::kRefused,
     "these are mpirun's; dprun binds ranks to CPUs with --bind-to core"},
    {"--config-file", "FILE", HorovodrunFlag::kRefused,
     "dprun reads no config file; give its settings as flags or HVD_* variables"},
};

const HorovodrunFlag* FindHorovodrunFlag(const std::string& name) {
  for (const HorovodrunFlag& f : kHorovodrunFlags)
    if (name == f.name) return &f;
  return nullptr;
}

Status ApplyHorovodrunFlag(const HorovodrunFlag& h, const std::string& flag,
                           const std::string& value, LauncherOptions* o) {
  using K = HorovodrunFlag;
  std::string set = value;
  switch (h.kind) {
    case K::kSet: {
      const std::string var = h.what;
      const size_t eq = var.find('=');
      o->flag_variables.emplace_back(var.substr(0, eq), var.substr(eq + 1));
      return Status::OK();
    }
    case K::kCount:
    case K::kMiB: {
      int n = 0;
      if (!ParseInt(flag, value, &n).ok() || n < 0)
        return Status::InvalidUsage(flag + " expects an integer >= 0, got '" + value + "'");
      set = std::to_string(h.kind == K::kMiB ? int64_t{n} << 20 : int64_t{n});
      break;
    }
    case K::kNumber:
    case K::kPositive: {
      double x = 0;
      if (!ParseSeconds(flag, value, &x).ok() || (h.kind == K::kPositive && x <= 0))
        return Status::InvalidUsage(flag + " expects a number " +
                                    (h.kind == K::kPositive ? "> 0" : ">= 0") + ", got '" +
                                    value + "'");
      break;
    }
    case K::kFile:
      if (value.empty()) return Status::InvalidUsage(flag + " expects a file name");
      break;
    case K::kAccepted:
      return Status::OK();
    case K::kNoEffect:
      o->notices.push_back(flag + " has no effect: " + h.what);
      return Status::OK();
    case K::kRefused:
      return Status::InvalidUsage(flag + ": " + h.what);
  }
  o->flag_variables.emplace_back(h.what, set);
  return Status::OK();
}

// What a horovodrun flag does, for the usage text.
std::string HorovodrunHelp(const HorovodrunFlag& h) {
  using K = HorovodrunFlag;
  switch (h.kind) {
    case K::kMiB: return std::string(h.what) + ", in MiB";
    case K::kAccepted: return std::string("accepted: ") + h.what;
    case K::kNoEffect: return std::string("no effect: ") + h.what;
    case K::kRefused: return std::string("refused: ") + h.what;
    default: return h.what;
  }
}

const FlagSpec* FindFlag(const std::string& name) {
  for (const FlagSpec& f : kFlags)
    if (name == f.name || (f.alias != nullptr && name == f.alias)) return &f;
  return nullptr;
}

// How many values a flag takes: the words of its value name.
size_t ValueCount(const char* value_name) {
  if (value_name == nullptr) return 0;
  const std::string words = value_name;
  return 1 + static_cast<size_t>(std::count(words.begin(), words.end(), ' '));
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
    const HorovodrunFlag* horovodrun = flag == nullptr ? FindHorovodrunFlag(name) : nullptr;
    if (flag == nullptr && horovodrun == nullptr)
      return Status::InvalidUsage("unknown option '" + name + "'");
    const char* value_name = flag != nullptr ? flag->value_name : horovodrun->value_name;
    std::string value;
    const size_t values = ValueCount(value_name);
    if (values == 0) {
      if (eq != std::string::npos)
        return Status::InvalidUsage("option " + name + " takes no value");
    } else if (eq != std::string::npos && values == 1) {
      value = arg.substr(eq + 1);
    } else if (eq == std::string::npos && i + values < args.size()) {
      for (size_t k = 0; k < values; ++k) value += (k > 0 ? " " : "") + args[++i];
    } else {
      return Status::InvalidUsage("option " + name + " needs " +
                                  (values == 1 ? "a value " : "the values ") + value_name +
                                  (values == 1 ? "" : std::string(" as separate arguments")));
    }
    if (horovodrun != nullptr) {
      HVD_RETURN_IF_ERROR(ApplyHorovodrunFlag(*horovodrun, name, value, &opts));
      continue;
    }
    HVD_RETURN_IF_ERROR(flag->apply(name, value, &opts));
    seen.push_back(flag);
  }
  opts.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (!opts.help && !opts.version && !opts.check_build) {
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
       "horovodrun's flags, so that its command lines run unchanged (each sets the\n"
       "variable named for every rank, or does as said):\n";
  for (const HorovodrunFlag& f : kHorovodrunFlags) {
    std::string names = std::string("  ") + f.name;
    if (f.value_name != nullptr) names += std::string(" ") + f.value_name;
    u += WrapOption(names, HorovodrunHelp(f));
  }
  u += "\n"
       "each rank's environment:\n"
       "  HVD_RANK, HVD_SIZE, HVD_LOCAL_RANK, HVD_LOCAL_SIZE, HVD_CROSS_RANK,\n"
       "  HVD_CROSS_SIZE, HVD_STORE_ADDR (host:port), HVD_STORE_SECRET, HVD_GLOO_HOSTNAME,\n"
       "  HVD_JOB_ID; as horovodrun, HOROVOD_RANK, HOROVOD_SIZE, HOROVOD_LOCAL_RANK,\n"
       "  HOROVOD_LOCAL_SIZE, HOROVOD_CROSS_RANK, HOROVOD_CROSS_SIZE, HOROVOD_HOSTNAME;\n"
       "  with --network-interface also HVD_GLOO_IFACE and NCCL_SOCKET_IFNAME,\n"
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

std::string LauncherVersion() { return std::string("dprun ") + DPRUN_VERSION + "\n"; }

// horovodrun --check-build's table, with what this build has. The PyTorch and NumPy
// bindings are Python over libhvd, so they are always there (torch is needed at
// import time only).
std::string LauncherBuildCheck() {
#ifdef HVD_HAVE_CUDA
  const char* nccl = "X";
#else
  const char* nccl = " ";
#endif
  return std::string("dprun v") + DPRUN_VERSION +
         ":\n"
         "\n"
         "Available Frameworks:\n"
         "    [ ] TensorFlow\n"
         "    [X] PyTorch\n"
         "    [ ] MXNet\n"
         "\n"
         "Available Controllers:\n"
         "    [ ] MPI\n"
         "    [X] Gloo\n"
         "\n"
         "Available Tensor Operations:\n"
         "    [" + nccl + "] NCCL\n"
         "    [ ] DDL\n"
         "    [ ] CCL\n"
         "    [ ] MPI\n"
         "    [X] Gloo\n"
         "    [X] Shared memory\n";
}

}  // namespace launcher
}  // namespace hvd
