// Unit tests for controller/messages.proto: every field of RequestList and
// ResponseList survives a round trip, and parsing garbage fails or yields a message
// but never crashes.
//
// The "every field" tests fill fields through reflection, so a field added to the
// .proto later is covered without editing this file.
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/messages.pb.h"

namespace hvd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using google::protobuf::util::MessageDifferencer;

// Sets every field of `m` (recursively) to a non-default value derived from `seed`;
// repeated fields get two elements.
void FillEveryField(Message* m, int seed, int depth = 0) {
  const Descriptor* d = m->GetDescriptor();
  const Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const int v = seed * 100 + i + 1;
    const int n = f->is_repeated() ? 2 : 1;
    for (int k = 0; k < n; ++k) {
      const int x = v + k * 7;
      switch (f->cpp_type()) {
        case FieldDescriptor::CPPTYPE_INT32:
          f->is_repeated() ? r->AddInt32(m, f, -x) : r->SetInt32(m, f, -x);
          break;
        case FieldDescriptor::CPPTYPE_INT64:
          f->is_repeated() ? r->AddInt64(m, f, (int64_t{1} << 40) + x) : r->SetInt64(m, f, (int64_t{1} << 40) + x);
          break;
        case FieldDescriptor::CPPTYPE_UINT32:
          f->is_repeated() ? r->AddUInt32(m, f, 0xfffffff0u + x % 8) : r->SetUInt32(m, f, 0xfffffff0u + x % 8);
          break;
        case FieldDescriptor::CPPTYPE_UINT64:
          f->is_repeated() ? r->AddUInt64(m, f, ~uint64_t{0} - x) : r->SetUInt64(m, f, ~uint64_t{0} - x);
          break;
        case FieldDescriptor::CPPTYPE_DOUBLE:
          f->is_repeated() ? r->AddDouble(m, f, 0.1 * x) : r->SetDouble(m, f, 0.1 * x);
          break;
        case FieldDescriptor::CPPTYPE_FLOAT:
          f->is_repeated() ? r->AddFloat(m, f, 0.5f * x) : r->SetFloat(m, f, 0.5f * x);
          break;
        case FieldDescriptor::CPPTYPE_BOOL:
          f->is_repeated() ? r->AddBool(m, f, true) : r->SetBool(m, f, true);
          break;
        case FieldDescriptor::CPPTYPE_STRING: {
          const std::string s = "s" + std::to_string(x) + std::string("\0mid", 4) + "\xc3\xa9";
          f->is_repeated() ? r->AddString(m, f, s) : r->SetString(m, f, s);
          break;
        }
        case FieldDescriptor::CPPTYPE_ENUM: {
          // The last declared value, so it is non-default (first is the default).
          const auto* e = f->enum_type()->value(f->enum_type()->value_count() - 1 - k % 2);
          f->is_repeated() ? r->AddEnum(m, f, e) : r->SetEnum(m, f, e);
          break;
        }
        case FieldDescriptor::CPPTYPE_MESSAGE: {
          Message* sub = f->is_repeated() ? r->AddMessage(m, f) : r->MutableMessage(m, f);
          if (depth < 3) FillEveryField(sub, x, depth + 1);
          break;
        }
      }
    }
  }
}

// Every field of `m` (recursively) is set: non-empty when repeated, present otherwise.
void ExpectEveryFieldSet(const Message& m, const std::string& path) {
  const Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string where = path + "." + f->name();
    if (f->is_repeated()) {
      EXPECT_EQ(r->FieldSize(m, f), 2) << where;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
        for (int k = 0; k < r->FieldSize(m, f); ++k)
          ExpectEveryFieldSet(r->GetRepeatedMessage(m, f, k), where + "[" + std::to_string(k) + "]");
    } else {
      EXPECT_TRUE(r->HasField(m, f)) << where;
    }
  }
}

template <typename T>
void RoundTripEveryField() {
  T original;
  FillEveryField(&original, 1);
  ExpectEveryFieldSet(original, original.GetDescriptor()->name());
  std::string bytes;
  ASSERT_TRUE(original.SerializeToString(&bytes));
  T parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ExpectEveryFieldSet(parsed, "parsed " + original.GetDescriptor()->name());
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(original, parsed)) << diff;
  EXPECT_EQ(parsed.SerializeAsString(), bytes);
}

TEST(MessagesTest, RequestListRoundTripsEveryField) { RoundTripEveryField<proto::RequestList>(); }
TEST(MessagesTest, ResponseListRoundTripsEveryField) { RoundTripEveryField<proto::ResponseList>(); }

