// KeySpace: the keys and values of one rendezvous store, and the waits on them.
//
// Every hvd::Store is, underneath, one of these, so the store contract
// (runtime/store/store.h) is implemented once, here:
//   - InMemoryStore (NewInMemoryStore) is a KeySpace behind NewKeySpaceStore's thin
//     Store adapter;
//   - TcpStoreServer (runtime/store/tcp_store.h) answers every remote request from
//     its KeySpace, and its LocalStore() is the same adapter over that KeySpace.
//
// Semantics:
//   - Keys and values are bytes: empty, NUL and non-UTF-8 bytes are all kept as given.
//   - Add reads a stored value only as the exact decimal text it writes itself: an
//     optional '-' and digits, nothing else ("12abc", " 12", "+12" and "" are not
//     integers). A non-integer or a sum outside int64 fails with kInvalidArgument and
//     leaves the value (and *result) unchanged.
//   - Timeouts are clamped to 0..kMaxTimeoutMs. A wait whose timeout passes returns
//     kTimeout naming, as PrintableKey shows them, the keys still missing.
//
// Thread safety: every method may be called from any thread. One mutex guards the
// map; blocking calls (Wait, Get) sleep on one condition variable that Set and Add
// notify. The non-blocking calls (TryGet, Missing) are for the TCP server's thread,
// which never blocks: it parks a remote GET or WAIT itself and re-checks it.
#ifndef HVD_RUNTIME_STORE_KEY_SPACE_H_
#define HVD_RUNTIME_STORE_KEY_SPACE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/common/status.h"
#include "runtime/store/store.h"

namespace hvd {

// Longer timeouts are clamped to this (30 days), so deadline arithmetic never overflows.
constexpr int64_t kMaxTimeoutMs = 30LL * 24 * 3600 * 1000;

// `ms` clamped to 0..kMaxTimeoutMs.
int64_t ClampTimeoutMs(int64_t ms);

// How store errors show a key: printable ASCII as is, anything else (and '\') as
// \xNN, cut with "..." after about 200 characters.
std::string PrintableKey(const std::string& key);

// "'a', 'b'": the keys as PrintableKey shows them, quoted and comma-separated.
std::string QuoteKeys(const std::vector<std::string>& keys);

// The kTimeout of a wait of `timeout_ms` (already clamped) that ended with `missing`
// absent. Every store implementation words its wait timeouts with this.
Status KeysTimedOut(int64_t timeout_ms, const std::vector<std::string>& missing);

class KeySpace {
 public:
  KeySpace() = default;
  KeySpace(const KeySpace&) = delete;
  KeySpace& operator=(const KeySpace&) = delete;

  // Sets `key` to `value` and wakes blocked waiters.
  void Set(const std::string& key, const std::string& value);

  // Adds `delta` to the integer at `key` (absent counts as 0), stores the sum as
  // decimal text, sets *result to it and wakes blocked waiters. kInvalidArgument,
  // naming the key, for a stored non-integer or an int64 overflow.
  Status Add(const std::string& key, int64_t delta, int64_t* result);

  // Removes `key`; an absent key is not an error.
  void Delete(const std::string& key);

  // Blocks until every key exists or `timeout` passes (then kTimeout).
  Status Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  // Blocks until `key` exists or `timeout` passes (then kTimeout), and reads its value
  // under the same lock, so a Delete cannot fall between the wait and the read.
  Status Get(const std::string& key, std::chrono::milliseconds timeout, std::string* value);

  // Non-blocking: the value of `key` if it exists (true), else false.
  bool TryGet(const std::string& key, std::string* value) const;

  // Non-blocking: the keys among `keys` that do not exist, in order.
  std::vector<std::string> Missing(const std::vector<std::string>& keys) const;

 private:
  std::vector<std::string> MissingLocked(const std::vector<std::string>& keys) const;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;  // Guarded by mu_.
};

// A Store whose every call goes straight to `space`. `on_change`, if set, runs after
// each successful Set and Add (the TCP server uses it to wake its thread so parked
// remote requests see local writes); it must be thread-safe and must not call back
// into the store. Many adapters may share one KeySpace.
std::shared_ptr<Store> NewKeySpaceStore(std::shared_ptr<KeySpace> space,
                                        std::function<void()> on_change = nullptr);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_KEY_SPACE_H_
