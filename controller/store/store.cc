#include "controller/store/store.h"

#include <condition_variable>
#include <map>
#include <mutex>

namespace hvd {
namespace {

// Keys live in one map under one mutex; waiters sleep on one condition variable.
class InMemoryStore : public Store {
 public:
  Status Set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      map_[key] = value;
    }
    cv_.notify_all();
    return Status::OK();
  }

  Status Get(const std::string& key, std::chrono::milliseconds timeout,
             std::string* value) override {
    HVD_RETURN_IF_ERROR(Wait({key}, timeout));
    std::lock_guard<std::mutex> lock(mu_);
    *value = map_[key];
    return Status::OK();
  }

  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    int64_t next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      int64_t current = 0;
      if (it != map_.end()) {
        try {
          current = std::stoll(it->second);
        } catch (...) {
          return Status::InvalidArgument("store key '" + key + "' does not hold an integer");
        }
      }
      next = current + delta;
      map_[key] = std::to_string(next);
    }
    cv_.notify_all();
    *result = next;
    return Status::OK();
  }

  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mu_);
    auto all_present = [&] {
      for (const auto& k : keys)
        if (map_.count(k) == 0) return false;
      return true;
    };
    if (!cv_.wait_for(lock, timeout, all_present)) {
      std::string missing;
      for (const auto& k : keys)
        if (map_.count(k) == 0) missing += (missing.empty() ? "'" : ", '") + k + "'";
      return Status::Timeout("store: timed out after " + std::to_string(timeout.count()) +
                             " ms waiting for key(s) " + missing);
    }
    return Status::OK();
  }

  Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    map_.erase(key);
    return Status::OK();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

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

std::shared_ptr<Store> NewInMemoryStore() { return std::make_shared<InMemoryStore>(); }

std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix) {
  return std::make_shared<PrefixStore>(std::move(base), prefix);
}

}  // namespace hvd
