// Store: the key-value store that ranks rendezvous through.
//
// As in c10d, one interface with several implementations, all held to one contract
// (tests/unit/store_contract_test.cc runs every case against each of them):
//   - InMemoryStore: threads in one process (tests run N runtimes as N threads).
//   - TcpStoreClient: talks to a TcpStoreServer (runtime/store/tcp_store.h) that dprun, or
//     rank 0 when no launcher is used, serves. Every connection presents the job's secret.
// Both keep their keys in a KeySpace (runtime/store/key_space.h), the one
// implementation of the semantics below, so they cannot drift apart.
//
// Keys and values are bytes (empty and NUL bytes included). Every call that waits takes
// a timeout (clamped to 0..30 days) and returns StatusCode::kTimeout, naming the
// missing keys, when it passes. Implementations are thread-safe.
#ifndef HVD_RUNTIME_STORE_STORE_H_
#define HVD_RUNTIME_STORE_STORE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {

class Store {
 public:
  virtual ~Store() = default;

  // Sets `key` to `value`, replacing any earlier value, and wakes waiters.
  virtual Status Set(const std::string& key, const std::string& value) = 0;

  // Waits until `key` exists (up to `timeout`), then returns its value.
  virtual Status Get(const std::string& key, std::chrono::milliseconds timeout,
                     std::string* value) = 0;

  // Atomically adds `delta` to the integer stored at `key` (absent counts as 0) and
  // returns the new value. The value is stored as decimal text, and only such text
  // ('-' and digits) is read back: a stored non-integer ("12abc") or a sum outside
  // int64 returns kInvalidArgument and changes neither the value nor *result.
  virtual Status Add(const std::string& key, int64_t delta, int64_t* result) = 0;

  // Waits until every key exists, up to `timeout`.
  virtual Status Wait(const std::vector<std::string>& keys,
                      std::chrono::milliseconds timeout) = 0;

  // Removes `key`; absent keys are not an error.
  virtual Status Delete(const std::string& key) = 0;
};

// A store for threads in one process.
std::shared_ptr<Store> NewInMemoryStore();

// A view of `base` that puts `prefix` in front of every key. Process sets and
// re-initialisation use it so their keys never collide.
std::shared_ptr<Store> NewPrefixStore(std::shared_ptr<Store> base, const std::string& prefix);

// A view of `base` whose waits also end when `abort_key` appears in `watch`: Get and
// Wait wait in slices of at most `slice`, and between two slices look for that key
// (one round trip). If it holds a non-empty value, the wait returns kRemoteError with
// that value as its message. Other calls forward unchanged. hvd_init waits for every
// rank through such a view, so a rank that dies during init (dprun records how under
// keys::kLauncherAbortReason) ends the others' waits at once, naming it, instead of
// after HVD_TIMEOUT.
std::shared_ptr<Store> NewAbortableStore(std::shared_ptr<Store> base, std::shared_ptr<Store> watch,
                                         const std::string& abort_key,
                                         std::chrono::milliseconds slice);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_STORE_H_
