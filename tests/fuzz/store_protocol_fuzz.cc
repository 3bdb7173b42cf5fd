// Fuzzes the TcpStoreServer's request handling: framing, parsing, authentication
// and dispatch (runtime/store/tcp_store_server.cc), over a real loopback connection.
//
// The server offers no socket-free entry point, so each input gets a fresh server
// (so a crash reproduces from that one input) and one client connection that sends
// the input's bytes. Input layout:
//   byte 0     flags: bit 0 sends a valid AUTH frame first, so the rest reaches the
//              authenticated dispatch; bit 1 half-closes the connection after sending
//   bytes 1..  the raw byte stream: 4-byte big-endian lengths and StoreRequest bodies
//
// What must hold, whatever the bytes (a violation aborts, which libFuzzer reports):
//   - the server neither crashes nor hangs (libFuzzer's -timeout catches a hang in
//     Stop());
//   - every reply it sends is a well-formed frame whose StoreResponse parses and whose
//     code is a known hvd::StatusCode;
//   - it never sends more replies than the stream held complete requests;
//   - while the fuzzed connection is still open, a second, honest client is served
//     (AUTH, SET, GET) within 5 s: one bad client never stalls the others.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "runtime/store/store.pb.h"
#include "runtime/store/tcp_store.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kSecret[] = "fuzz-secret";
// Small, so that the fuzzer reaches both sides of the length check.
constexpr size_t kMaxMessageBytes = 64 * 1024;
// How long to wait for a reply the stream may or may not earn (a parked GET or WAIT
// answers only at its timeout). Missing replies are not failures.
constexpr milliseconds kIdleWait{20};
// Generous: on a loaded machine the server thread may wait its turn for a while; a
// server that stalls behind a bad client never answers at all.
constexpr milliseconds kHonestDeadline{5000};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "store_protocol_fuzz: invariant violated: %s\n", what.c_str());
  std::abort();
}

std::string Frame(const hvd::proto::StoreRequest& req) {
  std::string body;
  req.SerializeToString(&body);
  const uint32_t be = htonl(static_cast<uint32_t>(body.size()));
  return std::string(reinterpret_cast<const char*>(&be), 4) + body;
}

uint32_t ReadLength(const char* p) {
  uint32_t be;
  std::memcpy(&be, p, 4);
  return ntohl(be);
}

// A blocking-free loopback client socket that resets (no TIME_WAIT) when closed.
class Client {
 public:
  explicit Client(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd_ < 0) Fail("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS)
      Fail(std::string("connect failed: ") + std::strerror(errno));
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, 5000) != 1) Fail("connect did not complete within 5 s");
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) Fail(std::string("connect failed: ") + std::strerror(err));
  }
  ~Client() {
    linger l{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    ::close(fd_);
  }

  // Sends all of `data` unless the peer stops reading or closes; returns bytes sent.
  size_t Send(const std::string& data, Clock::time_point deadline) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!Wait(POLLOUT, deadline)) return sent;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return sent;  // The server closed the connection.
    }
    return sent;
  }

  void HalfClose() { ::shutdown(fd_, SHUT_WR); }

  // Reads one reply frame. Returns false on end of stream, reset or deadline, and
  // says which in `why` when given.
  bool ReadReply(hvd::proto::StoreResponse* resp, Clock::time_point deadline,
                 std::string* why = nullptr) {
    std::string ignored;
    if (why == nullptr) why = &ignored;
    for (;;) {
      if (in_.size() >= 4) {
        const uint32_t len = ReadLength(in_.data());
        // The client's own limit: the server's default plus room for the envelope.
        if (len > (64u << 20) + 4096) Fail("reply announces " + std::to_string(len) + " bytes");
        if (in_.size() >= 4 + static_cast<size_t>(len)) {
          if (!resp->ParseFromArray(in_.data() + 4, static_cast<int>(len)))
            Fail("reply of " + std::to_string(len) + " bytes does not parse");
          in_.erase(0, 4 + static_cast<size_t>(len));
          return true;
        }
      }
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n > 0) {
        in_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {
        if (!in_.empty()) Fail("server closed mid-reply");
        *why = "the server closed the connection";
        return false;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        *why = std::string("recv failed: ") + std::strerror(errno);
        return false;
      }
      if (!Wait(POLLIN, deadline)) {
        *why = "no reply in time";
        return false;
      }
    }
  }

 private:
  bool Wait(short events, Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd_, events, 0};
    return ::poll(&p, 1, static_cast<int>(left)) > 0;
  }

  int fd_ = -1;
  std::string in_;
};

