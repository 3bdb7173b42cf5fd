// TcpStoreServer under hostile and broken clients, and TcpStoreClient's failure modes.
// Everything listens and connects on 127.0.0.1 only. After each abuse the server must
// still serve a good client.
#include "runtime/store/tcp_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <fstream>
#include <thread>
#include <vector>

#include "runtime/store/store.pb.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kSecret[] = "s3cret";

// Collects the server's log lines so tests can assert on the reasons it gives.
class LogSink {
 public:
  std::function<void(const std::string&)> Callback() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
      cv_.notify_all();
    };
  }
  // True once a line containing `text` has been logged, waiting up to `timeout`.
  bool WaitFor(const std::string& text, milliseconds timeout = milliseconds(5000)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (const auto& l : lines_)
        if (l.find(text) != std::string::npos) return true;
      return false;
    });
  }
  std::string All() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& l : lines_) out += l + "\n";
    return out;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
};

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { StartServer(); }

  void StartServer(TcpStoreServer::Options opts = {}) {
    if (server_) server_->Stop();
    opts.secret = kSecret;
    opts.log = log_.Callback();
    const Status s = TcpStoreServer::Start(opts, &server_);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::shared_ptr<Store> Connect(const std::string& secret = kSecret) {
    std::shared_ptr<Store> store;
    const Status s =
        ConnectTcpStore("127.0.0.1", server_->port(), secret, milliseconds(3000), &store);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return store;
  }

  // A plain blocking socket to the server, with 5 s receive and send timeouts.
  int RawConnect() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }

  static void SendBytes(int fd, const std::string& bytes) {
    ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }

  static std::string Length(uint32_t n) {
    const uint32_t be = htonl(n);
    return std::string(reinterpret_cast<const char*>(&be), 4);
  }

  static std::string Frame(const google::protobuf::MessageLite& m) {
    return Length(static_cast<uint32_t>(m.ByteSizeLong())) + m.SerializeAsString();
  }

  static std::string AuthFrame(const std::string& secret = kSecret) {
    proto::StoreRequest req;
    req.set_op(proto::StoreRequest::AUTH);
    req.set_secret(secret);
    return Frame(req);
  }

  // Reads one reply frame (5 s receive timeout).
  static bool ReadReply(int fd, proto::StoreResponse* resp) {
    char header[4];
    if (::recv(fd, header, 4, MSG_WAITALL) != 4) return false;
    uint32_t be;
    std::memcpy(&be, header, 4);
    std::string body(ntohl(be), '\0');
    if (!body.empty() &&
        ::recv(fd, body.data(), body.size(), MSG_WAITALL) != static_cast<ssize_t>(body.size()))
      return false;
    return resp->ParseFromString(body);
  }

  // True if the server closes `fd` (EOF or reset) within 5 s; drains anything before.
  static bool ClosedByServer(int fd) {
    char buf[256];
    const auto deadline = Clock::now() + milliseconds(5000);
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n == 0 || (n < 0 && errno == ECONNRESET)) return true;
      if (n < 0 && errno != EAGAIN && errno != EINTR) return true;
    }
    return false;
  }

  // A fresh, honest client can still set and read a key.
  void ExpectServesGoodClient() {
    auto store = Connect();
    ASSERT_NE(store, nullptr);
    const std::string key = "good/" + std::to_string(++good_);
    ASSERT_TRUE(store->Set(key, "ok").ok());
    std::string v;
    const auto start = Clock::now();
    ASSERT_TRUE(store->Get(key, milliseconds(1000), &v).ok());
    EXPECT_EQ(v, "ok");
    EXPECT_LT(Clock::now() - start, milliseconds(500));
  }

  LogSink log_;
  std::unique_ptr<TcpStoreServer> server_;
  int good_ = 0;
};