TEST(MessagesTest, RequestListRoundTripExplicit) {
  proto::RequestList list;
  proto::Request* r = list.add_requests();
  r->set_request_rank(3);
  r->set_type(proto::ALLGATHER);
  r->set_name("layer1/weight:0");
  r->set_dtype(3);
  r->set_reduce_op(4);
  r->add_shape(7);
  r->add_shape(0);
  r->add_shape(-1);
  r->set_prescale_factor(0.125);
  r->set_postscale_factor(-8.0);
  r->set_root_rank(2);
  r->set_device(-1);
  r->add_splits(5);
  r->add_splits(2);
  r->set_group_id(int64_t{1} << 50);
  r->set_group_size(9);
  list.add_requests()->set_name("second");
  list.set_shutdown(true);
  list.set_error_code(6);
  list.set_error_message("rank 3: connection reset");
  list.add_cache_bits(~uint64_t{0});
  list.add_cache_bits(1);

  proto::RequestList back;
  ASSERT_TRUE(back.ParseFromString(list.SerializeAsString()));
  ASSERT_EQ(back.requests_size(), 2);
  const proto::Request& b = back.requests(0);
  EXPECT_EQ(b.request_rank(), 3);
  EXPECT_EQ(b.type(), proto::ALLGATHER);
  EXPECT_EQ(b.name(), "layer1/weight:0");
  EXPECT_EQ(b.dtype(), 3);
  EXPECT_EQ(b.reduce_op(), 4);
  EXPECT_THAT(b.shape(), ::testing::ElementsAre(7, 0, -1));
  EXPECT_EQ(b.prescale_factor(), 0.125);
  EXPECT_EQ(b.postscale_factor(), -8.0);
  EXPECT_EQ(b.root_rank(), 2);
  EXPECT_EQ(b.device(), -1);
  EXPECT_THAT(b.splits(), ::testing::ElementsAre(5, 2));
  EXPECT_EQ(b.group_id(), int64_t{1} << 50);
  EXPECT_EQ(b.group_size(), 9);
  EXPECT_EQ(back.requests(1).name(), "second");
  EXPECT_TRUE(back.shutdown());
  EXPECT_EQ(back.error_code(), 6);
  EXPECT_EQ(back.error_message(), "rank 3: connection reset");
  EXPECT_THAT(back.cache_bits(), ::testing::ElementsAre(~uint64_t{0}, 1u));
}

TEST(MessagesTest, ResponseListRoundTripExplicit) {
  proto::ResponseList list;
  proto::Response* r = list.add_responses();
  r->set_type(proto::RESPONSE_ERROR);
  r->add_names("a");
  r->add_names("b");
  r->set_dtype(2);
  r->set_reduce_op(1);
  r->set_prescale_factor(0.5);
  r->set_postscale_factor(2.0);
  r->set_root_rank(1);
  r->set_device(0);
  r->add_counts(10);
  r->add_counts(20);
  r->add_rank_dims(1);
  r->add_rank_dims(2);
  r->set_error_code(4);
  r->set_error_message("tensor 'a' (allreduce): element count differs");
  r->add_joined_ranks(3);
  r->set_group_id(12);
  r->add_split_matrix(0);
  r->add_split_matrix(4);
  list.set_shutdown(true);
  list.set_abort_code(6);
  list.set_abort_message("rank 1 failed: boom");

  proto::ResponseList back;
  ASSERT_TRUE(back.ParseFromString(list.SerializeAsString()));
  ASSERT_EQ(back.responses_size(), 1);
  const proto::Response& b = back.responses(0);
  EXPECT_EQ(b.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(b.names(), ::testing::ElementsAre("a", "b"));
  EXPECT_EQ(b.dtype(), 2);
  EXPECT_EQ(b.reduce_op(), 1);
  EXPECT_EQ(b.prescale_factor(), 0.5);
  EXPECT_EQ(b.postscale_factor(), 2.0);
  EXPECT_EQ(b.root_rank(), 1);
  EXPECT_EQ(b.device(), 0);
  EXPECT_THAT(b.counts(), ::testing::ElementsAre(10, 20));
  EXPECT_THAT(b.rank_dims(), ::testing::ElementsAre(1, 2));
  EXPECT_EQ(b.error_code(), 4);
  EXPECT_EQ(b.error_message(), "tensor 'a' (allreduce): element count differs");
  EXPECT_THAT(b.joined_ranks(), ::testing::ElementsAre(3));
  EXPECT_EQ(b.group_id(), 12);
  EXPECT_THAT(b.split_matrix(), ::testing::ElementsAre(0, 4));
  EXPECT_TRUE(back.shutdown());
  EXPECT_EQ(back.abort_code(), 6);
  EXPECT_EQ(back.abort_message(), "rank 1 failed: boom");
}

TEST(MessagesTest, EnumValuesMatchTheRuntimeTypes) {
  // messages.proto promises its enums equal hvd::OpType so conversions are casts.
  EXPECT_EQ(proto::ALLREDUCE, 0);
  EXPECT_EQ(proto::ALLGATHER, 1);
  EXPECT_EQ(proto::BROADCAST, 2);
  EXPECT_EQ(proto::ALLTOALL, 3);
  EXPECT_EQ(proto::REDUCESCATTER, 4);
  EXPECT_EQ(proto::BARRIER, 5);
  EXPECT_EQ(proto::JOIN, 6);
  for (int t = 0; t <= 6; ++t) EXPECT_EQ(static_cast<int>(static_cast<proto::ResponseType>(t)), t);
  EXPECT_EQ(proto::RESPONSE_JOIN, proto::JOIN);
  EXPECT_EQ(proto::RESPONSE_ERROR, 100);
}

TEST(MessagesTest, EmptyInputParsesAsTheDefaultMessage) {
  proto::RequestList list;
  ASSERT_TRUE(list.ParseFromString(""));
  EXPECT_EQ(list.requests_size(), 0);
  EXPECT_FALSE(list.shutdown());
  proto::ResponseList resp;
  ASSERT_TRUE(resp.ParseFromString(""));
  EXPECT_EQ(resp.abort_code(), 0);
}

TEST(MessagesTest, UnknownEnumValueIsKeptNotRejected) {
  // Field 1 (type), varint 42: proto3 enums are open, so the value survives.
  proto::Response r;
  ASSERT_TRUE(r.ParseFromString(std::string("\x08\x2a", 2)));
  EXPECT_EQ(static_cast<int>(r.type()), 42);
}

TEST(MessagesTest, MalformedWireDataIsRejected) {
  const std::vector<std::string> bad = {
      std::string("\x08", 1),                      // truncated varint
      std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12),  // varint too long
      std::string("\x0a\x05" "ab", 4),             // length past the end
      std::string("\x0a\xff\xff\xff\xff\x0f", 6),  // absurd length
      std::string("\x0f", 1),                      // wire type 7 does not exist
      std::string("\x00", 1),                      // field number 0
      std::string("\x0b", 1),                      // start group never ended
      std::string("\x11\x00\x00", 3),              // truncated fixed64
  };
  for (const auto& b : bad) {
    proto::RequestList req;
    EXPECT_FALSE(req.ParseFromString(b)) << ::testing::PrintToString(b);
    proto::ResponseList resp;
    EXPECT_FALSE(resp.ParseFromString(b)) << ::testing::PrintToString(b);
  }
}

