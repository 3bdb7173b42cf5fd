// The shared-memory ControlChannel across N ranks as N threads (and a forked child
// where a real second process matters): messages of 0 B, 100 B, 64 KiB and 4 MiB
// both ways, uneven sizes per rank, many rounds, irregular call patterns, a peer
// that never arrives or stops answering, and a peer process that dies.
//
// Timings: ShmControlTiming.DISABLED_RoundTripTwoProcesses (run with
// --gtest_also_run_disabled_tests --gtest_filter='ShmControlTiming.*').
#include "runtime/transport/shm/shm_control_channel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <thread>

#include "runtime/transport/gloo/gloo_backend.h"
#include "runtime/transport/gloo/gloo_control_channel.h"
#include "tests/multirank/fork_rank.h"
#include "tests/test_util.h"

namespace hvd {
namespace testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

std::string Prefix(const std::string& name) {
  return "hvdtest-" + std::to_string(getpid()) + "-cc-" + name;
}

ShmControlChannelOptions Options(std::shared_ptr<Store> store, const std::string& prefix,
                                 int rank, int size, milliseconds timeout = milliseconds(10000),
                                 size_t slot_bytes = ShmControlChannelOptions().slot_bytes) {
  ShmControlChannelOptions o;
  o.store = std::move(store);
  o.name_prefix = prefix;
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  o.slot_bytes = slot_bytes;
  return o;
}

void RunChannels(int size, const std::function<void(int, ControlChannel&)>& fn,
                 size_t slot_bytes = ShmControlChannelOptions().slot_bytes) {
  auto store = NewInMemoryStore();
  const std::string prefix = Prefix("run");
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<ControlChannel> ch;
      const Status s =
          NewShmControlChannel(Options(store, prefix, r, size, milliseconds(10000), slot_bytes), &ch);
      if (!s.ok()) {
        ADD_FAILURE() << "rank " << r << ": " << s.ToString();
        return;
      }
      EXPECT_EQ(ch->rank(), r);
      EXPECT_EQ(ch->size(), size);
      fn(r, *ch);
    });
  }
  for (auto& t : threads) t.join();
}

// Rank r's message of `len` bytes in round `round`.
std::string Message(int rank, int round, size_t len) {
  std::string m(len, '\0');
  for (size_t i = 0; i < len; ++i) m[i] = static_cast<char>(rank * 31 + round * 7 + i * 13 + (i >> 9));
  return m;
}

// One Gather + Broadcast round; returns "" or what went wrong.
std::string Round(ControlChannel& ch, int round, const std::function<size_t(int)>& len_of,
                  size_t response_len) {
  std::vector<std::string> all;
  Status s = ch.Gather(Message(ch.rank(), round, len_of(ch.rank())), &all);
  if (!s.ok()) return "gather: " + s.ToString();
  if (ch.rank() == 0) {
    if (static_cast<int>(all.size()) != ch.size()) return "gather: wrong count";
    for (int r = 0; r < ch.size(); ++r)
      if (all[r] != Message(r, round, len_of(r)))
        return "gather: wrong message from rank " + std::to_string(r) + " in round " +
               std::to_string(round);
  } else if (!all.empty()) {
    return "gather: non-root got messages";
  }
  std::string msg = ch.rank() == 0 ? Message(100, round, response_len) : "stale";
  s = ch.Broadcast(&msg);
  if (!s.ok()) return "broadcast: " + s.ToString();
  if (msg != Message(100, round, response_len))
    return "broadcast: wrong response in round " + std::to_string(round);
  return "";
}

class ShmControlChannelTest : public ::testing::TestWithParam<int> {};

TEST_P(ShmControlChannelTest, EveryMessageSizeBothWays) {
  const int size = GetParam();
  RunChannels(size, [&](int rank, ControlChannel& ch) {
    int round = 0;
    for (size_t len : {size_t{0}, size_t{100}, size_t{64} << 10, size_t{4} << 20})
      EXPECT_EQ(Round(ch, round++, [&](int) { return len; }, len), "") << "rank " << rank;
  });
}

