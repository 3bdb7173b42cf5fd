#include "runtime/store/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace hvd {
namespace {

std::string AddressText(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  return buf;
}

}  // namespace

bool IsNumericAddress(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return ::inet_pton(AF_INET, host.c_str(), &a4) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

Status InterfaceAddress(const std::string& iface, std::string* address) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::Internal("getifaddrs failed: " + ErrnoText(errno));
  bool exists = false;
  std::string names;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_name == nullptr) continue;
    const std::string name = a->ifa_name;
    if (names.find(" " + name + ",") == std::string::npos) names += " " + name + ",";
    if (name != iface) continue;
    exists = true;
    if (a->ifa_addr != nullptr && a->ifa_addr->sa_family == AF_INET) {
      *address = AddressText(a->ifa_addr);
      ::freeifaddrs(list);
      return Status::OK();
    }
  }
  ::freeifaddrs(list);
  if (exists) return Status::InvalidArgument("interface '" + iface + "' has no IPv4 address");
  if (!names.empty()) names.pop_back();
  return Status::InvalidArgument("no interface named '" + iface + "' (there are:" + names + ")");
}

Status ResolveAddress(const std::string& host, std::string* address) {
  if (IsNumericAddress(host)) {
    *address = host;
    return Status::OK();
  }
  for (int family : {AF_INET, AF_INET6}) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) continue;
    *address = AddressText(res->ai_addr);
    ::freeaddrinfo(res);
    return Status::OK();
  }
  return Status::InvalidArgument("cannot resolve host '" + host + "'");
}

Status SourceAddressToward(const std::string& host, std::string* address) {
  std::string target;
  HVD_RETURN_IF_ERROR(ResolveAddress(host, &target));
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(target.c_str(), "9", &hints, &res) != 0 || res == nullptr)
    return Status::InvalidArgument("cannot parse address '" + target + "'");
  const int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  Status s;
  if (fd < 0) {
    s = Status::Internal("socket: " + ErrnoText(errno));
  } else if (::connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    s = Status::InvalidArgument("no route to " + host + " (" + target + "): " + ErrnoText(errno));
  } else {
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0)
      s = Status::Internal("getsockname: " + ErrnoText(errno));
    else
      *address = AddressText(reinterpret_cast<sockaddr*>(&local));
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return s;
}

bool IsLoopbackAddress(const std::string& address) {
  in_addr a4;
  if (::inet_pton(AF_INET, address.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return address == "::1";
}

bool IsLocalHost(const std::string& host) {
  if (host == "localhost" || IsLoopbackAddress(host)) return true;
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) == 0 && host == name) return true;
  if (!IsNumericAddress(host)) return false;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool local = false;
  for (ifaddrs* a = list; a != nullptr && !local; a = a->ifa_next)
    if (a->ifa_addr != nullptr &&
        (a->ifa_addr->sa_family == AF_INET || a->ifa_addr->sa_family == AF_INET6))
      local = AddressText(a->ifa_addr) == host;
  ::freeifaddrs(list);
  return local;
}

std::string JoinStoreAddress(const std::string& host, int port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}


Status ParseHostPort(const std::string& s, std::string* host, int* port) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("bad host:port '" + s + "': " + why);
  };
  std::string h, p;
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find(']');
    if (close == std::string::npos) return bad("missing ']'");
    if (close + 1 >= s.size() || s[close + 1] != ':') return bad("missing ':port'");
    h = s.substr(1, close - 1);
    p = s.substr(close + 2);
  } else {
    const size_t colon = s.rfind(':');
    if (colon == std::string::npos) return bad("missing ':port'");
    h = s.substr(0, colon);
    p = s.substr(colon + 1);
    if (h.find(':') != std::string::npos) return bad("an IPv6 host must be in brackets");
  }
  if (h.empty()) return bad("empty host");
  if (p.empty() || p.size() > 5 ||
      !std::all_of(p.begin(), p.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return bad("port must be a number in 1..65535");
  const int value = std::stoi(p);
  if (value < 1 || value > 65535) return bad("port must be a number in 1..65535");
  *host = h;
  *port = value;
  return Status::OK();
}

}  // namespace hvd
