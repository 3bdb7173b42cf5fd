// Wire: the data plane's plain types to and from the control plane's messages.
//
// The controller negotiates in protobuf (controller/messages.proto), the format that
// crosses processes; the data plane (runtime/data) works on plain C++ types. The
// runtime, which owns both, converts here: each cycle every new entry becomes the
// request it sends, and every agreed response becomes the Response its executor runs.
// Both conversions write into objects the caller reuses, so a steady step allocates
// nothing. The enum values the two sides share are checked at compile time in
// wire.cc.
#ifndef HVD_CONTROLLER_LOOP_WIRE_H_
#define HVD_CONTROLLER_LOOP_WIRE_H_

#include "controller/messages.pb.h"
#include "runtime/data/response.h"
#include "runtime/data/tensor_queue.h"

namespace hvd {

// `e`'s request from `rank`, into `r`, overwriting every field (and reusing its
// allocations).
void ToRequest(const TensorEntry& e, int rank, proto::Request* r);

// Whether ToRequest(e) would ask for the same collective as `r`: the fields
// ResponseCache::SameParameters compares (not the name, rank or group id), read
// from `e` without building its request. The cache's fast path
// (Controller::CachedRequest).
bool SameParameters(const TensorEntry& e, const proto::Request& r);

// `wire` as the data plane's Response, into `out`, overwriting every field (and
// reusing the capacity of its vectors and strings).
void FromWire(const proto::Response& wire, Response* out);

}  // namespace hvd

#endif  // HVD_CONTROLLER_LOOP_WIRE_H_