TEST_P(ShmControlChannelTest, UnevenSizesThroughSmallSlots) {
  const int size = GetParam();
  RunChannels(size, [&](int rank, ControlChannel& ch) {
    for (int round = 0; round < 40; ++round) {
      auto len_of = [&](int r) -> size_t {
        return (r + round) % 4 == 0 ? 20000 + 977 * r : (r * 131 + round * 17) % 500;
      };
      EXPECT_EQ(Round(ch, round, len_of, round % 5 == 0 ? 50000 : round * 3), "") << "rank " << rank;
    }
  }, /*slot_bytes=*/4096);
}

TEST_P(ShmControlChannelTest, ManyRoundsOfSmallMessages) {
  const int size = GetParam();
  RunChannels(size, [&](int rank, ControlChannel& ch) {
    for (int round = 0; round < 1500; ++round)
      ASSERT_EQ(Round(ch, round, [&](int r) -> size_t { return 80 + (r * 7 + round) % 40; }, 100),
                "")
          << "rank " << rank;
  });
}

// The channel does not rely on Gather and Broadcast alternating.
TEST_P(ShmControlChannelTest, GathersAndBroadcastsInAnyPattern) {
  const int size = GetParam();
  RunChannels(size, [&](int rank, ControlChannel& ch) {
    for (int i = 0; i < 3; ++i) {
      std::vector<std::string> all;
      ASSERT_TRUE(ch.Gather(Message(rank, i, 300 * i), &all).ok());
      if (rank == 0) {
        for (int r = 0; r < size; ++r) EXPECT_EQ(all[r], Message(r, i, 300 * i));
      }
    }
    for (int i = 0; i < 4; ++i) {
      std::string msg = rank == 0 ? Message(0, i, 70000 * (i % 2)) : "";
      ASSERT_TRUE(ch.Broadcast(&msg).ok());
      EXPECT_EQ(msg, Message(0, i, 70000 * (i % 2)));
    }
    EXPECT_EQ(Round(ch, 9, [](int) { return size_t{10}; }, 10), "");
  });
}