void CheckReply(const hvd::proto::StoreResponse& resp) {
  if (resp.code() < 0 || resp.code() > static_cast<int>(hvd::StatusCode::kInProgress))
    Fail("reply has unknown status code " + std::to_string(resp.code()));
}

// Complete frames at the start of `stream`: the most replies it can earn.
int CompleteFrames(const std::string& stream) {
  size_t pos = 0;
  int frames = 0;
  while (stream.size() - pos >= 4) {
    const uint32_t len = ReadLength(stream.data() + pos);
    if (len > kMaxMessageBytes || stream.size() - pos - 4 < len) break;
    pos += 4 + len;
    ++frames;
  }
  return frames;
}

// An honest client on its own connection: AUTH, SET, GET, each answered in time.
// Returns "" on success, else what went wrong.
std::string TryHonestClient(int port) {
  // A key of its own, so the fuzzed stream cannot delete it in between.
  static uint64_t run = 0;
  const std::string key = "honest/" + std::to_string(++run);
  const auto deadline = Clock::now() + kHonestDeadline;
  Client c(port);
  hvd::proto::StoreRequest auth, set, get;
  auth.set_op(hvd::proto::StoreRequest::AUTH);
  auth.set_secret(kSecret);
  set.set_op(hvd::proto::StoreRequest::SET);
  set.set_key(key);
  set.set_value("honest-value");
  get.set_op(hvd::proto::StoreRequest::GET);
  get.set_key(key);
  get.set_timeout_ms(0);
  for (const auto* req : {&auth, &set, &get}) {
    const std::string f = Frame(*req);
    if (c.Send(f, deadline) != f.size()) return "honest client could not send its request";
    hvd::proto::StoreResponse resp;
    std::string why;
    const auto start = Clock::now();
    if (!c.ReadReply(&resp, deadline, &why))
      return "honest client (" + std::string(req == &auth ? "AUTH" : req == &set ? "SET" : "GET") +
           ") got no reply while a fuzzed connection was open: " + why + " after " +
           std::to_string(std::chrono::duration_cast<milliseconds>(Clock::now() - start).count()) +
           " ms";
    if (resp.code() != 0) Fail("honest request failed: " + resp.message());
    if (req == &get && resp.value() != "honest-value") Fail("honest GET returned the wrong value");
  }
  return "";
}

// A stall that the fuzzed connection causes persists while it stays open, so a
// second, fresh honest client fails too; one that passes on the retry was the
// machine (seen twice under load 10+ on 2 cores, never reproduced from the input)
// and is reported on stderr without failing the run.
void CheckHonestClientServed(int port) {
  const std::string first = TryHonestClient(port);
  if (first.empty()) return;
  const std::string second = TryHonestClient(port);
  if (!second.empty()) Fail(first + "; and again on a fresh connection: " + second);
  std::fprintf(stderr, "store_protocol_fuzz: warning: %s; a fresh connection was served\n",
               first.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::string stream(reinterpret_cast<const char*>(data) + 1, size - 1);
  int expected = CompleteFrames(stream);
  if (flags & 1) {
    hvd::proto::StoreRequest auth;
    auth.set_op(hvd::proto::StoreRequest::AUTH);
    auth.set_secret(kSecret);
    stream = Frame(auth) + stream;
    ++expected;
  }

  hvd::TcpStoreServer::Options opts;
  opts.secret = kSecret;
  opts.max_message_bytes = kMaxMessageBytes;
  opts.auth_timeout = milliseconds(10000);
  opts.log = [](const std::string&) {};
  std::unique_ptr<hvd::TcpStoreServer> server;
  hvd::Status s = hvd::TcpStoreServer::Start(opts, &server);
  if (!s.ok()) Fail("server did not start: " + s.ToString());

  {
    Client fuzzed(server->port());
    fuzzed.Send(stream, Clock::now() + milliseconds(1000));
    if (flags & 2) fuzzed.HalfClose();
    CheckHonestClientServed(server->port());
    int replies = 0;
    hvd::proto::StoreResponse resp;
    while (replies < expected && fuzzed.ReadReply(&resp, Clock::now() + kIdleWait)) {
      CheckReply(resp);
      ++replies;
    }
    // Anything beyond the complete requests is a reply to nothing.
    if (replies == expected && fuzzed.ReadReply(&resp, Clock::now() + milliseconds(1)))
      Fail("server sent more replies than the " + std::to_string(expected) + " requests");
  }
  server->Stop();
  return 0;
}
