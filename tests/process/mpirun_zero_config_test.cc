// `mpirun -np 2 prog` with no dprun variable at all (no HVD_STORE_PORT, no
// HVD_STORE_ADDR): the store's port comes from Open MPI's job id
// (controller/loop/launch_env.h). A C program over the C API, and a Python program over
// hvd.torch, each in a network namespace with only loopback when the machine
// allows it, else with Open MPI's transports pinned to lo.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

// Runs `command` under mpirun -np 2 with a clean HVD_* environment: every HVD_
// variable of this process is unset, so only mpirun's own reach the ranks.
CommandResult Mpirun(const std::string& exports, const std::string& command) {
  const std::string ns = "hvdz" + std::to_string(::getpid());
  const bool isolated =
      ::geteuid() == 0 &&
      RunCommand("ip netns add " + ns + " && ip -n " + ns + " link set lo up", seconds(10))
              .exit_code == 0;
  const std::string prefix = isolated ? "ip netns exec " + ns + " " : "";
  const std::string clean =
      "for v in $(env | sed -n 's/^\\(HVD_[A-Z_]*\\)=.*/\\1/p'); do unset $v; done; ";
  CommandResult r = RunCommand(
      clean + prefix +
          "mpirun.openmpi --allow-run-as-root --oversubscribe -np 2 --mca btl self,tcp "
          "--mca btl_tcp_if_include lo --mca oob_tcp_if_include lo " + exports + command,
      seconds(120));
  if (isolated)
    RunCommand("ip netns pids " + ns + " | xargs -r kill -9; ip netns del " + ns, seconds(10));
  return r;
}

bool HaveMpirun() { return ::access("/usr/bin/mpirun.openmpi", X_OK) == 0; }

TEST(MpirunZeroConfig, CProgram) {
  if (!HaveMpirun()) GTEST_SKIP() << "Open MPI (mpirun.openmpi) is not installed";
  const CommandResult r =
      Mpirun("", std::string(HVD_BUILD_DIR) + "/tests/programs/c_collectives_job");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("rank 0: 46 checks passed"));
  EXPECT_THAT(r.output, HasSubstr("rank 1: 46 checks passed"));
  EXPECT_THAT(r.output, Not(HasSubstr("HVD_STORE_PORT")));
}

// HVD_LIBRARY only tells Python which libhvd.so to load (this build's): without
// dprun, nothing else says so here. It is not a launch setting.
TEST(MpirunZeroConfig, PythonProgram) {
  if (!HaveMpirun()) GTEST_SKIP() << "Open MPI (mpirun.openmpi) is not installed";
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3";
  const std::string code =
      "import os, numpy as np, hvd.numpy as hvd; hvd.init(); "
      "s = hvd.allreduce(np.full(3, hvd.rank() + 1.0), op=hvd.Sum); "
      "os.write(1, ('py rank %d of %d sum %s\\n' % (hvd.rank(), hvd.size(), s.tolist())).encode())";
  const CommandResult r =
      Mpirun("-x HVD_LIBRARY=" + std::string(HVD_BUILD_DIR) + "/libhvd.so -x PYTHONPATH=" +
                 std::string(HVD_SOURCE_DIR) + "/bindings/python ",
             "/usr/bin/python3 -c \"" + code + "\"");
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("py rank 0 of 2 sum [3.0, 3.0, 3.0]"));
  EXPECT_THAT(r.output, HasSubstr("py rank 1 of 2 sum [3.0, 3.0, 3.0]"));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
