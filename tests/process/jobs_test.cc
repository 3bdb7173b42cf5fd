// Real multi-process jobs through dprun: the training example and a job whose
// ranks disagree about a tensor.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/job_runner.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;

const std::string kDprun = HVD_DPRUN_PATH;
const std::string kBuild = HVD_BUILD_DIR;

int CountOf(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

TEST(Jobs, TrainingExampleAtFourRanks) {
  CommandResult r = RunCommand(kDprun + " -np 4 " + kBuild + "/examples/train_mlp --epochs 4",
                               std::chrono::seconds(120));
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_THAT(r.output, HasSubstr("[" + std::to_string(rank) + "]<stdout>:rank " +
                                    std::to_string(rank) + ": weights identical across all 4 ranks"));
  EXPECT_THAT(r.output, HasSubstr("[0]<stdout>:epoch  4  loss"));
  EXPECT_THAT(r.output, HasSubstr("accuracy"));
}

TEST(Jobs, MismatchedCountFailsOnEveryRankWithTheDetail) {
  CommandResult r = RunCommand(kDprun + " -np 3 " + kBuild + "/tests/programs/mismatch_job",
                               std::chrono::seconds(60));
  ASSERT_FALSE(r.timed_out) << r.output;
  // Each rank exits 0 only if it saw HVD_MISMATCH and a later allreduce worked.
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(CountOf(r.output, ": HVD_MISMATCH: tensor 'grad' (allreduce): element count differs "
                              "across ranks: ranks 0, 2 have 10; rank 1 has 9"), 3)
      << r.output;
  EXPECT_EQ(CountOf(r.output, "after: HVD_SUCCESS sum=3"), 3) << r.output;
}

TEST(Jobs, EveryCCollectiveAcrossRanks) {
  for (int np : {1, 3, 4}) {
    CommandResult r = RunCommand(kDprun + " -np " + std::to_string(np) + " " + kBuild +
                                     "/tests/programs/c_collectives_job",
                                 std::chrono::seconds(60));
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(CountOf(r.output, " checks passed"), np) << r.output;
    // Ranks of one host share memory; HVD_CPU_OPERATIONS=gloo keeps them on TCP.
    EXPECT_EQ(CountOf(r.output, np == 1 ? " over gloo" : " over shm"), np) << r.output;
  }
  CommandResult r = RunCommand(kDprun + " -np 3 " + kBuild + "/tests/programs/c_collectives_job",
                               std::chrono::seconds(60), {"HVD_CPU_OPERATIONS=gloo"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(CountOf(r.output, " checks passed over gloo"), 3) << r.output;
}

TEST(Jobs, MalformedEnvironmentFailsInitNamingTheVariable) {
  CommandResult r = RunCommand(kDprun + " -np 2 " + kBuild + "/tests/programs/mismatch_job",
                               std::chrono::seconds(60), {"HVD_FUSION_THRESHOLD=lots"});
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("HVD_FUSION_THRESHOLD='lots' is not an integer"));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
