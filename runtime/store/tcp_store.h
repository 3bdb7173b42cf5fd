// TcpStore: the hvd::Store that the ranks of one job share over TCP.
//
// dprun runs one TcpStoreServer per job and hands every rank its address and secret
// (HVD_STORE_ADDR, HVD_STORE_SECRET); each rank calls ConnectTcpStore. In a job that
// another launcher started, rank 0 serves it instead (controller/loop/launch_env.h). The wire protocol
// is runtime/store/store.proto: length-prefixed protobuf messages, AUTH first.
//
// Server: one thread polls the listening socket and every client socket (all
// non-blocking), so a slow, silent or hostile client never delays the others. A GET or
// WAIT for an absent key is parked and answered when the key is set or its timeout
// passes. A connection that sends an oversized, malformed or unauthenticated message is
// closed and the reason is logged; the server keeps serving everyone else. A client's
// close or reset between messages is its goodbye and is not logged; the requests it
// sent before closing its sending side (shutdown(SHUT_WR)) are still answered.
//
// Client: a connection guarded by one mutex, so calls are thread-safe and serialised.
// Every request waits for its reply at most its own timeout plus a small margin; a lost
// connection, or a reply that never came, returns kRemoteError or kTimeout and leaves
// the client broken (later calls fail fast with the same reason).
//
// This header is the TCP store's whole public API. Its implementation, one concept a
// file, all in runtime/store/: tcp_store_server.cc (the server thread),
// tcp_store_client.cc (the client), key_space.h (the keys both stores serve),
// store_protocol.h (framing, op names, the secret check) and socket_io.h (listen,
// connect, timed send and receive).
#ifndef HVD_RUNTIME_STORE_TCP_STORE_H_
#define HVD_RUNTIME_STORE_TCP_STORE_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "runtime/common/status.h"
#include "runtime/store/net_address.h"
#include "runtime/store/store.h"

namespace hvd {

class TcpStoreServer {
 public:
  struct Options {
    // The address to listen on. Tests and single-host jobs keep loopback.
    std::string host = "127.0.0.1";
    // 0 picks an ephemeral port; port() tells which.
    int port = 0;
    // Every connection must present this in its first (AUTH) message.
    std::string secret;
    // Largest request accepted, checked against the length prefix before the body is
    // read. Larger ones close the connection.
    size_t max_message_bytes = 64u << 20;
    // Connections beyond this many are accepted and closed at once.
    int max_clients = 4096;
    // A connection that has not authenticated within this time is closed.
    std::chrono::milliseconds auth_timeout{30000};
    // Receives one line per closed-for-cause connection (not for goodbyes) and other
    // server events.
    // Empty: lines go to stderr prefixed "dprun store: ". Called on the server thread.
    std::function<void(const std::string&)> log;
  };

  // Binds, listens and starts the server thread. Fails with kInvalidArgument for bad
  // options and kInternal if the socket cannot be bound.
  static Status Start(const Options& opts, std::unique_ptr<TcpStoreServer>* out);

  ~TcpStoreServer();  // Calls Stop().
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  // The port the server listens on.
  int port() const;

  // How many client connections are open (accepted, not yet closed by either side), as
  // of the server thread's last round; 0 after Stop().
  int clients() const;

  // Closes every connection (parked requests are dropped, so their clients see a lost
  // connection) and joins the server thread. Idempotent; thread-safe.
  void Stop();

  // A Store over the same key space, for the owning process (dprun checks the
  // hvd/started/<rank> keys through it). Sets through it wake parked remote requests.
  // It stays usable after Stop(), as a plain in-memory store.
  std::shared_ptr<Store> LocalStore();

 private:
  class Impl;
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Connects to a TcpStoreServer at host:port and authenticates with `secret`. Retries
// refused connections until `connect_timeout` passes (ranks may start before the server
// listens), then returns kTimeout naming host:port. A wrong secret returns the server's
// error (kInvalidArgument). On success *out is a thread-safe Store.
Status ConnectTcpStore(const std::string& host, int port, const std::string& secret,
                       std::chrono::milliseconds connect_timeout, std::shared_ptr<Store>* out);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_TCP_STORE_H_