// Word all-reduces over the tree, of every length up to a full response cache's two
// bit vectors, between Gather and Broadcast rounds (they share nothing).
TEST_P(ShmControlChannelTest, WordAllreducesBetweenRounds) {
  const int size = GetParam();
  RunChannels(size, [&](int rank, ControlChannel& ch) {
    EXPECT_TRUE(ch.SupportsWordAllreduce());
    int round = 0;
    for (size_t n : {size_t{1}, size_t{3}, size_t{17}, size_t{2050}}) {
      for (size_t or_words : {size_t{0}, n / 2, n}) {
        ASSERT_EQ(WordAllreduceRound(ch, round, n, or_words), "");
        ASSERT_EQ(Round(ch, round, [](int r) -> size_t { return 50 + r; }, 60), "") << rank;
        ++round;
      }
    }
    for (; round < 300; ++round) ASSERT_EQ(WordAllreduceRound(ch, round, 33, 32), "");
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmControlChannelTest, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// 280 ranks: a tree three levels deep below the root (fan-out 16), leaves at every
// level.
TEST(ShmControlChannel, WordAllreduceOverADeepTree) {
  RunChannels(280, [&](int, ControlChannel& ch) {
    for (int round = 0; round < 10; ++round) ASSERT_EQ(WordAllreduceRound(ch, round, 34, 17), "");
  });
}

TEST(ShmControlChannel, RefusesMoreWordsThanAnArea) {
  RunChannels(2, [&](int, ControlChannel& ch) {
    std::vector<uint64_t> words(4097, 1);
    const Status s = ch.AllreduceWords(&words, 4097);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("4097 words to all-reduce, at most 4096"));
  });
}

TEST(ShmControlChannel, RejectsBadOptions) {
  std::unique_ptr<ControlChannel> ch;
  auto store = NewInMemoryStore();
  EXPECT_EQ(NewShmControlChannel(Options(store, Prefix("bad"), 0, 2, milliseconds(100), 100), &ch)
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NewShmControlChannel(Options(store, Prefix("bad"), -1, 2), &ch).code(),
            StatusCode::kInvalidArgument);
}

TEST(ShmControlChannel, PeerThatNeverArrivesTimesOut) {
  std::unique_ptr<ControlChannel> ch;
  const auto start = std::chrono::steady_clock::now();
  const Status s = NewShmControlChannel(
      Options(NewInMemoryStore(), Prefix("absent"), 0, 2, milliseconds(300)), &ch);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("rank(s) 1"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
}

// Rank 1 connects but never sends: the root's Gather times out naming it and the
// channel stays broken; a rank waiting for a silent root names rank 0.
TEST(ShmControlChannel, SilentPeersAreNamed) {
  for (int silent : {1, 0}) {
    auto store = NewInMemoryStore();
    const std::string prefix = Prefix("silent" + std::to_string(silent));
    std::atomic<bool> done{false};
    const int waiter = 1 - silent;
    std::thread quiet([&] {
      std::unique_ptr<ControlChannel> ch;
      ASSERT_TRUE(NewShmControlChannel(Options(store, prefix, silent, 2), &ch).ok());
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
    });
    std::unique_ptr<ControlChannel> ch;
    ASSERT_TRUE(NewShmControlChannel(Options(store, prefix, waiter, 2, milliseconds(300)), &ch).ok());
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::string> all;
    std::string msg;
    const Status s = waiter == 0 ? ch->Gather("hello", &all) : ch->Broadcast(&msg);
    const auto took = std::chrono::steady_clock::now() - start;
    done = true;
    quiet.join();
    EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("waiting for rank " + std::to_string(silent)));
    EXPECT_GE(took, milliseconds(280));
    EXPECT_LT(took, milliseconds(2000));
    EXPECT_EQ(ch->Gather("again", &all).message(), s.message());
  }
}

// Rank 2 never sends. The root (short timeout) gives up; rank 1, already waiting for
// the responses with a long timeout, fails at once with the root's reason.
TEST(ShmControlChannel, RootFailureReachesWaitingRanks) {
  auto store = NewInMemoryStore();
  std::atomic<bool> done{false};
  Status s1;
  milliseconds took1{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<ControlChannel> ch;
      ASSERT_TRUE(NewShmControlChannel(
          Options(store, Prefix("first"), r, 3, milliseconds(r == 0 ? 300 : 20000)), &ch).ok());
      if (r == 2) {
        while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
        return;
      }
      std::vector<std::string> all;
      const auto start = std::chrono::steady_clock::now();
      Status s = ch->Gather("req", &all);
      std::string msg;
      if (s.ok()) s = ch->Broadcast(&msg);
      if (r == 1) {
        s1 = s;
        took1 = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
      }
    });
  }
  threads[0].join();
  threads[1].join();
  done = true;
  threads[2].join();
  EXPECT_EQ(s1.code(), StatusCode::kTimeout) << s1.ToString();
  EXPECT_THAT(s1.message(), HasSubstr("rank 0 failed first"));
  EXPECT_THAT(s1.message(), HasSubstr("waiting for rank 2"));
  EXPECT_LT(took1, milliseconds(2000));
}

