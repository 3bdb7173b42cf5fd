#include "runtime/store/store_protocol.h"

#include <arpa/inet.h>

#include <cstring>
#include <vector>

#include "runtime/store/key_space.h"

namespace hvd {

using proto::StoreRequest;

std::string Frame(const google::protobuf::MessageLite& message) {
  const size_t n = message.ByteSizeLong();
  std::string out(kFrameHeaderBytes + n, '\0');
  const uint32_t be = htonl(static_cast<uint32_t>(n));
  std::memcpy(&out[0], &be, kFrameHeaderBytes);
  message.SerializeToArray(&out[kFrameHeaderBytes], static_cast<int>(n));
  return out;
}

uint32_t ReadLength(const char* p) {
  uint32_t be;
  std::memcpy(&be, p, kFrameHeaderBytes);
  return ntohl(be);
}

const char* OpName(StoreRequest::Op op) {
  switch (op) {
    case StoreRequest::AUTH:
      return "AUTH";
    case StoreRequest::SET:
      return "SET";
    case StoreRequest::GET:
      return "GET";
    case StoreRequest::ADD:
      return "ADD";
    case StoreRequest::WAIT:
      return "WAIT";
    case StoreRequest::DELETE:
      return "DELETE";
    default:
      return "an unknown op";
  }
}

std::string DescribeRequest(const StoreRequest& req) {
  std::string what = OpName(req.op());
  if (!req.key().empty()) what += " '" + PrintableKey(req.key()) + "'";
  if (req.keys_size() > 0)
    what += " " + QuoteKeys(std::vector<std::string>(req.keys().begin(), req.keys().end()));
  return what;
}

bool ConstantTimeEquals(const std::string& given, const std::string& expected) {
  unsigned diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

void SetReplyStatus(const Status& s, proto::StoreResponse* resp) {
  resp->set_code(static_cast<int>(s.code()));
  resp->set_message(s.message());
}

bool IsKnownReplyCode(int32_t code) {
  return code >= 0 && code <= static_cast<int>(StatusCode::kInProgress);
}

}  // namespace hvd
