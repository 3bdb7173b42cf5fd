// LauncherOptions: dprun's command line, parsed from a table of flags.
//
// Adding a flag is one field in LauncherOptions and one entry in kFlags
// (launcher_options.cc); the usage text is generated from the same table.
#ifndef HVD_LAUNCHER_LAUNCHER_OPTIONS_H_
#define HVD_LAUNCHER_LAUNCHER_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "launcher/rank_placement.h"
#include "runtime/common/status.h"

namespace hvd {
namespace launcher {

struct LauncherOptions {
  // -np N: ranks to start. Required, at least 1.
  int num_ranks = 0;
  // --start-timeout S: seconds for every rank to set hvd/started/<rank>; 0 disables.
  double start_timeout_s = 120;
  // --grace-period S: seconds between SIGTERM and SIGKILL when tearing the job down.
  double grace_period_s = 5;
  // --verbose: print the store address and each rank's pid.
  bool verbose = false;
  // --bind-to none|core: set as HVD_BIND_TO for every rank when given.
  std::string bind_to;
  // --timeline PATH: set as HVD_TIMELINE for every rank (rank 0 writes the trace).
  std::string timeline_path;
  // --output-filename DIR (horovodrun's): each rank's output lines also go to
  // DIR/rank.<r>/stdout and stderr (RankCommand::output_dir).
  std::string output_dir;
  // --prefix-output-with-timestamp (horovodrun's): each rank's lines start with the
  // local time.
  bool prefix_timestamp = false;
  // --straggler-report: set HVD_STRAGGLER_REPORT=1 for every rank and print rank 0's
  // report (store key hvd/straggler_report) at the end of the job.
  bool straggler_report = false;
  // -H LIST or --hostfile FILE (see host_list.h). Empty: every rank runs on this host.
  std::vector<HostSlots> hosts;
  // -p, --ssh-port N: the port ssh connects to; 0 leaves it to ssh (its config, or 22).
  int ssh_port = 0;
  // --ssh-identity-file FILE: passed to ssh as -i FILE.
  std::string ssh_identity_file;
  // --ssh-option OPT (repeatable): passed to ssh as -o OPT, ahead of dprun's own -o
  // options, so it overrides them (ssh takes the first value it sees for an option).
  std::vector<std::string> ssh_options;
  // --ssh-connect-timeout S: ssh's ConnectTimeout, how long an unreachable host may take
  // to fail the job.
  int ssh_connect_timeout_s = 10;
  // -x VAR or -x VAR=VALUE (repeatable): environment variables every rank gets, from
  // dprun's environment or with the given value.
  std::vector<std::string> env_vars;
  // --network-interface IFACE: the interface Gloo (HVD_GLOO_IFACE) and NCCL
  // (NCCL_SOCKET_IFNAME) use, and whose IPv4 address the store listens on.
  std::string network_interface;
  // Elastic jobs (docs/elastic.md): --min-np N makes the job elastic. A rank that
  // fails no longer ends the job while at least N remain: dprun publishes a new
  // generation of the ranks still running, which rejoin (hvd.elastic.run). 0: not
  // elastic.
  int min_np = 0;
  // --max-np N: at most N ranks at once (default: -np).
  int max_np = 0;
  // --host-discovery-script FILE: run every second; prints the hosts ranks may run
  // on, one "host[:slots]" per line. dprun starts ranks on hosts with free slots (up
  // to --max-np) and stops those on hosts that vanished.
  std::string host_discovery_script;
  // --slots-per-host N: slots of a discovered host given without ":slots" (default 1).
  int slots_per_host = 1;
  // --reset-limit N: the job fails after N resets (default 100).
  int reset_limit = 100;
  // --blacklist-cooldown-range LO HI: how long a host whose ranks keep failing stays
  // out, in seconds (BlacklistCooldown; default 60 60, a fixed minute).
  int cooldown_lo_s = 60;
  int cooldown_hi_s = 60;
  // -h, --help: print the usage and exit 0.
  bool help = false;
  // -v, --version: print dprun's version and exit 0.
  bool version = false;
  // -cb, --check-build: print what this build has, as horovodrun does, and exit 0.
  bool check_build = false;

  // horovodrun's flags, so that command lines written for Horovod run unchanged:
  // the tuning ones become the HVD_* variables they stand for, set for every rank
  // (after -x and dprun's environment, so they win; later flags win over earlier).
  std::vector<std::pair<std::string, std::string>> flag_variables;
  // horovodrun's flags that have no effect in dprun, one line each saying why;
  // dprun prints them when the job starts.
  std::vector<std::string> notices;
  // The program each rank runs and its arguments.
  std::vector<std::string> command;
};

// Parses the arguments after the program name. Options come first; "--" or the first
// argument that is not an option starts the command, and everything after it belongs
// to the command. Values are given as "--flag V" or "--flag=V" (a flag of two values,
// "--flag A B"). Returns kInvalidUsage with a one-line reason for a missing or bad
// value, an unknown option, a horovodrun flag dprun cannot honour (--mpi, ...), a
// missing -np or a missing command (the last two are not checked when help, the
// version or the build check is requested).
Status ParseLauncherArgs(const std::vector<std::string>& args, LauncherOptions* out);

// The usage text: synopsis, each option with its default, horovodrun's flags, the
// rank environment and the exit statuses.
std::string LauncherUsage();

// "dprun <version>" (-v), and what this build has in horovodrun's --check-build form.
std::string LauncherVersion();
std::string LauncherBuildCheck();

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_LAUNCHER_OPTIONS_H_
