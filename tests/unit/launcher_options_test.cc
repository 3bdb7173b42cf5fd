// dprun's flags, parsed without running anything.
#include "launcher/launcher_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace hvd {
namespace launcher {
namespace {

using ::testing::HasSubstr;

TEST(LauncherOptions, MultiHostFlags) {
  LauncherOptions o;
  const Status s = ParseLauncherArgs({"-np",
                                      "8",
                                      "-H",
                                      "hostA:4,hostB:4",
                                      "-p",
                                      "2222",
                                      "--ssh-identity-file",
                                      "/k",
                                      "--ssh-option",
                                      "StrictHostKeyChecking=no",
                                      "--ssh-option=LogLevel=ERROR",
                                      "--ssh-connect-timeout",
                                      "3",
                                      "-x",
                                      "FOO",
                                      "-x",
                                      "BAR=1=2",
                                      "--network-interface",
                                      "eth1",
                                      "cmd",
                                      "-x"},
                                     &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[1].host, "hostB");
  EXPECT_EQ(o.hosts[1].slots, 4);
  EXPECT_EQ(o.ssh_port, 2222);
  EXPECT_EQ(o.ssh_identity_file, "/k");
  EXPECT_EQ(o.ssh_options,
            (std::vector<std::string>{"StrictHostKeyChecking=no", "LogLevel=ERROR"}));
  EXPECT_EQ(o.ssh_connect_timeout_s, 3);
  EXPECT_EQ(o.env_vars, (std::vector<std::string>{"FOO", "BAR=1=2"}));
  EXPECT_EQ(o.network_interface, "eth1");
  EXPECT_EQ(o.command, (std::vector<std::string>{"cmd", "-x"}));
}

TEST(LauncherOptions, Hostfile) {
  char path[] = "/tmp/dprun-hostfile-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "a slots=2\nb slots=3\n";
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  LauncherOptions o;
  Status s = ParseLauncherArgs({"-np", "5", "--hostfile", path, "true"}, &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(o.hosts.size(), 2u);
  EXPECT_EQ(o.hosts[1].slots, 3);
  s = ParseLauncherArgs({"-np", "5", "--hostfile", path, "-H", "c", "true"}, &o);
  EXPECT_THAT(s.message(), HasSubstr("give -H or --hostfile once, not both"));
  ::unlink(path);
  s = ParseLauncherArgs({"-np", "5", "--hostfile", path, "true"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("cannot read '" + std::string(path) + "'"));
}

// Each case's flags, between "-np 1" and the command, fail with kInvalidUsage and
// the message.
using UsageErrors = std::vector<std::pair<std::vector<std::string>, std::string>>;
void ExpectUsageErrors(const UsageErrors& cases) {
  for (const auto& [flags, message] : cases) {
    std::vector<std::string> args = {"-np", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("true");
    LauncherOptions o;
    const Status s = ParseLauncherArgs(args, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << flags[0];
    EXPECT_THAT(s.message(), HasSubstr(message)) << flags[0];
  }
}

TEST(LauncherOptions, BadMultiHostValues) {
  ExpectUsageErrors({
      {{"-H", "a:0"}, "slots must be a number"},
      {{"-p", "0"}, "-p expects a port in 1..65535"},
      {{"--ssh-port", "70000"}, "--ssh-port expects a port"},
      {{"-x", "1BAD"}, "-x expects VAR or VAR=VALUE, got '1BAD'"},
      {{"-x", "=v"}, "-x expects VAR or VAR=VALUE"},
      {{"--ssh-option", "BatchMode"}, "--ssh-option expects Name=value"},
      {{"--ssh-connect-timeout", "0"}, "--ssh-connect-timeout expects a whole number"},
      {{"--network-interface="}, "--network-interface expects an interface name"},
  });
}

TEST(LauncherOptions, DiagnosticsFlags) {
  LauncherOptions o;
  ASSERT_TRUE(ParseLauncherArgs({"-np", "2", "cmd"}, &o).ok());
  EXPECT_EQ(o.timeline_path, "");
  EXPECT_FALSE(o.straggler_report);
  for (const std::vector<std::string>& timeline :
       {std::vector<std::string>{"--timeline", "/tmp/t.json"}, {"--timeline=/tmp/t.json"}}) {
    std::vector<std::string> args = {"-np", "2"};
    args.insert(args.end(), timeline.begin(), timeline.end());
    args.insert(args.end(), {"--straggler-report", "cmd", "--straggler-report"});
    o = LauncherOptions();
    const Status s = ParseLauncherArgs(args, &o);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(o.timeline_path, "/tmp/t.json");
    EXPECT_TRUE(o.straggler_report);
    EXPECT_EQ(o.command, (std::vector<std::string>{"cmd", "--straggler-report"}));
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--timeline="}, "--timeline expects a file name"},
      {{"--timeline"}, "option --timeline needs a value PATH"},
      {{"--straggler-report=1"}, "option --straggler-report takes no value"},
  };
  for (const auto& [flags, message] : bad) {
    std::vector<std::string> args = {"-np", "1"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Status s = ParseLauncherArgs(args, &o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidUsage) << flags[0];
    EXPECT_THAT(s.message(), HasSubstr(message)) << flags[0];
  }
}

TEST(LauncherOptions, BindTo) {
  LauncherOptions o;
  ASSERT_TRUE(ParseLauncherArgs({"-np", "2", "cmd"}, &o).ok());
  EXPECT_EQ(o.bind_to, "");  // the ranks' HVD_BIND_TO (or its default) decides
  for (const char* value : {"core", "none"}) {
    o = LauncherOptions();
    const Status s = ParseLauncherArgs({"-np", "2", "--bind-to", value, "cmd"}, &o);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(o.bind_to, value);
  }
  o = LauncherOptions();
  const Status s = ParseLauncherArgs({"-np", "2", "--bind-to=socket", "cmd"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidUsage);
  EXPECT_THAT(s.message(), HasSubstr("--bind-to expects none or core, got 'socket'"));
}

TEST(LauncherOptions, UsageListsTheFlags) {
  const std::string u = LauncherUsage();
  for (const char* text :
       {"-H, --hosts LIST", "--hostfile FILE", "-p, --ssh-port N", "--ssh-identity-file FILE",
        "-x VAR[=VALUE]", "--network-interface, --network-interfaces IFACE", "--ssh-connect-timeout S",
        "NCCL_SOCKET_IFNAME", "--timeline PATH", "--straggler-report", "HVD_TIMELINE",
        "--bind-to none|core", "HVD_BIND_TO",
        "HVD_STRAGGLER_REPORT", "horovodrun's flags", "--fusion-threshold-mb MB",
        "--blacklist-cooldown-range LO HI", "-v, --version", "-cb, --check-build",
        "--min-np, --min-num-proc N", "-i, --ssh-identity-file FILE", "-hostfile, --hostfile FILE",
        "--prefix-output-with-timestamp, -prefix-timestamp"})
    EXPECT_THAT(u, HasSubstr(text));
}

// A horovodrun command line parses as it is; each tuning flag becomes its variable.
TEST(LauncherOptions, HorovodrunTuningFlagsSetTheirVariables) {
  LauncherOptions o;
  const Status s = ParseLauncherArgs(
      {"-np", "2", "--gloo", "--fusion-threshold-mb", "32", "--cycle-time-ms", "2.5",
       "--cache-capacity=100", "--disable-cache", "--hierarchical-allreduce", "--autotune",
       "--autotune-log-file", "/t/at.csv", "--timeline-filename", "/t/tl.json",
       "--timeline-mark-cycles", "--no-stall-check", "--stall-check-warning-time-seconds", "5",
       "--stall-check-shutdown-time-seconds", "30", "--gloo-timeout-seconds", "60",
       "--elastic-timeout", "120", "--tcp", "--no-autotune", "python", "train.py"},
      &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.command, (std::vector<std::string>{"python", "train.py"}));
  EXPECT_TRUE(o.notices.empty());
  const std::vector<std::pair<std::string, std::string>> want = {
      {"HVD_FUSION_THRESHOLD", "33554432"}, {"HVD_CYCLE_TIME", "2.5"},
      {"HVD_CACHE_CAPACITY", "100"},        {"HVD_CACHE_CAPACITY", "0"},
      {"HVD_HIERARCHICAL_ALLREDUCE", "1"},  {"HVD_AUTOTUNE", "1"},
      {"HVD_AUTOTUNE_LOG", "/t/at.csv"},    {"HVD_TIMELINE", "/t/tl.json"},
      {"HVD_TIMELINE_MARK_CYCLES", "1"},
      {"HVD_STALL_CHECK_DISABLE", "1"},     {"HVD_STALL_CHECK_TIME", "5"},
      {"HVD_STALL_SHUTDOWN_TIME", "30"},    {"HVD_TIMEOUT", "60"},
      {"HVD_ELASTIC_TIMEOUT", "120"},       {"NCCL_IB_DISABLE", "1"},
      {"HVD_AUTOTUNE", "0"}};
  EXPECT_EQ(o.flag_variables, want);
}

TEST(LauncherOptions, HorovodrunAliasesAndTwoValueFlags) {
  LauncherOptions o;
  const Status s = ParseLauncherArgs(
      {"-np", "2", "--min-num-proc", "1", "--max-num-proc", "4", "-i", "/k",
       "--network-interfaces", "eth1", "--blacklist-cooldown-range", "10", "100",
       "--num-nccl-streams", "2", "--log-level", "INFO", "-prefix-timestamp", "cmd", "a"},
      &o);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(o.min_np, 1);
  EXPECT_EQ(o.max_np, 4);
  EXPECT_EQ(o.ssh_identity_file, "/k");
  EXPECT_EQ(o.network_interface, "eth1");
  EXPECT_EQ(o.command, (std::vector<std::string>{"cmd", "a"}));  // both values taken
  EXPECT_TRUE(o.prefix_timestamp);
  EXPECT_EQ(o.cooldown_lo_s, 10);
  EXPECT_EQ(o.cooldown_hi_s, 100);
  ASSERT_EQ(o.notices.size(), 2u);
  EXPECT_THAT(o.notices[0], HasSubstr("--num-nccl-streams has no effect: "));
  EXPECT_THAT(o.notices[1], HasSubstr("--log-level has no effect: "));
}

TEST(LauncherOptions, HorovodrunFlagsDprunCannotHonourAreRefusedWithTheReason) {
  ExpectUsageErrors({
      {{"--mpi"}, "--mpi: dprun starts its ranks itself and does not run MPI"},
      {{"--jsrun"}, "--jsrun: dprun starts its ranks itself"},
      {{"--mpi-args", "-mca x"}, "--mpi-args: dprun does not run mpirun"},
      {{"--binding-args", "-bind-to core"}, "dprun binds ranks to CPUs with --bind-to core"},
      {{"--config-file", "c.yaml"}, "--config-file: dprun reads no config file"},
      {{"--network-interfaces", "eth0,eth1"}, "dprun uses one interface, got 'eth0,eth1'"},
      {{"--fusion-threshold-mb", "-1"}, "--fusion-threshold-mb expects an integer >= 0"},
      {{"--cycle-time-ms", "fast"}, "--cycle-time-ms expects a number"},
      {{"--gloo-timeout-seconds", "0"}, "--gloo-timeout-seconds expects a number > 0"},
      {{"--blacklist-cooldown-range=10"}, "needs the values LO HI"},
      {{"--blacklist-cooldown-range", "0", "10"}, "expects 1 <= LO <= HI <= 3600, got 0 10"},
      {{"--blacklist-cooldown-range", "20", "10"}, "expects 1 <= LO <= HI <= 3600, got 20 10"},
      {{"--blacklist-cooldown-range", "1", "3601"}, "expects 1 <= LO <= HI <= 3600"},
      {{"--blacklist-cooldown-range", "1", "x"}, "--blacklist-cooldown-range expects an integer, got 'x'"},
  });
  LauncherOptions o;  // Two values, or none: the command is not taken for one.
  const Status s = ParseLauncherArgs({"-np", "1", "--blacklist-cooldown-range", "10"}, &o);
  EXPECT_THAT(s.message(), HasSubstr("needs the values LO HI as separate arguments"));
}

TEST(LauncherOptions, VersionAndBuildCheckNeedNoJob) {
  for (const char* flag : {"-v", "--version", "-cb", "--check-build"}) {
    LauncherOptions o;
    ASSERT_TRUE(ParseLauncherArgs({flag}, &o).ok()) << flag;
    EXPECT_EQ(o.version, flag[1] == 'v' || flag[2] == 'v') << flag;
    EXPECT_EQ(o.check_build, !o.version) << flag;
  }
  EXPECT_THAT(LauncherVersion(), testing::MatchesRegex("dprun [0-9]+\\.[0-9]+\\.[0-9]+\n"));
  const std::string build = LauncherBuildCheck();
  EXPECT_THAT(build, HasSubstr("Available Frameworks:\n    [ ] TensorFlow\n    [X] PyTorch\n"));
  EXPECT_THAT(build, HasSubstr("Available Controllers:\n    [ ] MPI\n    [X] Gloo\n"));
#ifdef HVD_HAVE_CUDA
  EXPECT_THAT(build, HasSubstr("Available Tensor Operations:\n    [X] NCCL\n"));
#else
  EXPECT_THAT(build, HasSubstr("Available Tensor Operations:\n    [ ] NCCL\n"));
#endif
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
