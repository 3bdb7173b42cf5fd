// How HVD_BIND_TO=core divides a host's CPUs among its ranks.
#include "runtime/common/cpu_binding.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace hvd {
namespace {

using Cpus = std::vector<int>;

TEST(CpuBindingTest, EqualContiguousBlocks) {
  const Cpus eight = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(CoresForLocalRank(eight, 0, 2), (Cpus{0, 1, 2, 3}));
  EXPECT_EQ(CoresForLocalRank(eight, 1, 2), (Cpus{4, 5, 6, 7}));
  EXPECT_EQ(CoresForLocalRank(eight, 3, 4), (Cpus{6, 7}));
  EXPECT_EQ(CoresForLocalRank(eight, 0, 1), eight);
  EXPECT_EQ(CoresForLocalRank({0, 1}, 1, 2), (Cpus{1}));
}

TEST(CpuBindingTest, UnevenCountsUseEveryCpuOnce) {
  const Cpus seven = {0, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(CoresForLocalRank(seven, 0, 2), (Cpus{0, 1, 2}));
  EXPECT_EQ(CoresForLocalRank(seven, 1, 2), (Cpus{3, 4, 5, 6}));
  Cpus all;
  for (int r = 0; r < 3; ++r)
    for (int c : CoresForLocalRank(seven, r, 3)) all.push_back(c);
  EXPECT_EQ(all, seven);
}

TEST(CpuBindingTest, BlocksFollowTheAllowedCpusNotTheirNumbers) {
  // e.g. a cpuset or taskset that left the process CPUs 2, 4, 5 and 9.
  const Cpus allowed = {2, 4, 5, 9};
  EXPECT_EQ(CoresForLocalRank(allowed, 0, 2), (Cpus{2, 4}));
  EXPECT_EQ(CoresForLocalRank(allowed, 1, 2), (Cpus{5, 9}));
}

TEST(CpuBindingTest, MoreRanksThanCpusShareThemInTurn) {
  const Cpus two = {0, 1};
  EXPECT_EQ(CoresForLocalRank(two, 0, 4), (Cpus{0}));
  EXPECT_EQ(CoresForLocalRank(two, 1, 4), (Cpus{1}));
  EXPECT_EQ(CoresForLocalRank(two, 2, 4), (Cpus{0}));
  EXPECT_EQ(CoresForLocalRank(two, 3, 4), (Cpus{1}));
}

TEST(CpuBindingTest, BadInputGivesNoCpus) {
  EXPECT_TRUE(CoresForLocalRank({}, 0, 1).empty());
  EXPECT_TRUE(CoresForLocalRank({0, 1}, 2, 2).empty());
  EXPECT_TRUE(CoresForLocalRank({0, 1}, -1, 2).empty());
  EXPECT_TRUE(CoresForLocalRank({0, 1}, 0, 0).empty());
}

TEST(CpuBindingTest, CpuListString) {
  EXPECT_EQ(CpuListString({}), "");
  EXPECT_EQ(CpuListString({3}), "3");
  EXPECT_EQ(CpuListString({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
}

Cpus Affinity(pthread_t t) {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(pthread_getaffinity_np(t, sizeof(set), &set), 0);
  Cpus out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// In a child process, so the test binary's own affinity is left alone.
TEST(CpuBindingTest, BindsThreadsThatAlreadyRunAndLaterOnes) {
  const Cpus before = Affinity(pthread_self());
  ASSERT_FALSE(before.empty());
  // The second of two "ranks": the upper half of the CPUs (the one CPU, on one).
  const Cpus expected = CoresForLocalRank(before, 1, 2);
  ASSERT_FALSE(expected.empty());
  ASSERT_EXIT(
      {
        std::mutex mu;
        std::condition_variable cv;
        bool go = false;
        std::thread early([&] {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return go; });
        });
        Cpus cpus;
        const Status s = BindToCores(1, 2, &cpus);
        Cpus later;
        std::thread([&] { later = Affinity(pthread_self()); }).join();
        const bool ok = s.ok() && cpus == expected && Affinity(pthread_self()) == expected &&
                        Affinity(early.native_handle()) == expected && later == expected;
        {
          std::lock_guard<std::mutex> lock(mu);
          go = true;
        }
        cv.notify_all();
        early.join();
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CpuBindingTest, CallingThreadCpuCountFollowsTheThreadsAffinity) {
  const Cpus all = Affinity(pthread_self());
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(CallingThreadCpuCount(), static_cast<int>(all.size()));
  int pinned = -1;
  std::thread([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(all.back(), &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0) pinned = CallingThreadCpuCount();
  }).join();
  EXPECT_EQ(pinned, 1);
  EXPECT_EQ(CallingThreadCpuCount(), static_cast<int>(all.size())) << "only the other thread was pinned";
}

}  // namespace
}  // namespace hvd
