// The socket calls of the TCP store: opening its listening socket and a client's
// connection, and the client's blocking-style I/O over a non-blocking socket, each
// bounded by a deadline. Internal to runtime/store.
//
// Every socket made here is non-blocking and close-on-exec; the caller owns the fd it
// gets back and closes it. The functions hold no state and are thread-safe; two
// threads must not do I/O on the same fd at once (the client serialises its calls).
//
// Errors: kInvalidArgument where retrying cannot help (an address that does not
// resolve), kTimeout when an I/O deadline passes, kRemoteError for a lost or refused
// connection or a failed socket call, kInternal when no listening socket can be bound. Messages
// name the address and the errno text; the I/O ones are worded for the client
// ("no reply in time", "the server closed the connection").
#ifndef HVD_RUNTIME_STORE_SOCKET_IO_H_
#define HVD_RUNTIME_STORE_SOCKET_IO_H_

#include <chrono>
#include <cstddef>
#include <string>

#include "runtime/common/status.h"

namespace hvd {

// Binds and listens on the first address of host:port that works (port 0 picks an
// ephemeral one); *fd_out is the listening socket and *port_out the port it got.
Status ListenTcp(const std::string& host, int port, int* fd_out, int* port_out);

// One connection attempt: resolves host:port and tries each address until `deadline`,
// setting TCP_NODELAY on success. kInvalidArgument for a host that does not resolve;
// anything else (refused, unreachable, no answer by `deadline`) is a kRemoteError
// worth retrying.
Status ConnectTcp(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                  int* fd_out);

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or `deadline` passes.
Status WaitFd(int fd, short events, std::chrono::steady_clock::time_point deadline);

// Sends all of `data` before `deadline`.
Status SendAll(int fd, const std::string& data, std::chrono::steady_clock::time_point deadline);

// Receives exactly `len` bytes into `buf` before `deadline`; the peer closing first is
// a kRemoteError.
Status RecvAll(int fd, char* buf, size_t len, std::chrono::steady_clock::time_point deadline);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_SOCKET_IO_H_
