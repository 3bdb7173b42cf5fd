#include "launcher/host_discovery.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

namespace hvd {
namespace launcher {

bool ParseDiscoveryOutput(const std::string& text, int default_slots,
                          std::vector<HostSlots>* hosts, std::string* why) {
  std::vector<HostSlots> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    line = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
    HostSlots h;
    const size_t colon = line.rfind(':');
    h.host = line.substr(0, colon);
    h.slots = default_slots;
    if (colon != std::string::npos) {
      char* end = nullptr;
      const long v = std::strtol(line.c_str() + colon + 1, &end, 10);
      if (end == line.c_str() + colon + 1 || *end != '\0' || v < 1 || v > 4096) {
        *why = "bad line '" + line + "': expected host[:slots], slots in 1..4096";
        return false;
      }
      h.slots = static_cast<int>(v);
    }
    if (h.host.empty() || h.host.find_first_of(" \t") != std::string::npos) {
      *why = "bad line '" + line + "': expected host[:slots]";
      return false;
    }
    out.push_back(h);
  }
  *hosts = std::move(out);
  return true;
}

bool RunDiscoveryScript(const std::string& script, int default_slots,
                        std::vector<HostSlots>* hosts, std::string* why) {
  // The script's name goes through the shell as one quoted word.
  std::string quoted = "'";
  for (char c : script) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  FILE* p = ::popen(("timeout 10 " + quoted + " </dev/null").c_str(), "r");
  if (p == nullptr) {
    *why = "cannot run " + script;
    return false;
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0 && text.size() < (1u << 20))
    text.append(buf, n);
  const int status = ::pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = script + (WIFEXITED(status) && WEXITSTATUS(status) == 124
                         ? " took more than 10 s"
                         : " failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
    return false;
  }
  return ParseDiscoveryOutput(text, default_slots, hosts, why);
}

Status DiscoverFirstHosts(double limit_s, LauncherOptions* options) {
  using Clock = std::chrono::steady_clock;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_s));
  std::string last;
  while (true) {
    std::vector<HostSlots> hosts;
    std::string why;
    if (RunDiscoveryScript(options->host_discovery_script, options->slots_per_host, &hosts, &why)) {
      int slots = 0;
      for (const HostSlots& h : hosts) slots += h.slots;
      if (slots >= options->min_np) {
        options->hosts = std::move(hosts);
        options->num_ranks = std::min(options->num_ranks, slots);
        return Status::OK();
      }
      last = "its hosts have " + std::to_string(slots) + " slot(s)";
    } else {
      last = why;
    }
    if (Clock::now() + std::chrono::seconds(1) > deadline) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", limit_s);
  return Status::InvalidArgument("host discovery: no " + std::to_string(options->min_np) +
                                 " slot(s) for --min-np within " + seconds + " s (" +
                                 options->host_discovery_script + ": " + last + ")");
}

}  // namespace launcher
}  // namespace hvd
