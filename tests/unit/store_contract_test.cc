// The hvd::Store contract (runtime/store/store.h), run against every implementation:
// InMemoryStore, a PrefixStore over one, TcpStoreClient <-> TcpStoreServer on
// 127.0.0.1, the server's LocalStore(), and local and remote handles mixed on one
// key space (what dprun and its ranks do).
//
// Every store keeps its keys in one KeySpace (runtime/store/key_space.h); the cases
// on Add's parsing and overflow, NUL bytes, the empty key, Delete and huge or negative
// timeouts are the ones on which the in-memory store once drifted from the TCP server.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/store/store.h"
#include "runtime/store/tcp_store.h"

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

// Add reads only the decimal text it writes itself (the drift this suite once missed:
// the in-memory store read "12abc" as 12).
TEST_P(StoreContractTest, AddOnAValueWithTrailingOrLeadingJunkFails) {
  for (const std::string text : {"12abc", "12 ", " 12", "+12", "1.5", "0x10", "-", ""}) {
    SCOPED_TRACE("stored value '" + text + "'");
    ASSERT_TRUE(store_->Set("junk", text).ok());
    int64_t r = 99;
    const Status s = store_->Add("junk", 1, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("junk'"), std::string::npos) << s.message();
    EXPECT_EQ(r, 99);  // *result is not written on error.
    std::string v;
    ASSERT_TRUE(store_->Get("junk", milliseconds(1000), &v).ok());
    EXPECT_EQ(v, text);  // The value is left as it was.
  }
}

