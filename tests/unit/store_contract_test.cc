// The hvd::Store contract (controller/store/store.h), run against every implementation:
// InMemoryStore, a PrefixStore over one, TcpStoreClient <-> TcpStoreServer on
// 127.0.0.1, the server's LocalStore(), and local and remote handles mixed on one
// key space (what dprun and its ranks do).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "controller/store/store.h"
#include "controller/store/tcp_store.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One key space and a way to get more handles on it.
class Backend {
 public:
  virtual ~Backend() = default;
  // A new handle on the shared key space; for TCP, a new connection.
  virtual std::shared_ptr<Store> NewHandle() = 0;
};

class InMemoryBackend : public Backend {
 public:
  std::shared_ptr<Store> NewHandle() override { return store_; }

 private:
  std::shared_ptr<Store> store_ = NewInMemoryStore();
};

class PrefixBackend : public Backend {
 public:
  std::shared_ptr<Store> NewHandle() override { return NewPrefixStore(base_, "job/7/"); }

 private:
  std::shared_ptr<Store> base_ = NewInMemoryStore();
};

// kRemote: every handle is a TCP client. kLocal: every handle is LocalStore().
// kMixed: handles alternate, so every cross-thread test crosses local and remote.
class TcpBackend : public Backend {
 public:
  enum Mode { kRemote, kLocal, kMixed };
  explicit TcpBackend(Mode mode) : mode_(mode) {
    TcpStoreServer::Options opts;
    opts.secret = "contract-secret";
    const Status s = TcpStoreServer::Start(opts, &server_);
    HVD_CHECK_MSG(s.ok(), s.ToString());
  }
  std::shared_ptr<Store> NewHandle() override {
    const bool local = mode_ == kLocal || (mode_ == kMixed && (handles_++ % 2 == 1));
    if (local) return server_->LocalStore();
    std::shared_ptr<Store> client;
    const Status s = ConnectTcpStore("127.0.0.1", server_->port(), "contract-secret",
                                     milliseconds(5000), &client);
    HVD_CHECK_MSG(s.ok(), s.ToString());
    return client;
  }

 private:
  Mode mode_;
  int handles_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
};

struct BackendParam {
  const char* name;
  std::function<std::unique_ptr<Backend>()> make;
};

void PrintTo(const BackendParam& p, std::ostream* os) { *os << p.name; }

class StoreContractTest : public ::testing::TestWithParam<BackendParam> {
 protected:
  void SetUp() override {
    backend_ = GetParam().make();
    store_ = backend_->NewHandle();
  }

  std::unique_ptr<Backend> backend_;
  std::shared_ptr<Store> store_;
};

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

TEST_P(StoreContractTest, SetThenGet) {
  ASSERT_TRUE(store_->Set("a", "1").ok());
  std::string v;
  ASSERT_TRUE(store_->Get("a", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "1");
}

TEST_P(StoreContractTest, SetReplacesValue) {
  ASSERT_TRUE(store_->Set("a", "first").ok());
  ASSERT_TRUE(store_->Set("a", "second").ok());
  std::string v;
  ASSERT_TRUE(store_->Get("a", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "second");
}

TEST_P(StoreContractTest, ValuesAreBytes) {
  const std::string binary("\0\x01\xff\n\0end", 8);
  ASSERT_TRUE(store_->Set("bin", binary).ok());
  ASSERT_TRUE(store_->Set("empty", "").ok());
  std::string v = "junk";
  ASSERT_TRUE(store_->Get("bin", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, binary);
  ASSERT_TRUE(store_->Get("empty", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "");
}

TEST_P(StoreContractTest, LargeValue) {
  const std::string big(4 << 20, 'z');
  ASSERT_TRUE(store_->Set("big", big).ok());
  std::string v;
  ASSERT_TRUE(store_->Get("big", milliseconds(5000), &v).ok());
  EXPECT_EQ(v, big);
}

TEST_P(StoreContractTest, GetWaitsForLaterSetFromAnotherThread) {
  auto other = backend_->NewHandle();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(150));
    EXPECT_TRUE(other->Set("late", "here").ok());
  });
  const auto start = Clock::now();
  std::string v;
  const Status s = store_->Get("late", milliseconds(5000), &v);
  const double ms = MsSince(start);
  setter.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v, "here");
  EXPECT_GE(ms, 100);
  EXPECT_LT(ms, 4000);
}

TEST_P(StoreContractTest, GetTimesOutNamingTheKey) {
  const auto start = Clock::now();
  std::string v;
  const Status s = store_->Get("never", milliseconds(200), &v);
  const double ms = MsSince(start);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("never"), std::string::npos) << s.message();
  EXPECT_GE(ms, 180);
  EXPECT_LT(ms, 2000);
}

