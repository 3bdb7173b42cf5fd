// Exit statuses in dprun's words: pure functions of a waitpid() status or a signal.
//
// A rank's end is reported as "exited with code 3" or "was killed by signal 9
// (Killed)", after the rank's name; dprun's own exit status mirrors the rank that
// caused the job's end, as a shell reports a child: the code, or 128 + the signal.
#ifndef HVD_LAUNCHER_EXIT_STATUS_H_
#define HVD_LAUNCHER_EXIT_STATUS_H_

#include <string>

namespace hvd {
namespace launcher {

// "exited with code N" or "was killed by signal N (<strsignal text>)". `wait_status`
// must be that of a process that has ended (WIFEXITED or WIFSIGNALED).
std::string DescribeExit(int wait_status);

// The exit code, or 128 + the signal that killed the process.
int ExitCodeOf(int wait_status);

// "SIGINT" or "SIGTERM", the signals dprun acts on; "a signal" for any other.
const char* SignalName(int sig);

}  // namespace launcher
}  // namespace hvd

#endif  // HVD_LAUNCHER_EXIT_STATUS_H_
