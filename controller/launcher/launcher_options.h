// LauncherOptions: dprun's command line, parsed from a table of flags.
//
// Adding a flag is one field in LauncherOptions and one entry in kFlags
// (launcher_options.cc); the usage text is generated from the same table.
#ifndef HVD_CONTROLLER_LAUNCHER_LAUNCHER_OPTIONS_H_
#define HVD_CONTROLLER_LAUNCHER_LAUNCHER_OPTIONS_H_

#include <string>
#include <vector>

#include "runtime/status.h"

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
  // -h, --help: print the usage and exit 0.
  bool help = false;
  // The program each rank runs and its arguments.
  std::vector<std::string> command;
};

// Parses the arguments after the program name. Options come first; "--" or the first
// argument that is not an option starts the command, and everything after it belongs
// to the command. Values are given as "--flag V" or "--flag=V". Returns kInvalidUsage
// with a one-line reason for a missing or bad value, an unknown option, a missing -np
// or a missing command (the last two are not checked when help is requested).
Status ParseLauncherArgs(const std::vector<std::string>& args, LauncherOptions* out);

// The usage text: synopsis, each option with its default, the rank environment and
// the exit statuses.
std::string LauncherUsage();

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_CONTROLLER_LAUNCHER_LAUNCHER_OPTIONS_H_
