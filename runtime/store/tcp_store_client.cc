// The TCP store's client: ConnectTcpStore (runtime/store/tcp_store.h) and the Store it
// returns.
//
// Ownership: the TcpStoreClient owns its socket and closes it when the last shared_ptr
// to it goes. Thread safety: one mutex serialises calls, so each request and its reply
// use the connection alone (the protocol is strictly request/response).
//
// Timeouts: a request that waits on the server (GET, WAIT) sends its own timeout,
// clamped like the key space's, and waits for the reply that long plus kReplyMargin;
// the others wait kSimpleReplyTimeout. Errors: the server's own error replies come back
// as the Status it sent and leave the connection usable. A transport failure (lost
// connection, no reply in time, a reply too long or malformed) returns kRemoteError or
// kTimeout naming the endpoint and the request, and breaks the client: every later call
// returns kRemoteError quoting that first failure, without touching the socket.
#include "runtime/store/tcp_store.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/store/key_space.h"
#include "runtime/store/socket_io.h"
#include "runtime/store/store.pb.h"
#include "runtime/store/store_protocol.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;
using proto::StoreRequest;
using proto::StoreResponse;
using std::chrono::milliseconds;

// A client waits for a reply this much longer than the server's own timeout.
constexpr milliseconds kReplyMargin{2000};
// The reply timeout of requests that never wait on the server (SET, ADD, DELETE).
constexpr milliseconds kSimpleReplyTimeout{30000};
// The largest reply a client reads: the server's default limit plus room for the envelope.
constexpr size_t kClientMaxReplyBytes = (64u << 20) + 4096;

class TcpStoreClient : public Store {
 public:
  TcpStoreClient(int fd, std::string endpoint) : fd_(fd), endpoint_(std::move(endpoint)) {}
  ~TcpStoreClient() override { ::close(fd_); }

  Status Authenticate(const std::string& secret, milliseconds reply_timeout) {
    StoreRequest req;
    req.set_op(StoreRequest::AUTH);
    req.set_secret(secret);
    StoreResponse resp;
    Status s = Call(req, reply_timeout, &resp);
    if (!s.ok()) return s.Prepend("store " + endpoint_ + " refused this client");
    return s;
  }

  Status Set(const std::string& key, const std::string& value) override {
    StoreRequest req;
    req.set_op(StoreRequest::SET);
    req.set_key(key);
    req.set_value(value);
    StoreResponse resp;
    return Call(req, kSimpleReplyTimeout, &resp);
  }

  Status Get(const std::string& key, milliseconds timeout, std::string* value) override {
    StoreRequest req;
    req.set_op(StoreRequest::GET);
    req.set_key(key);
    req.set_timeout_ms(ClampTimeoutMs(timeout.count()));
    StoreResponse resp;
    HVD_RETURN_IF_ERROR(Call(req, milliseconds(req.timeout_ms()) + kReplyMargin, &resp));
    *value = std::move(*resp.mutable_value());
    return Status::OK();
  }

  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    StoreRequest req;
    req.set_op(StoreRequest::ADD);
    req.set_key(key);
    req.set_delta(delta);
    StoreResponse resp;
    HVD_RETURN_IF_ERROR(Call(req, kSimpleReplyTimeout, &resp));
    *result = resp.number();
    return Status::OK();
  }

  Status Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    StoreRequest req;
    req.set_op(StoreRequest::WAIT);
    for (const auto& k : keys) req.add_keys(k);
    req.set_timeout_ms(ClampTimeoutMs(timeout.count()));
    StoreResponse resp;
    return Call(req, milliseconds(req.timeout_ms()) + kReplyMargin, &resp);
  }

  Status Delete(const std::string& key) override {
    StoreRequest req;
    req.set_op(StoreRequest::DELETE);
    req.set_key(key);
    StoreResponse resp;
    return Call(req, kSimpleReplyTimeout, &resp);
  }

 private:
  // Sends `req` and reads its reply, waiting at most `reply_timeout` in all. A transport
  // failure breaks the connection for good; the server's own error codes do not.
  Status Call(const StoreRequest& req, milliseconds reply_timeout, StoreResponse* resp) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.ok()) return broken_;
    Status s = Exchange(req, Clock::now() + reply_timeout, resp);
    if (!s.ok()) {
      const std::string what = DescribeRequest(req);
      if (s.code() == StatusCode::kTimeout)
        s = Status::Timeout("no reply to " + what + " within " +
                            std::to_string(reply_timeout.count()) + " ms");
      else
        s = s.Prepend(what);
      s = s.Prepend("store " + endpoint_);
      broken_ =
          Status::RemoteError("store " + endpoint_ +
                              ": connection unusable after an earlier error (" + s.message() + ")");
      return s;
    }
    const int code = resp->code();
    if (code == 0) return Status::OK();
    if (!IsKnownReplyCode(code))
      return Status::RemoteError("store " + endpoint_ + ": reply has unknown code " +
                                 std::to_string(code) + ": " + resp->message());
    return Status(static_cast<StatusCode>(code), resp->message());
  }

  Status Exchange(const StoreRequest& req, Clock::time_point deadline, StoreResponse* resp) {
    HVD_RETURN_IF_ERROR(SendAll(fd_, Frame(req), deadline));
    char header[kFrameHeaderBytes];
    HVD_RETURN_IF_ERROR(RecvAll(fd_, header, kFrameHeaderBytes, deadline));
    const uint32_t len = ReadLength(header);
    if (len > kClientMaxReplyBytes)
      return Status::RemoteError("reply length " + std::to_string(len) + " exceeds " +
                                 std::to_string(kClientMaxReplyBytes) + " bytes");
    std::string body(len, '\0');
    HVD_RETURN_IF_ERROR(RecvAll(fd_, body.data(), len, deadline));
    if (!resp->ParseFromString(body)) return Status::RemoteError("malformed reply");
    return Status::OK();
  }

  std::mutex mu_;
  const int fd_;
  const std::string endpoint_;
  Status broken_;  // Guarded by mu_. Not OK once the connection is unusable.
};

}  // namespace

Status ConnectTcpStore(const std::string& host, int port, const std::string& secret,
                       milliseconds connect_timeout, std::shared_ptr<Store>* out) {
  if (port < 1 || port > 65535)
    return Status::InvalidArgument("store: port " + std::to_string(port) + " is outside 1..65535");
  const std::string endpoint = JoinStoreAddress(host, port);
  const auto start = Clock::now();
  const auto deadline = start + milliseconds(ClampTimeoutMs(connect_timeout.count()));
  milliseconds backoff(10);
  int fd = -1;
  // Bounded by `deadline`: every pass either connects, fails for good, or sleeps.
  for (int attempt = 1;; ++attempt) {
    Status s = ConnectTcp(host, port, deadline, &fd);
    if (s.ok()) break;
    if (s.code() == StatusCode::kInvalidArgument) return s;
    const auto now = Clock::now();
    if (now >= deadline)
      return Status::Timeout("store: could not connect to " + endpoint + " within " +
                             std::to_string(connect_timeout.count()) + " ms (" +
                             std::to_string(attempt) + " attempts; last: " + s.message() + ")");
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, milliseconds(250));
  }
  auto client = std::make_shared<TcpStoreClient>(fd, endpoint);
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  HVD_RETURN_IF_ERROR(client->Authenticate(secret, std::max(left, milliseconds(1000))));
  *out = std::move(client);
  return Status::OK();
}

}  // namespace hvd