// Silences protobuf's own logging (e.g. "invalid UTF-8" for flipped string bytes).
class QuietProtobufLog {
 public:
  QuietProtobufLog()
      : old_(google::protobuf::SetLogHandler(
            [](google::protobuf::LogLevel, const char*, int, const std::string&) {})) {}
  ~QuietProtobufLog() { google::protobuf::SetLogHandler(old_); }

 private:
  google::protobuf::LogHandler* old_;
};

TEST(MessagesTest, GarbageNeverCrashes) {
  // Random bytes, truncations and bit flips of a valid message: each parse may
  // succeed or fail, but must return, and a parsed message must re-serialize.
  QuietProtobufLog quiet;
  proto::RequestList valid_req;
  FillEveryField(&valid_req, 3);
  proto::ResponseList valid_resp;
  FillEveryField(&valid_resp, 4);
  const std::string seeds[] = {valid_req.SerializeAsString(), valid_resp.SerializeAsString()};
  std::mt19937 rng(7);
  int parsed_ok = 0, parsed_bad = 0;
  auto try_parse = [&](const std::string& bytes) {
    proto::RequestList a;
    proto::ResponseList b;
    (a.ParseFromString(bytes) ? ++parsed_ok : ++parsed_bad);
    (b.ParseFromString(bytes) ? ++parsed_ok : ++parsed_bad);
    std::string out;
    a.SerializeToString(&out);
    b.SerializeToString(&out);
  };
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 64, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    try_parse(junk);
  }
  for (const std::string& seed : seeds) {
    for (size_t len = 0; len < seed.size(); ++len) try_parse(seed.substr(0, len));
    for (int i = 0; i < 2000; ++i) {
      std::string flipped = seed;
      for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k)
        flipped[rng() % flipped.size()] ^= static_cast<char>(1 << (rng() % 8));
      try_parse(flipped);
    }
  }
  EXPECT_GT(parsed_ok, 0);
  EXPECT_GT(parsed_bad, 0);
}

// Regression (fixed in 58652da, names and messages are now `bytes`): as proto3
// `string` fields, a non-UTF-8 tensor name such as Latin-1 "caf\xe9" serialized but
// failed to parse on the coordinator, which stopped the whole job.
TEST(MessagesTest, NonUtf8TensorNameRoundTrips) {
  QuietProtobufLog quiet;
  proto::RequestList list;
  list.add_requests()->set_name("caf\xe9");
  list.set_error_message("strerror: \xff");
  proto::RequestList back;
  ASSERT_TRUE(back.ParseFromString(list.SerializeAsString()));
  EXPECT_EQ(back.requests(0).name(), "caf\xe9");
  proto::ResponseList resp;
  resp.add_responses()->add_names("caf\xe9");
  resp.set_abort_message("rank 1 failed: \xff");
  proto::ResponseList resp_back;
  EXPECT_TRUE(resp_back.ParseFromString(resp.SerializeAsString()));
}

}  // namespace
}  // namespace hvd
