// hvd_store_*: a job's store for a launcher in another language (hvd.ray, hvd.spark):
// served over the TcpStoreServer dprun runs, or connected to as a rank does.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "bindings/c/c_api_internal.h"
#include "runtime/store/net_address.h"
#include "runtime/store/tcp_store.h"

struct hvd_store {
  std::unique_ptr<hvd::TcpStoreServer> server;  // null for a connected store
  std::shared_ptr<hvd::Store> store;
};

namespace {

using hvd::Status;

Status Check(const hvd_store_t* store, const char* key) {
  if (store == nullptr) return Status::InvalidArgument("store is NULL");
  if (key == nullptr) return Status::InvalidArgument("store key is NULL");
  return Status::OK();
}

}  // namespace

extern "C" hvd_status_t hvd_store_serve(const char* host, int port, const char* secret,
                                        hvd_store_t** store) {
  HVD_C_GUARD({
    if (host == nullptr || store == nullptr)
      return hvd::capi::Report(Status::InvalidArgument("host and store must not be NULL"));
    *store = nullptr;
    hvd::TcpStoreServer::Options opts;
    opts.host = host;
    opts.port = port;
    opts.secret = secret == nullptr ? "" : secret;
    auto out = std::make_unique<hvd_store>();
    const Status s = hvd::TcpStoreServer::Start(opts, &out->server);
    if (!s.ok())
      return hvd::capi::Report(Status::InvalidArgument("cannot serve the job's store on " +
                                                       hvd::JoinStoreAddress(host, port) + ": " +
                                                       s.message()));
    out->store = out->server->LocalStore();
    *store = out.release();
    return HVD_SUCCESS;
  })
}

extern "C" hvd_status_t hvd_store_connect(const char* address, const char* secret,
                                          int64_t timeout_ms, hvd_store_t** store) {
  HVD_C_GUARD({
    if (address == nullptr || store == nullptr)
      return hvd::capi::Report(Status::InvalidArgument("address and store must not be NULL"));
    *store = nullptr;
    std::string host;
    int port = 0;
    Status s = hvd::ParseHostPort(address, &host, &port);
    if (!s.ok()) return hvd::capi::Report(s.Prepend("store address"));
    auto out = std::make_unique<hvd_store>();
    s = hvd::ConnectTcpStore(host, port, secret == nullptr ? "" : secret,
                             std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)),
                             &out->store);
    if (!s.ok()) return hvd::capi::Report(s);
    *store = out.release();
    return HVD_SUCCESS;
  })
}

extern "C" hvd_status_t hvd_store_port(hvd_store_t* store, int* port) {
  HVD_C_GUARD({
    if (store == nullptr || port == nullptr)
      return hvd::capi::Report(Status::InvalidArgument("store and port must not be NULL"));
    *port = store->server ? store->server->port() : 0;
    return HVD_SUCCESS;
  })
}

extern "C" hvd_status_t hvd_store_set(hvd_store_t* store, const char* key, const void* value,
                                      size_t length) {
  HVD_C_GUARD({
    Status s = Check(store, key);
    if (s.ok() && value == nullptr && length > 0) s = Status::InvalidArgument("value is NULL");
    if (!s.ok()) return hvd::capi::Report(s);
    const char* bytes = static_cast<const char*>(value);
    return hvd::capi::Report(store->store->Set(key, std::string(bytes, bytes ? length : 0)));
  })
}

extern "C" hvd_status_t hvd_store_get(hvd_store_t* store, const char* key, int64_t timeout_ms,
                                      void* buf, size_t capacity, size_t* length) {
  HVD_C_GUARD({
    Status s = Check(store, key);
    if (s.ok() && (length == nullptr || (buf == nullptr && capacity > 0)))
      s = Status::InvalidArgument("length is NULL, or buf is NULL with a capacity");
    if (!s.ok()) return hvd::capi::Report(s);
    std::string value;
    s = store->store->Get(key, std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0)), &value);
    if (!s.ok()) return hvd::capi::Report(s);
    *length = value.size();
    if (capacity > 0) std::memcpy(buf, value.data(), std::min(capacity, value.size()));
    return HVD_SUCCESS;
  })
}

extern "C" hvd_status_t hvd_store_add(hvd_store_t* store, const char* key, int64_t delta,
                                      int64_t* value) {
  HVD_C_GUARD({
    Status s = Check(store, key);
    if (s.ok() && value == nullptr) s = Status::InvalidArgument("value is NULL");
    if (!s.ok()) return hvd::capi::Report(s);
    return hvd::capi::Report(store->store->Add(key, delta, value));
  })
}

extern "C" hvd_status_t hvd_store_close(hvd_store_t* store) {
  HVD_C_GUARD({
    if (store == nullptr) return HVD_SUCCESS;
    if (store->server) store->server->Stop();
    delete store;
    return HVD_SUCCESS;
  })
}