TEST_F(TcpStoreTest, WrongSecretGetsAClearErrorNotAHang) {
  const auto start = Clock::now();
  std::shared_ptr<Store> store;
  const Status s =
      ConnectTcpStore("127.0.0.1", server_->port(), "not-the-secret", milliseconds(3000), &store);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("wrong secret"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(server_->port())), std::string::npos);
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
  EXPECT_EQ(store, nullptr);
  EXPECT_TRUE(log_.WaitFor("wrong secret"));
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, FirstMessageMustBeAuth) {
  const int fd = RawConnect();
  proto::StoreRequest req;
  req.set_op(proto::StoreRequest::SET);
  req.set_key("sneaky");
  req.set_value("1");
  SendBytes(fd, Frame(req));
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
  EXPECT_TRUE(log_.WaitFor("first message is SET, not AUTH")) << log_.All();
  // The unauthenticated SET did nothing.
  std::string v;
  EXPECT_EQ(server_->LocalStore()->Get("sneaky", milliseconds(0), &v).code(), StatusCode::kTimeout);
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, GarbageBytesCloseOnlyThatConnection) {
  auto bystander = Connect();
  const int http = RawConnect();  // "GET " reads as a length of ~1.2 GB.
  SendBytes(http, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_TRUE(ClosedByServer(http));
  ::close(http);
  EXPECT_TRUE(log_.WaitFor("exceeds the limit")) << log_.All();

  const int junk = RawConnect();  // A small length, then bytes that are not a message.
  SendBytes(junk, Length(6) + std::string("\xff\xff\xff\xff\xff\xff", 6));
  EXPECT_TRUE(ClosedByServer(junk));
  ::close(junk);
  EXPECT_TRUE(log_.WaitFor("malformed message")) << log_.All();

  ASSERT_TRUE(bystander->Set("still", "here").ok());
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, OversizedLengthPrefixIsRefusedBeforeReadingTheBody) {
  for (bool authenticated : {false, true}) {
    const int fd = RawConnect();
    if (authenticated) {
      SendBytes(fd, AuthFrame());
      proto::StoreResponse resp;
      ASSERT_TRUE(ReadReply(fd, &resp));
      ASSERT_EQ(resp.code(), 0);
    }
    SendBytes(fd, Length(0xFFFFFFFFu));  // No body follows: the header alone must do.
    EXPECT_TRUE(ClosedByServer(fd));
    ::close(fd);
  }
  EXPECT_TRUE(log_.WaitFor("message length 4294967295 exceeds the limit")) << log_.All();
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, MaxMessageBytesOptionIsEnforced) {
  TcpStoreServer::Options opts;
  opts.max_message_bytes = 1024;
  StartServer(opts);
  auto store = Connect();
  ASSERT_TRUE(store->Set("small", std::string(100, 'a')).ok());
  const Status s = store->Set("big", std::string(2000, 'b'));
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_NE(s.message().find("connection lost"), std::string::npos) << s.message();
  // The connection is broken for good, and says so quickly.
  const auto start = Clock::now();
  EXPECT_EQ(store->Set("small", "x").code(), StatusCode::kRemoteError);
  EXPECT_LT(Clock::now() - start, milliseconds(100));
  EXPECT_TRUE(log_.WaitFor("exceeds the limit of 1024 bytes")) << log_.All();
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, TruncatedMessageThenClose) {
  const int fd = RawConnect();
  SendBytes(fd, AuthFrame());
  proto::StoreResponse resp;
  ASSERT_TRUE(ReadReply(fd, &resp));
  SendBytes(fd, Length(100) + std::string(10, 'x'));
  ::close(fd);
  EXPECT_TRUE(log_.WaitFor("closed mid-message")) << log_.All();
  ExpectServesGoodClient();
}

// A client may send its last requests and half-close at once (shutdown(SHUT_WR)); the
// requests that arrived complete are still answered, then the server closes quietly.
TEST_F(TcpStoreTest, RequestsSentWithAHalfCloseAreStillAnswered) {
  const int fd = RawConnect();
  proto::StoreRequest set;
  set.set_op(proto::StoreRequest::SET);
  set.set_key("half/a");
  set.set_value("1");
  proto::StoreRequest get;
  get.set_op(proto::StoreRequest::GET);
  get.set_key("half/a");
  get.set_timeout_ms(1000);
  SendBytes(fd, AuthFrame() + Frame(set) + Frame(get));
  ASSERT_EQ(::shutdown(fd, SHUT_WR), 0);
  proto::StoreResponse resp;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ReadReply(fd, &resp)) << "reply " << i << "\n" << log_.All();
    EXPECT_EQ(resp.code(), 0) << resp.message();
  }
  ASSERT_TRUE(ReadReply(fd, &resp)) << log_.All();
  EXPECT_EQ(resp.code(), 0) << resp.message();
  EXPECT_EQ(resp.value(), "1");
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);

  // A GET parked when the half-close comes is answered once its key is set.
  const int waiter = RawConnect();
  get.set_key("half/later");
  get.set_timeout_ms(5000);
  SendBytes(waiter, AuthFrame() + Frame(get));
  ASSERT_EQ(::shutdown(waiter, SHUT_WR), 0);
  ASSERT_TRUE(ReadReply(waiter, &resp));  // AUTH
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(server_->LocalStore()->Set("half/later", "2").ok());
  ASSERT_TRUE(ReadReply(waiter, &resp)) << log_.All();
  EXPECT_EQ(resp.code(), 0) << resp.message();
  EXPECT_EQ(resp.value(), "2");
  EXPECT_TRUE(ClosedByServer(waiter));
  ::close(waiter);

  // Part of a message before the half-close is still a protocol error.
  const int cut = RawConnect();
  SendBytes(cut, AuthFrame() + Frame(set).substr(0, 6));
  ASSERT_EQ(::shutdown(cut, SHUT_WR), 0);
  ASSERT_TRUE(ReadReply(cut, &resp));
  EXPECT_TRUE(ClosedByServer(cut));
  ::close(cut);
  EXPECT_TRUE(log_.WaitFor("closed mid-message (6 bytes")) << log_.All();
  // The two goodbyes were not logged; only the cut message was.
  EXPECT_EQ(log_.All().find("closing connection"), log_.All().rfind("closing connection"))
      << log_.All();
  ExpectServesGoodClient();
}