TEST_P(StoreContractTest, AddOverflowingInt64FailsBothWays) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("hi", kMax, &r).ok());
  EXPECT_EQ(r, kMax);
  Status s = store_->Add("hi", 1, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("overflow"), std::string::npos) << s.message();
  ASSERT_TRUE(store_->Set("lo", std::to_string(kMin)).ok());
  s = store_->Add("lo", -1, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = store_->Add("lo", kMin, &r);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  // A stored value that is itself out of int64's range is not an integer either.
  ASSERT_TRUE(store_->Set("huge", "9223372036854775808").ok());
  EXPECT_EQ(store_->Add("huge", 0, &r).code(), StatusCode::kInvalidArgument);
  // The failed additions changed nothing; the extremes themselves are fine.
  std::string v;
  ASSERT_TRUE(store_->Get("hi", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, std::to_string(kMax));
  ASSERT_TRUE(store_->Get("lo", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, std::to_string(kMin));
  ASSERT_TRUE(store_->Add("lo", kMax, &r).ok());
  EXPECT_EQ(r, -1);
}

TEST_P(StoreContractTest, AddOfANegativeDelta) {
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("neg", -5, &r).ok());
  EXPECT_EQ(r, -5);
  ASSERT_TRUE(store_->Add("neg", -5, &r).ok());
  EXPECT_EQ(r, -10);
  std::string v;
  ASSERT_TRUE(store_->Get("neg", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "-10");
  ASSERT_TRUE(store_->Set("neg", "-0007").ok());  // Leading zeros are still decimal.
  ASSERT_TRUE(store_->Add("neg", 17, &r).ok());
  EXPECT_EQ(r, 10);
  ASSERT_TRUE(store_->Add("neg", -10, &r).ok());
  EXPECT_EQ(r, 0);
  ASSERT_TRUE(store_->Get("neg", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "0");
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

TEST_P(StoreContractTest, DeleteThenGetWaitAndAdd) {
  ASSERT_TRUE(store_->Set("gone", "7").ok());
  ASSERT_TRUE(store_->Delete("gone").ok());
  std::string v = "unchanged";
  Status s = store_->Get("gone", milliseconds(50), &v);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("gone'"), std::string::npos) << s.message();
  EXPECT_EQ(v, "unchanged");
  EXPECT_EQ(store_->Wait({"gone"}, milliseconds(50)).code(), StatusCode::kTimeout);
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("gone", 2, &r).ok());  // Counts from zero again.
  EXPECT_EQ(r, 2);
}

TEST_P(StoreContractTest, WaitOnSeveralKeysReturnsOnlyOnceTheLastIsSet) {
  auto other = backend_->NewHandle();
  const std::vector<std::string> keys = {"w/a", "w/b", "w/c", "w/a"};  // Repeats are fine.
  std::thread setter([&] {
    EXPECT_TRUE(other->Set("w/c", "").ok());
    int64_t r = 0;
    EXPECT_TRUE(other->Add("w/a", 1, &r).ok());
    std::this_thread::sleep_for(milliseconds(150));
    EXPECT_TRUE(other->Set("w/b", "last").ok());
  });
  const auto start = Clock::now();
  const Status s = store_->Wait(keys, milliseconds(5000));
  const double ms = MsSince(start);
  setter.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(ms, 100);
  EXPECT_LT(ms, 4000);
  EXPECT_TRUE(store_->Wait(keys, milliseconds(0)).ok());
}

TEST_P(StoreContractTest, KeysAndValuesWithNulBytesAreDistinct) {
  const std::string a("k\0a", 3), b("k\0b", 3), value("\0\0v\0", 4);
  ASSERT_TRUE(store_->Set(a, value).ok());
  ASSERT_TRUE(store_->Set(b, "other").ok());
  std::string v;
  ASSERT_TRUE(store_->Get(a, milliseconds(1000), &v).ok());
  EXPECT_EQ(v, value);
  ASSERT_TRUE(store_->Get(b, milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "other");
  EXPECT_EQ(store_->Wait({"k"}, milliseconds(0)).code(), StatusCode::kTimeout);
  ASSERT_TRUE(store_->Delete(a).ok());
  EXPECT_TRUE(store_->Wait({b}, milliseconds(0)).ok());
  const Status s = store_->Wait({a}, milliseconds(0));
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("k\\x00a'"), std::string::npos) << s.message();
}

TEST_P(StoreContractTest, TheEmptyKeyIsAKey) {
  std::string v;
  EXPECT_EQ(store_->Get("", milliseconds(0), &v).code(), StatusCode::kTimeout);
  ASSERT_TRUE(store_->Set("", "empty-key").ok());
  ASSERT_TRUE(store_->Get("", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "empty-key");
  EXPECT_TRUE(store_->Wait({""}, milliseconds(0)).ok());
  ASSERT_TRUE(store_->Delete("").ok());
  int64_t r = 0;
  ASSERT_TRUE(store_->Add("", 3, &r).ok());
  EXPECT_EQ(r, 3);
  ASSERT_TRUE(store_->Get("", milliseconds(1000), &v).ok());
  EXPECT_EQ(v, "3");
}

TEST_P(StoreContractTest, EveryWaitingCallTimesOutWithKTimeout) {
  std::string v;
  for (const milliseconds timeout : {milliseconds(-5), milliseconds(0), milliseconds(30)}) {
    SCOPED_TRACE("timeout " + std::to_string(timeout.count()) + " ms");
    const auto start = Clock::now();
    EXPECT_EQ(store_->Get("t/none", timeout, &v).code(), StatusCode::kTimeout);
    EXPECT_EQ(store_->Wait({"t/none"}, timeout).code(), StatusCode::kTimeout);
    EXPECT_LT(MsSince(start), 2000);
  }
}

// A timeout too large to add to a clock still waits (it is clamped), not fails at once.
TEST_P(StoreContractTest, AHugeTimeoutWaitsForTheKey) {
  auto other = backend_->NewHandle();
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(other->Set("t/late", "x").ok());
  });
  std::string v;
  const Status get = store_->Get("t/late", milliseconds::max(), &v);
  const Status wait = store_->Wait({"t/late"}, milliseconds::max());
  setter.join();
  EXPECT_TRUE(get.ok()) << get.ToString();
  EXPECT_EQ(v, "x");
  EXPECT_TRUE(wait.ok()) << wait.ToString();
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
