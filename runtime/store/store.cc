#include "runtime/store/store.h"

#include <algorithm>
#include <utility>

#include "runtime/store/key_space.h"

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

class AbortableStore : public Store {
 public:
  AbortableStore(std::shared_ptr<Store> base, std::shared_ptr<Store> watch, std::string abort_key,
                 std::chrono::milliseconds slice)
      : base_(std::move(base)),
        watch_(std::move(watch)),
        abort_key_(std::move(abort_key)),
        slice_(std::max(slice, std::chrono::milliseconds(1))) {}

  Status Set(const std::string& key, const std::string& value) override {
    return base_->Set(key, value);
  }
  Status Get(const std::string& key, std::chrono::milliseconds timeout,
             std::string* value) override {
    return Sliced(timeout, {key},
                  [&](std::chrono::milliseconds t) { return base_->Get(key, t, value); });
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    return base_->Add(key, delta, result);
  }
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    return Sliced(timeout, keys, [&](std::chrono::milliseconds t) { return base_->Wait(keys, t); });
  }
  Status Delete(const std::string& key) override { return base_->Delete(key); }

 private:
  using Clock = std::chrono::steady_clock;

  // Runs `wait` for `timeout` in slices; a timeout names the whole wait the caller
  // asked for (and `keys`), not its last slice.
  template <typename F>
  Status Sliced(std::chrono::milliseconds timeout, const std::vector<std::string>& keys, F&& wait) {
    if (timeout <= slice_) return wait(timeout);
    const auto deadline = Clock::now() + timeout;
    for (;;) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left <= slice_) {
        Status last = wait(std::max(left, std::chrono::milliseconds(0)));
        if (last.code() != StatusCode::kTimeout) return last;
        std::string names;
        for (const auto& k : keys) names += (names.empty() ? "'" : ", '") + k + "'";
        return Status::Timeout("store: timed out after " + std::to_string(timeout.count()) +
                               " ms waiting for key(s) " + names);
      }
      Status s = wait(slice_);
      if (s.code() != StatusCode::kTimeout) return s;
      std::string reason;
      if (watch_->Get(abort_key_, std::chrono::milliseconds(0), &reason).ok() && !reason.empty())
        return Status::RemoteError(reason);
    }
  }

  std::shared_ptr<Store> base_;
  std::shared_ptr<Store> watch_;
  const std::string abort_key_;
  const std::chrono::milliseconds slice_;
};

}  // namespace

std::shared_ptr<Store> NewInMemoryStore() { return NewKeySpaceStore(std::make_shared<KeySpace>()); }

std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix) {
  return std::make_shared<PrefixStore>(std::move(base), prefix);
}

std::shared_ptr<Store> NewAbortableStore(std::shared_ptr<Store> base, std::shared_ptr<Store> watch,
                                         const std::string& abort_key,
                                         std::chrono::milliseconds slice) {
  return std::make_shared<AbortableStore>(std::move(base), std::move(watch), abort_key, slice);
}

}  // namespace hvd
