#include "controller/launcher/launcher_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

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
    {"--verbose", nullptr, nullptr, "off", "print the store address and each rank's pid", false,
     [](const std::string&, const std::string&, LauncherOptions* o) {
       o->verbose = true;
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
  }
  *out = std::move(opts);
  return Status::OK();
}

std::string LauncherUsage() {
  std::string u =
      "usage: dprun -np N [options] [--] command [args...]\n"
      "\n"
      "Runs N copies of command on this host as the ranks of one job, prefixing each\n"
      "line of their output with [rank]<stdout>: or [rank]<stderr>:.\n"
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
       "  HVD_JOB_ID\n"
       "\n"
       "exit status:\n"
       "  0        every rank exited 0\n"
       "  code     the first failing rank's exit code, or 128+signal if it was killed\n"
       "  1        dprun failed the job itself (a rank did not start, or could not be spawned)\n"
       "  2        usage error\n"
       "  127      the command was not found\n"
       "  130/143  dprun was interrupted by SIGINT/SIGTERM\n";
  return u;
}

}  // namespace launcher
}  // namespace hvd