// A client that exits with a reply unread resets its connection: a goodbye, not
// logged, unless it left part of a message behind.
TEST_F(TcpStoreTest, ResetBetweenMessagesIsAQuietGoodbye) {
  auto reset = [](int fd) {
    const linger hard{1, 0};  // close() sends RST.
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
    ::close(fd);
  };
  const int quiet = RawConnect();
  SendBytes(quiet, AuthFrame());
  proto::StoreResponse resp;
  ASSERT_TRUE(ReadReply(quiet, &resp));
  reset(quiet);
  const int cut = RawConnect();
  SendBytes(cut, AuthFrame());
  ASSERT_TRUE(ReadReply(cut, &resp));
  SendBytes(cut, Length(100) + std::string(10, 'x'));
  std::this_thread::sleep_for(milliseconds(100));  // Let the server read them first.
  reset(cut);
  EXPECT_TRUE(log_.WaitFor("bytes unprocessed")) << log_.All();
  ExpectServesGoodClient();
  EXPECT_EQ(log_.All().find("closing connection"), log_.All().rfind("closing connection"))
      << log_.All();
}

TEST_F(TcpStoreTest, SilentAndHalfSpokenClientsDoNotBlockOthers) {
  const int silent = RawConnect();
  const int half = RawConnect();
  SendBytes(half, std::string("\x00\x00", 2));  // Half a length prefix, then nothing.
  const int parked = RawConnect();              // Authenticated, blocked in a long GET.
  SendBytes(parked, AuthFrame());
  proto::StoreResponse resp;
  ASSERT_TRUE(ReadReply(parked, &resp));
  proto::StoreRequest get;
  get.set_op(proto::StoreRequest::GET);
  get.set_key("never");
  get.set_timeout_ms(60000);
  SendBytes(parked, Frame(get));

  for (int i = 0; i < 3; ++i) ExpectServesGoodClient();
  ::close(silent);
  ::close(half);
  ::close(parked);
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, UnauthenticatedConnectionsTimeOut) {
  TcpStoreServer::Options opts;
  opts.auth_timeout = milliseconds(200);
  StartServer(opts);
  const int fd = RawConnect();
  EXPECT_TRUE(ClosedByServer(fd));
  ::close(fd);
  EXPECT_TRUE(log_.WaitFor("no AUTH within 200 ms")) << log_.All();
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, ClientsBeyondMaxClientsAreRefused) {
  TcpStoreServer::Options opts;
  opts.max_clients = 2;
  StartServer(opts);
  auto a = Connect();
  auto b = Connect();
  std::shared_ptr<Store> c;
  const Status s = ConnectTcpStore("127.0.0.1", server_->port(), kSecret, milliseconds(1000), &c);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(log_.WaitFor("max_clients")) << log_.All();
  ASSERT_TRUE(a->Set("x", "1").ok());
  b.reset();  // A slot frees up.
  bool served = false;
  for (int i = 0; i < 50 && !served; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    served = ConnectTcpStore("127.0.0.1", server_->port(), kSecret, milliseconds(1000), &c).ok();
  }
  EXPECT_TRUE(served);
}

