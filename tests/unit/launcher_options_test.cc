// dprun's flags, parsed without running anything.
#include "controller/launcher/launcher_options.h"

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

TEST(LauncherOptions, BadMultiHostValues) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"-H", "a:0"}, "slots must be a number"},
      {{"-p", "0"}, "-p expects a port in 1..65535"},
      {{"--ssh-port", "70000"}, "--ssh-port expects a port"},
      {{"-x", "1BAD"}, "-x expects VAR or VAR=VALUE, got '1BAD'"},
      {{"-x", "=v"}, "-x expects VAR or VAR=VALUE"},
      {{"--ssh-option", "BatchMode"}, "--ssh-option expects Name=value"},
      {{"--ssh-connect-timeout", "0"}, "--ssh-connect-timeout expects a whole number"},
      {{"--network-interface="}, "--network-interface expects an interface name"},
  };
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
        "-x VAR[=VALUE]", "--network-interface IFACE", "--ssh-connect-timeout S",
        "NCCL_SOCKET_IFNAME", "--timeline PATH", "--straggler-report", "HVD_TIMELINE",
        "--bind-to none|core", "HVD_BIND_TO",
        "HVD_STRAGGLER_REPORT"})
    EXPECT_THAT(u, HasSubstr(text));
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
