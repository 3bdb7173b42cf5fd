// ControlChannel: the primitives the coordinator needs, per communicator.
//
// Each cycle every rank calls Gather (the root receives every rank's request list)
// and then Broadcast (every rank receives the root's response list); at two ranks,
// a channel may offer Exchange instead (see there). Calls are
// collective and made in the same order on every rank. A failure names the rank
// that could not be reached. The root's Gather waits for every peer even after one
// is lost, so it can name all of them; a timeout breaks the channel for good.
//
// Transport-neutral: the transports implement it (runtime/transport/gloo,
// runtime/transport/shm) and the controller (controller/controller.h) uses it.
#ifndef HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_
#define HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/common/status.h"

namespace hvd {

class ControlChannel {
 public:
  virtual ~ControlChannel() = default;

  // On the root, `all` receives every rank's message (the root's own at its index);
  // elsewhere `mine` is sent and `all` is left empty.
  virtual Status Gather(const std::string& mine, std::vector<std::string>* all) = 0;

  // The root's `*msg` reaches every rank, replacing `*msg` there. On the root,
  // peers already known to be lost are skipped, so an abort still reaches the rest.
  virtual Status Broadcast(std::string* msg) = 0;

  // Two ranks only (size() == 2), where SupportsExchange(): each rank sends `mine`
  // and receives the other's into `*theirs`, both on their way at once, so a
  // cycle's request lists cross in one trip instead of a Gather and a Broadcast's
  // two. Collective like the others; a failure names the other rank. A channel
  // used with Exchange is used with nothing else (each call posts the next one's
  // receive ahead).
  virtual bool SupportsExchange() const { return false; }
  virtual Status Exchange(const std::string& mine, std::string* theirs) {
    (void)mine;
    (void)theirs;
    return Status::Internal("this control channel has no Exchange");
  }

  // Every rank's `words` combined element by element, the result on every rank:
  // words [0, or_words) by bitwise OR, the rest by unsigned maximum (so a bitwise
  // AND travels as the OR of complements). Every rank passes as many words, and
  // or_words <= words->size(). Collective like the others; a failure names the
  // peer. Where SupportsWordAllreduce(), it takes O(log size) steps with O(1)
  // messages at each rank (a tree or recursive doubling, no rank talking to every
  // other); the default goes through the root, a Gather and a Broadcast. The
  // result is exact, so every rank holds the same words.
  virtual bool SupportsWordAllreduce() const { return false; }
  virtual Status AllreduceWords(std::vector<uint64_t>* words, size_t or_words);

  // Peers this rank has lost contact with (their connection closed), ascending.
  virtual std::vector<int> lost_peers() const { return {}; }

  // As Backend::Abort: peers waiting on this rank fail now with `why`.
  virtual void Abort(const Status& why) { (void)why; }

  virtual int rank() const = 0;
  virtual int size() const = 0;
};

// Combines `in` into `acc` as AllreduceWords does (OR below or_words, max above).
// Both hold the same number of words.
void CombineWords(const uint64_t* in, size_t n, size_t or_words, uint64_t* acc);

}  // namespace hvd

#endif  // HVD_RUNTIME_COMMON_CONTROL_CHANNEL_H_
