// GlooStore: presents an hvd::Store as the gloo::rendezvous::Store that Gloo's
// connectFullMesh needs. Gloo's interface reports failure by exception, so every
// failed hvd::Status becomes a gloo::IoException carrying its message; the caller
// (GlooBackend's setup) turns that back into a Status.
#ifndef HVD_RUNTIME_TRANSPORT_GLOO_GLOO_STORE_H_
#define HVD_RUNTIME_TRANSPORT_GLOO_GLOO_STORE_H_

#include <chrono>
#include <memory>

#include <gloo/rendezvous/store.h>

#include "runtime/store/store.h"

namespace hvd {

class GlooStore : public gloo::rendezvous::Store {
 public:
  // Waits without an explicit timeout use `timeout`.
  GlooStore(std::shared_ptr<hvd::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<hvd::Store> store_;
  std::chrono::milliseconds timeout_;
};

}  // namespace hvd

#endif  // HVD_RUNTIME_TRANSPORT_GLOO_GLOO_STORE_H_
