// The TCP store's wire protocol (runtime/store/store.proto): the helpers that the
// server (tcp_store_server.cc) and the client (tcp_store_client.cc) share; internal to
// runtime/store (everyone else uses runtime/store/tcp_store.h).
//
// Framing: every message is a 4-byte big-endian length (kFrameHeaderBytes) followed by
// that many bytes of a serialized StoreRequest or StoreResponse. A reply carries an
// hvd::StatusCode (0 is success) and, on error, the Status message; the helpers here
// write and name those fields so both sides agree on them.
//
// Everything here is a pure function of its arguments: no sockets, no state, safe to
// call from any thread. Checking a length against a limit is the reader's job (the
// server and the client have different limits).
#ifndef HVD_RUNTIME_STORE_STORE_PROTOCOL_H_
#define HVD_RUNTIME_STORE_STORE_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/common/status.h"
#include "runtime/store/store.pb.h"

namespace hvd {

// The length prefix in front of every message.
constexpr size_t kFrameHeaderBytes = 4;

// `message` serialized behind its length prefix, ready to send.
std::string Frame(const google::protobuf::MessageLite& message);

// The body length in the kFrameHeaderBytes length prefix at `p`.
uint32_t ReadLength(const char* p);

// "AUTH", "SET", ...; "an unknown op" for any other value.
const char* OpName(proto::StoreRequest::Op op);

// The request as errors name it: its op and key(s), e.g. "GET 'a'" or "WAIT 'a', 'b'".
std::string DescribeRequest(const proto::StoreRequest& req);

// Whether the secret a client presented equals the job's, compared in time that
// depends only on the length of `expected` (the job's secret).
bool ConstantTimeEquals(const std::string& given, const std::string& expected);

// Writes `s` into a reply: its code and its message.
void SetReplyStatus(const Status& s, proto::StoreResponse* resp);

// Whether `code` is a StatusCode a reply may carry (kOk included).
bool IsKnownReplyCode(int32_t code);

}  // namespace hvd

#endif  // HVD_RUNTIME_STORE_STORE_PROTOCOL_H_
