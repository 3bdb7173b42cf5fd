// The Gloo ControlChannel: rounds of every size in order, with each side's next
// receive posted ahead; and when a peer's connection is already closed as a round
// begins: the receive it posts fails at once (Gloo throws at the post, not only in
// the wait), and that must come back as the lost peer, named, not end the process.
#include "runtime/transport/gloo/gloo_control_channel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/store/store.h"
#include "runtime/transport/gloo/gloo_backend.h"
#include "tests/test_util.h"

namespace hvd {
namespace {

using ::testing::HasSubstr;
using std::chrono::milliseconds;

// Rank `rank` of `size`'s control channel over loopback (one of the test's threads).
void Connect(const std::shared_ptr<Store>& store, int rank, int size,
             std::unique_ptr<ControlChannel>* ch) {
  std::shared_ptr<gloo::transport::Device> device;
  std::shared_ptr<gloo::Context> context;
  Status s = CreateGlooDevice("127.0.0.1", "", &device);
  if (s.ok()) s = ConnectGlooContext(store, device, rank, size, milliseconds(10000), &context);
  ASSERT_TRUE(s.ok()) << s.ToString();
  *ch = NewGlooControlChannel(context, milliseconds(10000));
}

// Two ranks as two threads; `gone` closes its channel after one good round, and
// the other then starts a round on the closed connection: a Gather and a
// Broadcast, or with `exchange` an Exchange (each round then is one).
Status RoundAfterPeerLeft(int gone, bool exchange = false) {
  auto store = NewInMemoryStore();
  Status survivor;
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      std::unique_ptr<ControlChannel> ch;
      ASSERT_NO_FATAL_FAILURE(Connect(store, r, 2, &ch));
      std::vector<std::string> all;
      std::string msg = "response";
      auto round = [&] {
        if (exchange) return ch->Exchange("request", &msg);
        Status g = ch->Gather("request", &all);
        return g.ok() ? ch->Broadcast(&msg) : g;
      };
      ASSERT_TRUE(round().ok());
      ASSERT_TRUE(store->Set("round1/" + std::to_string(r), "done").ok());
      if (r == gone) return;  // closes the channel, the context and the device
      ASSERT_TRUE(store->Wait({"round1/" + std::to_string(gone)}, milliseconds(10000)).ok());
      std::this_thread::sleep_for(milliseconds(300));  // the close has arrived
      const auto start = std::chrono::steady_clock::now();
      survivor = round();
      // Lost at once, not after the channel's 10 s timeout.
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    });
  }
  for (auto& t : threads) t.join();
  return survivor;
}

// A message of `bytes` bytes that names its sender and round.
std::string Message(const std::string& tag, int round, size_t bytes) {
  std::string m = tag + "/" + std::to_string(round) + "/";
  while (m.size() < bytes) m += static_cast<char>('a' + (m.size() + round) % 26);
  m.resize(bytes);
  return m;
}