TEST_F(TcpStoreTest, LocalSetWakesAParkedRemoteGet) {
  auto remote = Connect();
  std::thread setter([local = server_->LocalStore()] {
    std::this_thread::sleep_for(milliseconds(100));
    EXPECT_TRUE(local->Set("hvd/started/0", "1").ok());
  });
  std::string v;
  const auto start = Clock::now();
  const Status s = remote->Get("hvd/started/0", milliseconds(5000), &v);
  setter.join();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(v, "1");
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

// A WAIT (or GET) parked on one connection is answered as soon as another
// connection's SET or ADD arrives, not at the server's next poll round (up to 1 s):
// hvd_init's rendezvous is a chain of these.
TEST_F(TcpStoreTest, RemoteSetWakesAParkedRemoteWaitAtOnce) {
  auto waiter = Connect();
  auto setter = Connect();
  for (int round = 0; round < 5; ++round) {
    const std::string key = "wake/" + std::to_string(round);
    std::thread t([&] {
      std::this_thread::sleep_for(milliseconds(50));
      if (round % 2 == 0) {
        EXPECT_TRUE(setter->Set(key, "1").ok());
      } else {
        int64_t v = 0;
        EXPECT_TRUE(setter->Add(key, 1, &v).ok());
      }
    });
    const auto start = Clock::now();
    const Status s = waiter->Wait({key}, milliseconds(5000));
    const auto waited_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    t.join();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_LT(waited_ms, 50 + 100) << "round " << round << ": answered " << waited_ms
                                   << " ms after the wait began, the SET 50 ms after";
  }
}

// Before it has presented the secret, a connection may send only a small message:
// a large length prefix is refused when it arrives, so clients that never
// authenticate cannot make the server buffer their bodies (six of them once took
// the launcher from 6 MB to 408 MB).
TEST_F(TcpStoreTest, UnauthenticatedClientsCannotMakeTheServerBuffer) {
  auto rss_kb = [] {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0L;
  };
  const long before = rss_kb();
  std::vector<int> fds;
  const std::string chunk(1 << 20, 'x');
  for (int i = 0; i < 6; ++i) {
    const int fd = RawConnect();
    SendBytes(fd, Length(64u << 20));  // 64 MiB, within max_message_bytes
    // Push body bytes until the server closes or the socket stops taking them.
    for (int mb = 0; mb < 16; ++mb)
      if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) break;
    fds.push_back(fd);
  }
  for (int fd : fds) {
    EXPECT_TRUE(ClosedByServer(fd));
    ::close(fd);
  }
  EXPECT_TRUE(log_.WaitFor("unauthenticated message length 67108864 exceeds the limit of 4096"))
      << log_.All();
  EXPECT_LT(rss_kb() - before, 16 * 1024) << "the server buffered unauthenticated bytes";
  // An honest client's AUTH is well within the limit.
  ExpectServesGoodClient();
}

TEST_F(TcpStoreTest, LostConnectionIsARemoteError) {
  auto store = Connect();
  ASSERT_TRUE(store->Set("a", "1").ok());
  server_->Stop();
  const Status s = store->Set("a", "2");
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_NE(s.message().find("connection lost"), std::string::npos) << s.message();
}

