// The TCP store's server: TcpStoreServer (runtime/store/tcp_store.h).
//
// One thread (Loop) owns every socket: it polls a wake pipe, the listening socket and
// each client's socket, all non-blocking, so a slow, silent or hostile client never
// delays the others. Each Connection has an input buffer (bytes not yet parsed, always
// starting at a message boundary) and an output buffer (replies not yet sent); a
// connection's next request is parsed only once the previous reply has been sent, and
// a GET or WAIT for keys that are absent is parked on its connection until they exist
// or its deadline passes. Each pass of the loop re-checks the parked requests; the loop
// wakes on socket events, on the Waker, at the nearest deadline, and at least every
// kMaxPollMs.
//
// The keys live in a KeySpace (runtime/store/key_space.h) that the server thread
// shares with the owner's LocalStore() handles, whose writes wake the loop through the
// Waker (a pipe).
//
// Ownership and threads: Impl owns the listening socket, the wake pipe and every
// connection; only the server thread touches connections. Stop() (any thread, once)
// stops and joins the thread, closes every socket, and disables the Waker, so a
// LocalStore() that outlives the server is a plain in-memory store. Errors on one
// connection (oversized, malformed or unauthenticated messages, a failed send) close
// that connection with a logged reason; a goodbye between messages is not logged.
#include "runtime/store/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

// Bytes read per recv; a connection gets at most kReadsPerWakeup of them per poll round.
constexpr size_t kReadChunk = 64 * 1024;
constexpr int kReadsPerWakeup = 16;
// Bytes a client may send ahead while its previous request is unanswered.
constexpr size_t kPipelinedBytes = 64 * 1024;
// Until a connection has presented the secret, the most it may send: one AUTH
// message (a secret of a few dozen bytes) and its length prefix. A larger length is
// refused as soon as its prefix arrives, so an unauthenticated client cannot make
// the server buffer anything.
constexpr size_t kMaxUnauthenticatedBytes = 4096;
// The server thread wakes at least this often, whatever its deadlines.
constexpr int kMaxPollMs = 1000;

// Wakes the server thread's poll by writing to its pipe. Disabled (a no-op) once the
// server has stopped, so a LocalStore that outlives the server stays safe to use.
class Waker {
 public:
  explicit Waker(int fd) : fd_(fd) {}
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ < 0) return;
    const char byte = 1;
    // A full pipe already guarantees a wakeup, so EAGAIN is fine to ignore.
    [[maybe_unused]] ssize_t n = ::write(fd_, &byte, 1);
  }
  void Disable() {
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = -1;
  }

 private:
  std::mutex mu_;
  int fd_;
};

}  // namespace

