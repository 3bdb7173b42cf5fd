// controller/loop/wire.h: a queued entry becomes its request, and an agreed response the
// plain Response the data plane runs, every field carried and nothing of what the
// reused destination held before surviving.
#include "controller/loop/wire.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/response_cache.h"

namespace hvd {
namespace {

using ::testing::ElementsAre;

// An entry with every field away from its default.
TensorEntry FullEntry() {
  TensorEntry e;
  e.name = "layer/w";
  e.type = OpType::kAlltoall;
  e.dtype = DataType::kBFloat16;
  e.reduce_op = ReduceOp::kMax;
  e.shape = {6, 2};
  e.prescale_factor = 0.5;
  e.postscale_factor = 3.0;
  e.root_rank = 1;
  e.device = 2;
  e.splits = {4, 2};
  e.group_id = 77;
  e.group_size = 3;
  return e;
}

TEST(WireTest, ToRequestCarriesEveryField) {
  const TensorEntry e = FullEntry();
  // Into a request that held another tensor's (as the runtime's reused ones do):
  // nothing of the old one may survive.
  proto::Request r;
  r.set_name("old/longer/name");
  r.add_shape(9);
  r.add_shape(9);
  r.add_shape(9);
  r.add_splits(1);
  r.set_root_rank(7);
  ToRequest(e, 5, &r);
  EXPECT_EQ(r.request_rank(), 5);
  EXPECT_EQ(r.type(), proto::ALLTOALL);
  EXPECT_EQ(r.name(), "layer/w");
  EXPECT_EQ(r.dtype(), static_cast<int>(DataType::kBFloat16));
  EXPECT_EQ(r.reduce_op(), static_cast<int>(ReduceOp::kMax));
  EXPECT_THAT(r.shape(), ElementsAre(6, 2));
  EXPECT_EQ(r.prescale_factor(), 0.5);
  EXPECT_EQ(r.postscale_factor(), 3.0);
  EXPECT_EQ(r.root_rank(), 1);
  EXPECT_EQ(r.device(), 2);
  EXPECT_THAT(r.splits(), ElementsAre(4, 2));
  EXPECT_EQ(r.group_id(), 77);
  EXPECT_EQ(r.group_size(), 3);
}

// The cache's fast path compares an entry with a cached request without building
// the entry's request: it must agree with comparing the built request, field by
// field, both for the fields that make a different collective and for those that
// do not (the name, which the lookup matched, the group id, the buffers).
TEST(WireTest, SameParametersAsTheBuiltRequestForEveryField) {
  const TensorEntry base = FullEntry();
  proto::Request cached;
  ToRequest(base, 0, &cached);
  const std::vector<std::pair<std::string, std::function<void(TensorEntry*)>>> differ = {
      {"type", [](TensorEntry* e) { e->type = OpType::kBroadcast; }},
      {"dtype", [](TensorEntry* e) { e->dtype = DataType::kFloat64; }},
      {"reduce_op", [](TensorEntry* e) { e->reduce_op = ReduceOp::kMin; }},
      {"a dimension", [](TensorEntry* e) { e->shape = {6, 3}; }},
      {"the rank of the shape", [](TensorEntry* e) { e->shape = {6, 2, 1}; }},
      {"a scalar's shape", [](TensorEntry* e) { e->shape = {}; }},
      {"prescale", [](TensorEntry* e) { e->prescale_factor = 0.25; }},
      {"postscale", [](TensorEntry* e) { e->postscale_factor = 1.0; }},
      {"root_rank", [](TensorEntry* e) { e->root_rank = 0; }},
      {"device", [](TensorEntry* e) { e->device = -1; }},
      {"a split", [](TensorEntry* e) { e->splits = {3, 3}; }},
      {"the number of splits", [](TensorEntry* e) { e->splits = {4, 2, 0}; }},
      {"group_size", [](TensorEntry* e) { e->group_size = 4; }},
  };
  const std::vector<std::pair<std::string, std::function<void(TensorEntry*)>>> same = {
      {"nothing", [](TensorEntry*) {}},
      {"name", [](TensorEntry* e) { e->name = "other"; }},
      {"group_id", [](TensorEntry* e) { e->group_id = 78; }},
      {"buffers and stream", [](TensorEntry* e) {
         static float buf[12];
         e->input = buf;
         e->output = buf;
         e->stream = buf;
       }},
  };
  for (bool want : {false, true}) {
    for (const auto& [field, change] : want ? same : differ) {
      TensorEntry e = base;
      change(&e);
      proto::Request built;
      ToRequest(e, 1, &built);
      EXPECT_EQ(ResponseCache::SameParameters(built, cached), want) << field;
      EXPECT_EQ(SameParameters(e, cached), want) << field;
    }
  }
}

TEST(WireTest, FromWireCarriesEveryFieldIntoAReusedResponse) {
  proto::Response w;
  w.set_type(proto::RESPONSE_ALLGATHER);
  w.add_names("a");
  w.add_names("b");
  w.set_dtype(static_cast<int>(DataType::kInt16));
  w.set_reduce_op(static_cast<int>(ReduceOp::kAverage));
  w.set_prescale_factor(0.25);
  w.set_postscale_factor(4.0);
  w.set_root_rank(3);
  w.set_device(1);
  w.add_counts(5);
  w.add_counts(6);
  for (int64_t d : {1, 2, 3, 4}) w.add_rank_dims(d);
  w.add_joined_ranks(2);
  w.set_group_id(9);
  for (int64_t s : {0, 1, 1, 0}) w.add_split_matrix(s);
  Response r;
  r.names = {"old0", "old1", "old2"};
  r.counts = {7, 7, 7};
  r.error_message = "stale";
  r.joined_ranks = {0, 1};
  FromWire(w, &r);
  EXPECT_EQ(r.type, ResponseType::kAllgather);
  EXPECT_THAT(r.names, ElementsAre("a", "b"));
  EXPECT_EQ(r.size(), 2);
  EXPECT_EQ(r.dtype, DataType::kInt16);
  EXPECT_EQ(r.reduce_op, ReduceOp::kAverage);
  EXPECT_EQ(r.prescale_factor, 0.25);
  EXPECT_EQ(r.postscale_factor, 4.0);
  EXPECT_EQ(r.root_rank, 3);
  EXPECT_EQ(r.device, 1);
  EXPECT_THAT(r.counts, ElementsAre(5, 6));
  EXPECT_THAT(r.rank_dims, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(r.error_code, StatusCode::kOk);
  EXPECT_EQ(r.error_message, "");
  EXPECT_THAT(r.joined_ranks, ElementsAre(2));
  EXPECT_EQ(r.group_id, 9);
  EXPECT_THAT(r.split_matrix, ElementsAre(0, 1, 1, 0));

  proto::Response err;
  err.set_type(proto::RESPONSE_ERROR);
  err.add_names("x");
  err.set_error_code(static_cast<int>(StatusCode::kMismatch));
  err.set_error_message("dtype differs");
  FromWire(err, &r);
  EXPECT_EQ(r.type, ResponseType::kError);
  EXPECT_THAT(r.names, ElementsAre("x"));
  EXPECT_TRUE(r.counts.empty() && r.rank_dims.empty() && r.joined_ranks.empty());
  EXPECT_EQ(r.error_code, StatusCode::kMismatch);
  EXPECT_EQ(r.error_message, "dtype differs");
}

}  // namespace
}  // namespace hvd
