#include "runtime/store/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "runtime/store/net_address.h"

namespace hvd {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// WaitFd polls in slices of at most this long.
constexpr int kMaxPollMs = 1000;

}  // namespace


Status ListenTcp(const std::string& host, int port, int* fd_out, int* port_out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai != 0)
    return Status::InvalidArgument("store: cannot resolve listen address '" + host +
                                   "': " + ::gai_strerror(gai));
  std::string last_error = "no usable address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = "socket: " + ErrnoText(errno);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      last_error = ErrnoText(errno);
      ::close(fd);
      continue;
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
    *port_out =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    *fd_out = fd;
    ::freeaddrinfo(res);
    return Status::OK();
  }
  ::freeaddrinfo(res);
  return Status::Internal("store: cannot listen on " + JoinStoreAddress(host, port) + ": " +
                          last_error);
}

Status ConnectTcp(const std::string& host, int port, Clock::time_point deadline, int* fd_out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (gai == EAI_NONAME)
    return Status::InvalidArgument("store: cannot resolve host '" + host + "'");
  if (gai != 0) return Status::RemoteError(std::string("resolving: ") + ::gai_strerror(gai));
  Status last = Status::RemoteError("no address");
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last = Status::RemoteError("socket: " + ErrnoText(errno));
      continue;
    }
    int err = 0;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        last = WaitFd(fd, POLLOUT, deadline);
        socklen_t len = sizeof(err);
        err = last.ok() ? 0 : ETIMEDOUT;
        if (last.ok()) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *fd_out = fd;
      ::freeaddrinfo(res);
      return Status::OK();
    }
    last = Status::RemoteError(ErrnoText(err));
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return last;
}

Status WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status::Timeout("no reply in time");
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count() + 1, kMaxPollMs)));
    if (r > 0) return Status::OK();
    if (r < 0 && errno != EINTR) return Status::RemoteError("poll failed: " + ErrnoText(errno));
  }
}

Status SendAll(int fd, const std::string& data, Clock::time_point deadline) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      HVD_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline));
    } else if (n < 0 && errno != EINTR) {
      return Status::RemoteError("connection lost: " + ErrnoText(errno));
    }
  }
  return Status::OK();
}

Status RecvAll(int fd, char* buf, size_t len, Clock::time_point deadline) {
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::recv(fd, buf + got, len - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n == 0) {
      return Status::RemoteError("connection lost: the server closed the connection");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      HVD_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline));
    } else if (errno != EINTR) {
      return Status::RemoteError("connection lost: " + ErrnoText(errno));
    }
  }
  return Status::OK();
}

}  // namespace hvd
