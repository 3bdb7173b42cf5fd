// The pure parts of SetUpJob: the variables of dprun's own flags, and the random hex
// of the job's secret and id.
#include "launcher/job_setup.h"

#include <gtest/gtest.h>

namespace hvd {
namespace launcher {
namespace {

TEST(JobSetup, FlagVariablesOnlyForTheFlagsGiven) {
  LauncherOptions options;
  EXPECT_TRUE(FlagVariables(options).empty());
  options.timeline_path = "/tmp/t.json";
  options.bind_to = "core";
  options.straggler_report = true;
  const EnvVars want = {
      {"HVD_TIMELINE", "/tmp/t.json"}, {"HVD_BIND_TO", "core"}, {"HVD_STRAGGLER_REPORT", "1"}};
  EXPECT_EQ(FlagVariables(options), want);
}

// horovodrun's flags come after dprun's own; the last of a name wins (--autotune
// then --no-autotune is off), as argparse leaves horovodrun's last value.
TEST(JobSetup, HorovodrunFlagVariablesLastOneWins) {
  LauncherOptions options;
  options.timeline_path = "/tmp/t.json";
  options.flag_variables = {{"HVD_AUTOTUNE", "1"}, {"HVD_CYCLE_TIME", "2"}, {"HVD_AUTOTUNE", "0"}};
  const EnvVars want = {
      {"HVD_TIMELINE", "/tmp/t.json"}, {"HVD_CYCLE_TIME", "2"}, {"HVD_AUTOTUNE", "0"}};
  EXPECT_EQ(FlagVariables(options), want);
}

TEST(JobSetup, RandomHexHasTwoDigitsPerByteAndDiffers) {
  std::string a, b;
  ASSERT_TRUE(RandomHex(32, &a).ok());
  ASSERT_TRUE(RandomHex(32, &b).ok());
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace launcher
}  // namespace hvd
