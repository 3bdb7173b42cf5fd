#include "runtime/transport/gloo/gloo_store.h"

#include <gloo/common/error.h>

namespace hvd {
namespace {

void ThrowIfError(const Status& s) {
  if (!s.ok()) throw gloo::IoException(s.ToString());
}

}  // namespace

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  ThrowIfError(store_->Set(key, std::string(data.begin(), data.end())));
}

std::vector<char> GlooStore::get(const std::string& key) {
  std::string value;
  ThrowIfError(store_->Get(key, timeout_, &value));
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  ThrowIfError(store_->Wait(keys, timeout));
}

}  // namespace hvd