// A child process runs rounds with the parent and then _exits; the parent, in either
// role, must fail within a couple of seconds naming the child's rank and pid.
void ExpectLostPeer(int child_rank) {
  const std::string prefix = Prefix("lost" + std::to_string(child_rank));
  ForkedRank child = ForkRank([&](std::shared_ptr<Store> store) {
    std::unique_ptr<ControlChannel> ch;
    if (!NewShmControlChannel(Options(store, prefix, child_rank, 2), &ch).ok()) return 3;
    for (int round = 0; round < 100; ++round)
      if (!Round(*ch, round, [](int) { return size_t{100}; }, 100).empty()) return 4;
    _exit(7);
  });
  ASSERT_GT(child.pid, 0);
  ASSERT_TRUE(child.store);
  std::unique_ptr<ControlChannel> ch;
  ASSERT_TRUE(NewShmControlChannel(Options(child.store, prefix, 1 - child_rank, 2), &ch).ok());
  std::string err;
  int round = 0;
  const auto start = std::chrono::steady_clock::now();
  while (err.empty() && round < 1000)
    err = Round(*ch, round++, [](int) { return size_t{100}; }, 100);
  EXPECT_EQ(round, 101);
  EXPECT_THAT(err, HasSubstr("HVD_REMOTE_ERROR"));
  EXPECT_THAT(err, HasSubstr("lost rank " + std::to_string(child_rank) + " (pid " +
                             std::to_string(child.pid) + " exited)"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
  EXPECT_EQ(WaitChild(child.pid, milliseconds(5000)), 7);
}

TEST(ShmControlChannelProcesses, LostWorkerIsNamedByTheRoot) { ExpectLostPeer(1); }
TEST(ShmControlChannelProcesses, LostRootIsNamedByTheWorker) { ExpectLostPeer(0); }

// ------------------------------------------------------------ timings (by hand)

// Gather + Broadcast rounds of 100-byte messages between two processes, through the
// shared-memory channel and through the Gloo one; rank 0 prints the mean round time.
TEST(ShmControlTiming, DISABLED_RoundTripTwoProcesses) {
  const std::string prefix = Prefix("timing");
  auto body = [&](const std::shared_ptr<Store>& store, int rank) -> std::string {
    std::unique_ptr<ControlChannel> shm;
    Status s = NewShmControlChannel(Options(NewPrefixStore(store, "shm/"), prefix, rank, 2), &shm);
    if (!s.ok()) return s.ToString();
    std::shared_ptr<gloo::transport::Device> dev;
    std::shared_ptr<gloo::Context> ctx;
    if (!(s = CreateGlooDevice("127.0.0.1", "", &dev)).ok()) return s.ToString();
    if (!(s = ConnectGlooContext(NewPrefixStore(store, "gloo/"), dev, rank, 2,
                                 milliseconds(30000), &ctx)).ok())
      return s.ToString();
    auto gloo = NewGlooControlChannel(ctx, milliseconds(30000));
    for (size_t len : {size_t{100}, size_t{4096}}) {
      for (ControlChannel* ch : {shm.get(), gloo.get()}) {
        const int rounds = ch == shm.get() ? 50000 : 5000;
        const std::string mine(len, 'r');
        std::string resp;
        std::vector<std::string> all;
        std::vector<double> best;
        for (int rep = 0; rep < 5; ++rep) {
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < rounds / 5; ++i) {
            if (!(s = ch->Gather(mine, &all)).ok()) return s.ToString();
            resp = rank == 0 ? std::string(len, 'R') : std::string();
            if (!(s = ch->Broadcast(&resp)).ok()) return s.ToString();
          }
          best.push_back(std::chrono::duration<double, std::micro>(
                             std::chrono::steady_clock::now() - t0).count() / (rounds / 5));
        }
        std::sort(best.begin(), best.end());
        if (rank == 0)
          std::printf("control round %5zu B  %-4s  best %8.2f us  median %8.2f us  (%d rounds)\n",
                      len, ch == shm.get() ? "shm" : "gloo", best[0], best[2], rounds);
      }
    }
    return "";
  };
  ExpectTwoRanksPass(body, milliseconds(300000));
}

}  // namespace
}  // namespace testing
}  // namespace hvd