// clients() counts open connections: what Bootstrap::LingerForStoreClients waits on.
TEST_F(TcpStoreTest, ClientsCountsOpenConnections) {
  auto until = [&](int n) {
    for (int i = 0; i < 300 && server_->clients() != n; ++i)
      std::this_thread::sleep_for(milliseconds(10));
    return server_->clients();
  };
  EXPECT_EQ(server_->clients(), 0);
  auto a = Connect();
  auto b = Connect();
  EXPECT_EQ(until(2), 2);
  a.reset();
  EXPECT_EQ(until(1), 1);
  const int raw = RawConnect();  // not authenticated yet, but open
  EXPECT_EQ(until(2), 2);
  ::close(raw);
  b.reset();
  EXPECT_EQ(until(0), 0);
  auto c = Connect();
  EXPECT_EQ(until(1), 1);
  server_->Stop();
  EXPECT_EQ(server_->clients(), 0);
}

TEST_F(TcpStoreTest, StopAnswersParkedClientsWithAnError) {
  auto store = Connect();
  Status s;
  const auto start = Clock::now();
  std::thread waiter([&] {
    std::string v;
    s = store->Get("never", milliseconds(20000), &v);
  });
  std::this_thread::sleep_for(milliseconds(100));
  server_->Stop();
  server_->Stop();  // Idempotent.
  waiter.join();
  EXPECT_EQ(s.code(), StatusCode::kRemoteError) << s.ToString();
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
  // LocalStore() still works as a plain store after Stop().
  auto local = server_->LocalStore();
  EXPECT_TRUE(local->Set("k", "v").ok());
  std::string v;
  EXPECT_TRUE(local->Get("k", milliseconds(100), &v).ok());
}

TEST_F(TcpStoreTest, ConnectRetriesUntilTheServerListens) {
  const int port = server_->port();
  server_->Stop();
  server_.reset();
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(300));
    TcpStoreServer::Options opts;
    opts.port = port;
    opts.secret = kSecret;
    opts.log = log_.Callback();
    const Status s = TcpStoreServer::Start(opts, &server_);
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  std::shared_ptr<Store> store;
  const Status s = ConnectTcpStore("127.0.0.1", port, kSecret, milliseconds(5000), &store);
  later.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(store->Set("a", "1").ok());
}

TEST_F(TcpStoreTest, ConnectTimesOutNamingHostAndPort) {
  const int port = server_->port();
  server_->Stop();  // Nothing listens on `port` now.
  const auto start = Clock::now();
  std::shared_ptr<Store> store;
  const Status s = ConnectTcpStore("127.0.0.1", port, kSecret, milliseconds(300), &store);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.ToString();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << s.message();
  EXPECT_LT(Clock::now() - start, milliseconds(2000));
}

TEST_F(TcpStoreTest, StartRejectsBadOptions) {
  std::unique_ptr<TcpStoreServer> s;
  TcpStoreServer::Options opts;
  opts.max_message_bytes = 0;
  EXPECT_EQ(TcpStoreServer::Start(opts, &s).code(), StatusCode::kInvalidArgument);
  opts = {};
  opts.max_clients = 0;
  EXPECT_EQ(TcpStoreServer::Start(opts, &s).code(), StatusCode::kInvalidArgument);
  opts = {};
  opts.port = 70000;
  EXPECT_EQ(TcpStoreServer::Start(opts, &s).code(), StatusCode::kInvalidArgument);
}

TEST(ParseHostPortTest, AcceptsHostAndPort) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(ParseHostPort("127.0.0.1:29500", &host, &port).ok());
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 29500);
  ASSERT_TRUE(ParseHostPort("[::1]:1", &host, &port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 1);
  ASSERT_TRUE(ParseHostPort("localhost:65535", &host, &port).ok());
  EXPECT_EQ(port, 65535);
}

TEST(ParseHostPortTest, RejectsMalformedInput) {
  for (const char* bad :
       {"", "127.0.0.1", "127.0.0.1:", ":29500", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:12ab",
        "127.0.0.1:-1", "::1:29500", "[::1]29500", "[::1:29500", "h:+80", "h: 80", "h:123456"}) {
    std::string host = "unchanged";
    int port = -7;
    const Status s = ParseHostPort(bad, &host, &port);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(s.message().find(std::string("'") + bad + "'"), std::string::npos) << s.message();
    EXPECT_EQ(host, "unchanged");
    EXPECT_EQ(port, -7);
  }
}

}  // namespace
}  // namespace hvd
