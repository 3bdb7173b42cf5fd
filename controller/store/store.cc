#include "controller/store/store.h"

#include <utility>

#include "controller/store/key_space.h"

namespace hvd {
namespace {

// A view of `base` under `prefix`: every call forwards with the prefix in front of its
// key(s). Errors come from `base` and name the full keys.
class PrefixStore : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix)) {}

  Status Set(const std::string& key, const std::string& value) override {
    return base_->Set(prefix_ + key, value);
  }
  Status Get(const std::string& key, std::chrono::milliseconds timeout,
             std::string* value) override {
    return base_->Get(prefix_ + key, timeout, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    return base_->Add(prefix_ + key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    return base_->Wait(full, timeout);
  }
  Status Delete(const std::string& key) override { return base_->Delete(prefix_ + key); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace

std::shared_ptr<Store> NewInMemoryStore() { return NewKeySpaceStore(std::make_shared<KeySpace>()); }

std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix) {
  return std::make_shared<PrefixStore>(std::move(base), prefix);
}

}  // namespace hvd
