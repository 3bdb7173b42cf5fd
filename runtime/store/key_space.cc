#include "runtime/store/key_space.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <system_error>
#include <utility>

namespace hvd {

using std::chrono::milliseconds;

int64_t ClampTimeoutMs(int64_t ms) { return std::clamp<int64_t>(ms, 0, kMaxTimeoutMs); }

std::string PrintableKey(const std::string& key) {
  std::string out;
  for (unsigned char ch : key) {
    if (out.size() > 200) return out + "...";
    if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
      out.push_back(static_cast<char>(ch));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", ch);
      out += buf;
    }
  }
  return out;
}

std::string QuoteKeys(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "'" : ", '") + PrintableKey(k) + "'";
  return out;
}

Status KeysTimedOut(int64_t timeout_ms, const std::vector<std::string>& missing) {
  return Status::Timeout("store: timed out after " + std::to_string(timeout_ms) +
                         " ms waiting for key(s) " + QuoteKeys(missing));
}

// ---- KeySpace ----

void KeySpace::Set(const std::string& key, const std::string& value) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    map_[key] = value;
  }
  cv_.notify_all();
}

Status KeySpace::Add(const std::string& key, int64_t delta, int64_t* result) {
  int64_t sum = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t current = 0;
    auto it = map_.find(key);
    if (it != map_.end()) {
      const std::string& text = it->second;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), current);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        return Status::InvalidArgument("store key '" + PrintableKey(key) +
                                       "' does not hold an integer");
    }
    if (__builtin_add_overflow(current, delta, &sum))
      return Status::InvalidArgument("store key '" + PrintableKey(key) + "': adding " +
                                     std::to_string(delta) + " overflows int64");
    map_[key] = std::to_string(sum);
  }
  cv_.notify_all();
  *result = sum;
  return Status::OK();
}

void KeySpace::Delete(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  map_.erase(key);
}

Status KeySpace::Wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const int64_t ms = ClampTimeoutMs(timeout.count());
  std::unique_lock<std::mutex> lock(mu_);
  if (cv_.wait_for(lock, milliseconds(ms), [&] { return MissingLocked(keys).empty(); }))
    return Status::OK();
  return KeysTimedOut(ms, MissingLocked(keys));
}

Status KeySpace::Get(const std::string& key, milliseconds timeout, std::string* value) {
  const int64_t ms = ClampTimeoutMs(timeout.count());
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, milliseconds(ms), [&] { return map_.count(key) != 0; }))
    return KeysTimedOut(ms, {key});
  *value = map_.at(key);
  return Status::OK();
}

bool KeySpace::TryGet(const std::string& key, std::string* value) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  *value = it->second;
  return true;
}

std::vector<std::string> KeySpace::Missing(const std::vector<std::string>& keys) const {
  std::lock_guard<std::mutex> lock(mu_);
  return MissingLocked(keys);
}

std::vector<std::string> KeySpace::MissingLocked(const std::vector<std::string>& keys) const {
  std::vector<std::string> missing;
  for (const auto& k : keys)
    if (map_.count(k) == 0) missing.push_back(k);
  return missing;
}

// ---- The Store adapter ----

namespace {

class KeySpaceStore : public Store {
 public:
  KeySpaceStore(std::shared_ptr<KeySpace> space, std::function<void()> on_change)
      : space_(std::move(space)), on_change_(std::move(on_change)) {}

  Status Set(const std::string& key, const std::string& value) override {
    space_->Set(key, value);
    Changed();
    return Status::OK();
  }
  Status Get(const std::string& key, milliseconds timeout, std::string* value) override {
    return space_->Get(key, timeout, value);
  }
  Status Add(const std::string& key, int64_t delta, int64_t* result) override {
    HVD_RETURN_IF_ERROR(space_->Add(key, delta, result));
    Changed();
    return Status::OK();
  }
  Status Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    return space_->Wait(keys, timeout);
  }
  Status Delete(const std::string& key) override {
    space_->Delete(key);
    return Status::OK();
  }

 private:
  void Changed() {
    if (on_change_) on_change_();
  }

  const std::shared_ptr<KeySpace> space_;
  const std::function<void()> on_change_;
};

}  // namespace

std::shared_ptr<Store> NewKeySpaceStore(std::shared_ptr<KeySpace> space,
                                        std::function<void()> on_change) {
  return std::make_shared<KeySpaceStore>(std::move(space), std::move(on_change));
}

}  // namespace hvd
