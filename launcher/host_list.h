// Host lists: the hosts of a multi-host job, from `-H` or `--hostfile`.
//
// -H takes "hostA:4,hostB:4": comma-separated hosts, each with an optional ":slots"
// (1 when omitted). An IPv6 address goes in brackets: "[fd00::2]:2".
//
// A hostfile has one host per line, "hostA slots=4" or just "hostA" (1 slot), as Open
// MPI and Horovod read it. '#' starts a comment; blank lines are skipped.
//
// Both parsers are pure and return kInvalidUsage with a reason that quotes the bad
// entry (and, for a hostfile, its line number). A host listed twice is an error, so a
// typo cannot double a host's ranks silently.
#ifndef HVD_LAUNCHER_HOST_LIST_H_
#define HVD_LAUNCHER_HOST_LIST_H_

#include <string>
#include <vector>

#include "launcher/rank_placement.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

Status ParseHostList(const std::string& list, std::vector<HostSlots>* out);

// "hostA:4,hostB:1", as -H takes it (brackets around an IPv6 address).
std::string FormatHostList(const std::vector<HostSlots>& hosts);

// `source` names the file in error messages.
Status ParseHostfile(const std::string& text, const std::string& source,
                     std::vector<HostSlots>* out);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_HOST_LIST_H_
