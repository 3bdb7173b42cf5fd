#include "launcher/remote_spawner.h"

#include <cstdio>

namespace hvd {
namespace launcher {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string RemoteScript(const std::vector<std::pair<std::string, std::string>>& env,
                         const std::string& cwd, const std::vector<std::string>& command,
                         double grace_period_s) {
  char grace[32];
  std::snprintf(grace, sizeof(grace), "%g", grace_period_s);
  std::string run = "env";
  for (const auto& [name, value] : env) run += " " + ShellQuote(name + "=" + value);
  for (const std::string& arg : command) run += " " + ShellQuote(arg);
  const std::string dir = ShellQuote(cwd);
  // fd 3 keeps ssh's stdin (a pipe from dprun) for the watcher; everything else reads
  // /dev/null. The watcher ignores SIGTERM while it reads, so that its own kill does not
  // stop it before the SIGKILL, and restores it so its sleep stays killable. The main
  // shell traps SIGTERM so that it outlives the rank and returns its exit code, and
  // sends its own stderr to /dev/null so it does not report the rank's death. It sets
  // the trap after starting the rank, which so starts with SIGTERM's default action, and
  // before starting the watcher, the only sender of SIGTERM until the script's end: a
  // stdin closed at once (a teardown right after the start) finds the trap in place.
  const std::string marker = kRemoteStartedMarker;
  const std::vector<std::string> lines = {
      "cd " + dir + " 2>/dev/null || echo \"dprun: cannot cd to \"" + dir +
          "\" on $(hostname); running in $PWD\" >&2",
      "echo " + marker + " $$",
      "exec 3<&0 </dev/null",
      run + " 3<&- &",
      "child=$!",
      "trap : TERM",
      "(trap '' TERM; while read -r _ <&3; do :; done; kill -TERM 0; trap - TERM; sleep " +
          std::string(grace) + "; kill -KILL 0) >/dev/null 2>&1 &",
      "watcher=$!",
      "exec 3<&- 2>/dev/null",
      "wait $child; rc=$?",
      "while kill -0 $child; do wait $child; rc=$?; done",
      "kill -KILL $watcher; wait $watcher",
      "trap 'exit $rc' TERM",
      "kill -TERM 0",
      "exit $rc",
  };
  std::string script;
  for (const std::string& line : lines) script += line + "\n";
  return script;
}

std::vector<std::string> SshArgv(const SshOptions& ssh, const std::string& host,
                                 const std::string& script) {
  std::vector<std::string> argv = {ssh.ssh_path, "-T", "-x"};
  for (const std::string& o : ssh.options) argv.insert(argv.end(), {"-o", o});
  argv.insert(argv.end(), {"-o", "BatchMode=yes", "-o",
                           "ConnectTimeout=" + std::to_string(ssh.connect_timeout_s), "-o",
                           "ServerAliveInterval=" + std::to_string(kServerAliveSeconds), "-o",
                           "ServerAliveCountMax=" + std::to_string(kServerAliveCount)});
  if (ssh.port > 0) argv.insert(argv.end(), {"-p", std::to_string(ssh.port)});
  if (!ssh.identity_file.empty()) argv.insert(argv.end(), {"-i", ssh.identity_file});
  // exec: the login shell must not stay between sshd and the script, or the script's
  // kill of its process group would hit it too.
  argv.insert(argv.end(), {"--", host, "exec sh -c " + ShellQuote(script)});
  return argv;
}

Status SpawnRemoteRank(const RankPlacement& placement,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       const SshOptions& ssh, const std::string& cwd,
                       const std::vector<std::string>& command, double grace_period_s,
                       const sigset_t& child_mask, SpawnedRank* out) {
  SpawnRequest request;
  request.label = "rank " + std::to_string(placement.rank) + " (ssh to " + placement.host + ")";
  request.exe_path = ssh.ssh_path;
  request.argv = SshArgv(ssh, placement.host, RemoteScript(env, cwd, command, grace_period_s));
  request.env = ChildEnvironment({});
  request.stdin_pipe = true;
  return SpawnProcess(request, child_mask, out);
}

}  // namespace launcher
}  // namespace hvd