TEST_P(StoreContractTest, WaitTimesOutNamingOnlyMissingKeys) {
  ASSERT_TRUE(store_->Set("present", "x").ok());
  const auto start = Clock::now();
  const Status s = store_->Wait({"present", "absent"}, milliseconds(250));
  const double ms = MsSince(start);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  // A PrefixStore names the full key, so match the end of the quoted key only.
  EXPECT_NE(s.message().find("absent'"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("present'"), std::string::npos) << s.message();
  EXPECT_GE(ms, 230);
  EXPECT_LT(ms, 2000);
}

TEST_P(StoreContractTest, WaitReturnsWhenAllKeysAreSet) {
  auto other = backend_->NewHandle();
  std::thread setter([&] {
    EXPECT_TRUE(other->Set("k1", "1").ok());
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(other->Set("k2", "2").ok());
  });
  const Status s = store_->Wait({"k1", "k2"}, milliseconds(5000));
  setter.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST_P(StoreContractTest, ZeroTimeoutChecksWithoutWaiting) {
  EXPECT_EQ(store_->Wait({"z"}, milliseconds(0)).code(), StatusCode::kTimeout);
  ASSERT_TRUE(store_->Set("z", "1").ok());
  EXPECT_TRUE(store_->Wait({"z"}, milliseconds(0)).ok());
  EXPECT_TRUE(store_->Wait({}, milliseconds(0)).ok());
}

TEST_P(StoreContractTest, AddCountsFromZeroAndReturnsTheNewValue) {
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("n", 5, &r).ok());
  EXPECT_EQ(r, 5);
  ASSERT_TRUE(store_->Add("n", -7, &r).ok());
  EXPECT_EQ(r, -2);
  std::string v;
  ASSERT_TRUE(store_->Get("n", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "-2");
}

TEST_P(StoreContractTest, AddOnANonIntegerFails) {
  ASSERT_TRUE(store_->Set("text", "abc").ok());
  int64_t r = 0;
  EXPECT_EQ(store_->Add("text", 1, &r).code(), StatusCode::kInvalidArgument);
  // The store still works afterwards.
  EXPECT_TRUE(store_->Add("other", 1, &r).ok());
}

TEST_P(StoreContractTest, AddIsAtomicAcrossThreads) {
  constexpr int kThreads = 8, kIncrements = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([h = backend_->NewHandle()] {
      for (int i = 0; i < kIncrements; ++i) {
        int64_t r = 0;
        ASSERT_TRUE(h->Add("counter", 1, &r).ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("counter", 0, &r).ok());
  EXPECT_EQ(r, kThreads * kIncrements);
}

TEST_P(StoreContractTest, DeleteRemovesTheKey) {
  ASSERT_TRUE(store_->Set("d", "1").ok());
  ASSERT_TRUE(store_->Delete("d").ok());
  std::string v;
  EXPECT_EQ(store_->Get("d", milliseconds(100), &v).code(), StatusCode::kTimeout);
  EXPECT_TRUE(store_->Delete("d").ok());  // Absent keys are not an error.
  ASSERT_TRUE(store_->Set("d", "2").ok());
  ASSERT_TRUE(store_->Get("d", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "2");
}

TEST_P(StoreContractTest, ManyConcurrentClientsRendezvous) {
  constexpr int kClients = 32;
  std::vector<std::string> all;
  for (int i = 0; i < kClients; ++i) all.push_back("rank/" + std::to_string(i));
  std::vector<std::shared_ptr<Store>> handles;
  for (int i = 0; i < kClients; ++i) handles.push_back(backend_->NewHandle());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      if (!handles[i]->Set(all[i], std::to_string(i)).ok()) return;
      if (!handles[i]->Wait(all, milliseconds(10000)).ok()) return;
      std::string v;
      if (!handles[i]->Get(all[(i + 1) % kClients], milliseconds(1000), &v).ok()) return;
      if (v == std::to_string((i + 1) % kClients)) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kClients);
}

INSTANTIATE_TEST_SUITE_P(
    AllStores, StoreContractTest,
    ::testing::Values(
        BackendParam{"InMemory", [] { return std::make_unique<InMemoryBackend>(); }},
        BackendParam{"PrefixOverInMemory", [] { return std::make_unique<PrefixBackend>(); }},
        BackendParam{"Tcp", [] { return std::make_unique<TcpBackend>(TcpBackend::kRemote); }},
        BackendParam{"TcpLocal", [] { return std::make_unique<TcpBackend>(TcpBackend::kLocal); }},
        BackendParam{"TcpMixed", [] { return std::make_unique<TcpBackend>(TcpBackend::kMixed); }}),
    [](const ::testing::TestParamInfo<BackendParam>& info) { return info.param.name; });

}  // namespace
}  // namespace hvd
