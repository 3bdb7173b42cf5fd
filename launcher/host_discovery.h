// RunDiscoveryScript: the hosts an elastic job may use now, from the user's
// --host-discovery-script (as Horovod's): it prints one "host[:slots]" per line;
// blank lines and lines starting with '#' are skipped; a host without ":slots" gets
// `default_slots`. The script runs through /bin/sh with a 10 s limit; a non-zero exit,
// a timeout or a malformed line returns false and says why (the caller keeps the hosts
// it had).
#ifndef HVD_LAUNCHER_HOST_DISCOVERY_H_
#define HVD_LAUNCHER_HOST_DISCOVERY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/host_list.h"
#include "launcher/launcher_options.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

// At most this many workers over an elastic job's life (each restart counts).
constexpr size_t kMaxElasticWorkers = 1024;

bool RunDiscoveryScript(const std::string& script, int default_slots,
                        std::vector<HostSlots>* hosts, std::string* why);

// An elastic job's first hosts, when it has a discovery script and no -H (as
// horovodrun): runs the script every second until its hosts have --min-np slots
// (not blacklisted: none are yet), for at most `limit_s` seconds, then sets
// options->hosts to them and options->num_ranks to -np or their slots, the fewer.
// Past the limit, kInvalidArgument naming the slots found (or the script's last
// failure) and --min-np.
Status DiscoverFirstHosts(double limit_s, LauncherOptions* options);
// The limit when --start-timeout is 0 (no start timeout).
constexpr double kFirstHostsWaitS = 120;

// Parses the script's output (as above). Pure.
bool ParseDiscoveryOutput(const std::string& text, int default_slots,
                          std::vector<HostSlots>* hosts, std::string* why);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_HOST_DISCOVERY_H_