// Many cycles at 3 ranks, messages empty, inline, at the frame's edge and with a
// tail: each round's messages arrive whole and in their own round, though every
// receive but the first is posted a call ahead.
TEST(GlooControlChannel, RoundsOfEverySizeArriveInOrder) {
  constexpr int kRanks = 3, kRounds = 120;
  const size_t kSizes[] = {0, 1, 40, 1015, 1016, 1017, 5000};
  auto store = NewInMemoryStore();
  std::thread threads[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    threads[r] = std::thread([&, r] {
      std::unique_ptr<ControlChannel> ch;
      ASSERT_NO_FATAL_FAILURE(Connect(store, r, kRanks, &ch));
      for (int round = 0; round < kRounds; ++round) {
        const size_t n = std::size(kSizes);
        std::vector<std::string> all;
        const std::string mine = Message("rank" + std::to_string(r), round, kSizes[(round + r) % n]);
        ASSERT_TRUE(ch->Gather(mine, &all).ok()) << "round " << round;
        if (r == 0) {
          ASSERT_EQ(all.size(), static_cast<size_t>(kRanks));
          for (int p = 0; p < kRanks; ++p)
            ASSERT_EQ(all[p], Message("rank" + std::to_string(p), round, kSizes[(round + p) % n]))
                << "round " << round << ", from rank " << p;
        }
        const std::string expected = Message("root", round, kSizes[(round * 3) % n]);
        std::string msg = r == 0 ? expected : "stale";
        ASSERT_TRUE(ch->Broadcast(&msg).ok()) << "round " << round;
        ASSERT_EQ(msg, expected) << "round " << round << " on rank " << r;
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Two ranks exchanging (the controller's cycle at 2 ranks): every pair of sizes,
// each rank's message reaches the other whole and in its own round, with every
// receive but the first posted a call ahead; two messages with tails cross too
// (each tail leaves once the other side has taken the frame before it).
TEST(GlooControlChannel, ExchangesOfEverySizeCrossInOrder) {
  constexpr int kRounds = 120;
  const size_t kSizes[] = {0, 1, 40, 1015, 1016, 1017, 5000};
  auto store = NewInMemoryStore();
  std::thread threads[2];
  for (int r = 0; r < 2; ++r) {
    threads[r] = std::thread([&, r] {
      std::unique_ptr<ControlChannel> ch;
      ASSERT_NO_FATAL_FAILURE(Connect(store, r, 2, &ch));
      ASSERT_TRUE(ch->SupportsExchange());
      const size_t n = std::size(kSizes);
      for (int round = 0; round < kRounds; ++round) {
        // Every pair of sizes (rank 0's by round, rank 1's by round / n), both
        // with tails among them.
        auto size_of = [&](int rank) { return kSizes[(rank == 0 ? round : round / n) % n]; };
        const std::string mine = Message("rank" + std::to_string(r), round, size_of(r));
        std::string theirs = "stale";
        ASSERT_TRUE(ch->Exchange(mine, &theirs).ok()) << "round " << round;
        ASSERT_EQ(theirs, Message("rank" + std::to_string(1 - r), round, size_of(1 - r)))
            << "round " << round << " on rank " << r;
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Word all-reduces by recursive doubling at 1..9 ranks (powers of two and not),
// between Gather and Broadcast rounds whose receives are posted a call ahead: the
// word messages take slots of their own, so neither lands in the other's buffer.
TEST(GlooControlChannel, WordAllreducesBetweenRounds) {
  for (int size = 1; size <= 9; ++size) {
    auto store = NewInMemoryStore();
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        std::unique_ptr<ControlChannel> ch;
        ASSERT_NO_FATAL_FAILURE(Connect(store, r, size, &ch));
        EXPECT_TRUE(ch->SupportsWordAllreduce());
        for (int round = 0; round < 30; ++round) {
          const size_t n = 1 + (round * 37) % 300;
          ASSERT_EQ(testing::WordAllreduceRound(*ch, round, n, n * (round % 3) / 2), "") << "size " << size;
          std::vector<std::string> all;
          ASSERT_TRUE(ch->Gather(Message("g", round, 20 + r), &all).ok());
          if (r == 0) {
            for (int p = 0; p < size; ++p) ASSERT_EQ(all[p], Message("g", round, 20 + p));
          }
          std::string msg = r == 0 ? Message("b", round, 1500) : "";
          ASSERT_TRUE(ch->Broadcast(&msg).ok());
          ASSERT_EQ(msg, Message("b", round, 1500));
        }
      });
    }
    for (auto& t : threads) t.join();
  }
}

TEST(GlooControlChannel, TheRootNamesAWorkerThatLeftBeforeTheRound) {
  const Status s = RoundAfterPeerLeft(1);
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("lost rank 1"));
}

TEST(GlooControlChannel, AWorkerNamesTheRootThatLeftBeforeTheRound) {
  const Status s = RoundAfterPeerLeft(0);
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("lost rank 0"));
}

// At two ranks each side names the other, whichever left.
TEST(GlooControlChannel, AnExchangeNamesTheRankThatLeftBeforeIt) {
  for (int gone : {0, 1}) {
    const Status s = RoundAfterPeerLeft(gone, /*exchange=*/true);
    EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr("lost rank " + std::to_string(gone)));
  }
}

}  // namespace
}  // namespace hvd