class TcpStoreServer::Impl {
 public:
  Impl(Options opts, int listen_fd, int port, int wake_read, int wake_write)
      : opts_(std::move(opts)),
        listen_fd_(listen_fd),
        port_(port),
        wake_read_(wake_read),
        wake_write_(wake_write),
        space_(std::make_shared<KeySpace>()),
        waker_(std::make_shared<Waker>(wake_write)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Impl() { Stop(); }

  int port() const { return port_; }
  int clients() const { return clients_.load(std::memory_order_acquire); }

  std::shared_ptr<Store> LocalStore() {
    return NewKeySpaceStore(space_, [waker = waker_] { waker->Wake(); });
  }

  void Stop() {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    stopping_.store(true);
    waker_->Wake();
    if (thread_.joinable()) thread_.join();
    waker_->Disable();
    ::close(listen_fd_);
    ::close(wake_read_);
    ::close(wake_write_);
  }

 private:
  // One client connection. Touched only by the server thread.
  struct Connection {
    int fd = -1;
    std::string peer;
    bool authenticated = false;
    Clock::time_point auth_deadline;
    std::string in;   // Received bytes not yet parsed.
    std::string out;  // Serialized replies not yet sent, from out_sent on.
    size_t out_sent = 0;
    bool parked = false;  // `pending` (a GET or WAIT) waits for keys or its deadline.
    StoreRequest pending;
    Clock::time_point deadline;
    // The client has half-closed (or closed): nothing more to read, but the complete
    // requests it sent before are still answered; then the connection closes.
    bool eof = false;
    bool dead = false;
  };

  void Loop() {
    std::vector<pollfd> fds;
    while (!stopping_.load()) {
      fds.clear();
      fds.push_back({wake_read_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& c : conns_) {
        short events = 0;
        if (!c->eof && c->in.size() < InputCap(*c)) events |= POLLIN;
        if (c->out_sent < c->out.size()) events |= POLLOUT;
        fds.push_back({c->fd, events, 0});
      }
      const int r = ::poll(fds.data(), fds.size(), PollTimeoutMs());
      if (r < 0 && errno != EINTR) {
        Log("poll failed: " + ErrnoText(errno) + "; retrying");
        std::this_thread::sleep_for(milliseconds(10));
        continue;
      }
      if (fds[0].revents & POLLIN) DrainWakePipe();
      if (stopping_.load()) break;
      if (fds[1].revents & POLLIN) AcceptAll();
      // conns_ may have grown in AcceptAll; only the first fds.size() - 2 were polled.
      for (size_t i = 2; i < fds.size(); ++i) {
        Connection& c = *conns_[i - 2];
        if (fds[i].revents & POLLOUT) Flush(c);
        if (!c.dead && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) ReadFrom(c);
      }
      const auto now = Clock::now();
      for (auto& c : conns_) {
        if (!c->dead && !c->authenticated && now >= c->auth_deadline)
          Close(*c, "no AUTH within " + std::to_string(opts_.auth_timeout.count()) + " ms");
        if (!c->dead && c->parked) AnswerIfReady(*c, now);
        if (!c->dead) ProcessInput(*c);
      }
      // A SET or ADD just handled may complete a GET or WAIT parked on a connection
      // visited before it: answer those now, not at the next poll (up to a second).
      while (keys_changed_) {
        keys_changed_ = false;
        for (auto& c : conns_) {
          if (c->dead || !c->parked) continue;
          AnswerIfReady(*c, now);
          if (!c->dead && !c->parked) ProcessInput(*c);
        }
      }
      conns_.erase(
          std::remove_if(conns_.begin(), conns_.end(), [](const auto& c) { return c->dead; }),
          conns_.end());
      clients_.store(static_cast<int>(conns_.size()), std::memory_order_release);
    }
    for (auto& c : conns_)
      if (!c->dead) ::close(c->fd);
    conns_.clear();
    clients_.store(0, std::memory_order_release);
  }

  int PollTimeoutMs() const {
    const auto now = Clock::now();
    auto next = now + milliseconds(kMaxPollMs);
    for (const auto& c : conns_) {
      if (c->parked) next = std::min(next, c->deadline);
      if (!c->authenticated) next = std::min(next, c->auth_deadline);
    }
    if (next <= now) return 0;
    // Round up so the deadline has passed when poll returns.
    return static_cast<int>(std::chrono::ceil<milliseconds>(next - now).count());
  }

  void DrainWakePipe() {
    char buf[256];
    for (int i = 0; i < 64 && ::read(wake_read_, buf, sizeof(buf)) > 0; ++i) {
    }
  }

  void AcceptAll() {
    // Bounded: a burst of connections is taken in rounds.
    for (int i = 0; i < 256; ++i) {
      sockaddr_storage addr{};
      socklen_t len = sizeof(addr);
      const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                               SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
          Log("accept failed: " + ErrnoText(errno));
        return;
      }
      char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
      ::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV);
      const std::string peer = JoinStoreAddress(host, std::atoi(serv));
      if (static_cast<int>(conns_.size()) >= opts_.max_clients) {
        Log("refusing connection from " + peer + ": already serving " +
            std::to_string(opts_.max_clients) + " clients (max_clients)");
        ::close(fd);
        continue;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->peer = peer;
      c->auth_deadline = Clock::now() + opts_.auth_timeout;
      conns_.push_back(std::move(c));
    }
  }

  // How many unparsed bytes a connection may hold: one whole message while it is
  // being received, but only a little while a request is still being answered (an
  // honest client never sends ahead), so parked clients cannot pin much memory.
  size_t InputCap(const Connection& c) const {
    if (!c.authenticated) return 4 + kMaxUnauthenticatedBytes;
    if (c.parked || c.out_sent < c.out.size()) return kPipelinedBytes;
    return 4 + opts_.max_message_bytes;
  }

  // The longest message `c` may send now.
  size_t MessageLimit(const Connection& c) const {
    return c.authenticated ? opts_.max_message_bytes
                           : std::min<size_t>(kMaxUnauthenticatedBytes, opts_.max_message_bytes);
  }

  std::string TooLong(const Connection& c, uint32_t len) const {
    return std::string(c.authenticated ? "" : "unauthenticated ") + "message length " +
           std::to_string(len) + " exceeds the limit of " + std::to_string(MessageLimit(c)) +
           " bytes";
  }

  void ReadFrom(Connection& c) {
    char buf[kReadChunk];
    for (int i = 0; i < kReadsPerWakeup; ++i) {
      const size_t cap = InputCap(c);
      if (c.in.size() >= cap) return;
      const ssize_t n = ::recv(c.fd, buf, std::min(sizeof(buf), cap - c.in.size()), 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        // `in` always starts at a message boundary: refuse an oversized length as soon
        // as it arrives, before any of its body is read.
        if (c.in.size() >= 4 && ReadLength(c.in.data()) > MessageLimit(c))
          return Close(c, TooLong(c, ReadLength(c.in.data())));
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == ECONNRESET) return CloseReset(c);
      if (n < 0) return Close(c, "recv failed: " + ErrnoText(errno));
      c.eof = true;  // ProcessInput answers what is buffered, then closes.
      return;
    }
  }

  // Parses and handles complete messages, one at a time: the next is taken only after
  // the previous reply has been sent, so a client that does not read cannot grow `out`.
  void ProcessInput(Connection& c) {
    while (!c.dead && !c.parked && c.out_sent == c.out.size() && c.in.size() >= 4) {
      const uint32_t len = ReadLength(c.in.data());
      if (len > MessageLimit(c)) return Close(c, TooLong(c, len));
      if (c.in.size() < 4 + static_cast<size_t>(len)) break;
      StoreRequest req;
      if (!req.ParseFromArray(c.in.data() + 4, static_cast<int>(len)))
        return Close(c, "malformed message (" + std::to_string(len) + " bytes do not parse)");
      c.in.erase(0, 4 + static_cast<size_t>(len));
      Handle(c, req);
    }
    if (c.eof) CloseAfterEof(c);
  }

  // Once the client's end of stream is reached and every complete request before it
  // is answered, closes: quietly between messages (a goodbye), with a reason if part
  // of a message is left (a protocol error).
  void CloseAfterEof(Connection& c) {
    if (c.dead || c.parked || c.out_sent < c.out.size()) return;
    if (c.in.empty()) return Close(c, "");
    Close(c, "connection closed mid-message (" + std::to_string(c.in.size()) +
                 " bytes of an incomplete message)");
  }

  void Handle(Connection& c, const StoreRequest& req) {
    StoreResponse resp;
    if (!c.authenticated) {
      if (req.op() != StoreRequest::AUTH)
        return Close(c, std::string("first message is ") + OpName(req.op()) + ", not AUTH");
      if (!ConstantTimeEquals(req.secret(), opts_.secret)) {
        resp.set_code(static_cast<int>(StatusCode::kInvalidArgument));
        resp.set_message("authentication failed: wrong secret");
        Reply(c, resp);
        return Close(c, "wrong secret");
      }
      c.authenticated = true;
      return Reply(c, resp);
    }
    switch (req.op()) {
      case StoreRequest::AUTH:
        break;
      case StoreRequest::SET:
        space_->Set(req.key(), req.value());
        keys_changed_ = true;
        break;
      case StoreRequest::GET:
      case StoreRequest::WAIT:
        c.parked = true;
        c.pending = req;
        c.deadline = Clock::now() + milliseconds(ClampTimeoutMs(req.timeout_ms()));
        AnswerIfReady(c, Clock::now());
        return;
      case StoreRequest::ADD: {
        int64_t result = 0;
        SetReplyStatus(space_->Add(req.key(), req.delta(), &result), &resp);
        resp.set_number(result);
        keys_changed_ = true;
        break;
      }
      case StoreRequest::DELETE:
        space_->Delete(req.key());
        break;
      default:
        SetReplyStatus(Status::InvalidArgument("store: unknown op " + std::to_string(req.op())),
                       &resp);
    }
    Reply(c, resp);
  }

  // Answers the parked GET or WAIT if its keys exist or its deadline has passed.
  void AnswerIfReady(Connection& c, Clock::time_point now) {
    const StoreRequest& req = c.pending;
    std::vector<std::string> keys;
    if (req.op() == StoreRequest::GET) {
      keys.push_back(req.key());
    } else {
      keys.assign(req.keys().begin(), req.keys().end());
    }
    StoreResponse resp;
    std::vector<std::string> missing = space_->Missing(keys);
    if (missing.empty() && req.op() == StoreRequest::GET &&
        !space_->TryGet(req.key(), resp.mutable_value()))
      missing.push_back(req.key());
    if (!missing.empty()) {
      if (now < c.deadline) return;
      SetReplyStatus(KeysTimedOut(ClampTimeoutMs(req.timeout_ms()), missing), &resp);
    }
    c.parked = false;
    Reply(c, resp);
  }

  void Reply(Connection& c, const StoreResponse& resp) {
    if (c.out_sent == c.out.size()) {
      c.out.clear();
      c.out_sent = 0;
    }
    c.out += Frame(resp);
    Flush(c);
  }

  void Flush(Connection& c) {
    while (!c.dead && c.out_sent < c.out.size()) {
      const ssize_t n =
          ::send(c.fd, c.out.data() + c.out_sent, c.out.size() - c.out_sent, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_sent += static_cast<size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
        return CloseReset(c);
      } else if (n < 0 && errno != EINTR) {
        return Close(c, "send failed: " + ErrnoText(errno));
      }
    }
  }

  // Closes a connection the client reset: it exited, or closed with a reply unread.
  // That is a goodbye unless it left part of a message behind.
  void CloseReset(Connection& c) {
    if (c.in.empty()) return Close(c, "");
    Close(c, "connection reset with " + std::to_string(c.in.size()) + " bytes unprocessed");
  }

  // Closes the connection; a non-empty `reason` is logged.
  void Close(Connection& c, const std::string& reason) {
    if (c.dead) return;
    if (!reason.empty()) Log("closing connection from " + c.peer + ": " + reason);
    ::close(c.fd);
    c.dead = true;
    c.parked = false;
  }

  void Log(const std::string& line) {
    if (opts_.log) {
      opts_.log(line);
    } else {
      std::fprintf(stderr, "dprun store: %s\n", line.c_str());
    }
  }

  const Options opts_;
  const int listen_fd_;
  const int port_;
  const int wake_read_;
  const int wake_write_;
  std::shared_ptr<KeySpace> space_;
  std::shared_ptr<Waker> waker_;
  std::vector<std::unique_ptr<Connection>> conns_;  // Server thread only.
  std::atomic<int> clients_{0};                      // conns_.size() after each round
  bool keys_changed_ = false;                         // Server thread only.
  std::atomic<bool> stopping_{false};
  std::mutex stop_mu_;
  bool stopped_ = false;  // Guarded by stop_mu_.
  std::thread thread_;
};

Status TcpStoreServer::Start(const Options& opts, std::unique_ptr<TcpStoreServer>* out) {
  if (opts.host.empty()) return Status::InvalidArgument("store: listen host is empty");
  if (opts.port < 0 || opts.port > 65535)
    return Status::InvalidArgument("store: port " + std::to_string(opts.port) +
                                   " is outside 0..65535");
  if (opts.max_message_bytes == 0 || opts.max_message_bytes > UINT32_MAX)
    return Status::InvalidArgument("store: max_message_bytes must be in 1..2^32-1, got " +
                                   std::to_string(opts.max_message_bytes));
  if (opts.max_clients < 1)
    return Status::InvalidArgument("store: max_clients must be at least 1, got " +
                                   std::to_string(opts.max_clients));
  int listen_fd = -1, port = 0;
  HVD_RETURN_IF_ERROR(ListenTcp(opts.host, opts.port, &listen_fd, &port));
  int wake[2];
  if (::pipe2(wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    ::close(listen_fd);
    return Status::Internal("store: pipe2 failed: " + ErrnoText(errno));
  }
  out->reset(new TcpStoreServer(std::make_unique<Impl>(opts, listen_fd, port, wake[0], wake[1])));
  return Status::OK();
}

TcpStoreServer::TcpStoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TcpStoreServer::~TcpStoreServer() { Stop(); }
int TcpStoreServer::port() const { return impl_->port(); }
int TcpStoreServer::clients() const { return impl_->clients(); }
void TcpStoreServer::Stop() { impl_->Stop(); }
std::shared_ptr<Store> TcpStoreServer::LocalStore() { return impl_->LocalStore(); }

}  // namespace hvd
