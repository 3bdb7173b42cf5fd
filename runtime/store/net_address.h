// Network address helpers shared by dprun and the ranks: which address to bind,
// to advertise, or to reach the store host from. None of them sends a packet.
#ifndef HVD_RUNTIME_STORE_NET_ADDRESS_H_
#define HVD_RUNTIME_STORE_NET_ADDRESS_H_

#include <string>

#include "runtime/common/status.h"

namespace hvd {

// True for a numeric IPv4 or IPv6 address.
bool IsNumericAddress(const std::string& host);

// The IPv4 address of interface `iface`; kInvalidArgument if it has none or is absent.
Status InterfaceAddress(const std::string& iface, std::string* address);

// `host` as a numeric address: itself if it already is one, else its first IPv4 (or
// IPv6) address from the resolver.
Status ResolveAddress(const std::string& host, std::string* address);

// The local address this machine would send from to reach `host`: connect() on a UDP
// socket picks the route and sends nothing.
Status SourceAddressToward(const std::string& host, std::string* address);

// True for "localhost", a loopback address, this machine's host name, or an address of
// one of its interfaces.
bool IsLocalHost(const std::string& host);

// True for 127.0.0.0/8 and ::1.
bool IsLoopbackAddress(const std::string& address);

// "host:port", with brackets around an IPv6 host.
std::string JoinStoreAddress(const std::string& host, int port);

// Splits "127.0.0.1:29500" or "[::1]:29500" into host and port (1..65535). Anything
// else returns kInvalidArgument quoting the input.
Status ParseHostPort(const std::string& s, std::string* host, int* port);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_NET_ADDRESS_H_
