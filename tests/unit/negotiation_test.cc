// Unit tests for controller/negotiation.h: MessageTable readiness and ordering,
// BuildResponse's fields, CheckAgreement's messages for every kind of mismatch,
// duplicates, join, and the failure paths (FailWaitingOn, FailUnjoinable, Fail).
#include "controller/negotiation.h"

#include <functional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/common/status.h"
#include "runtime/common/types.h"

namespace hvd {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

proto::Request Req(proto::RequestType type, const std::string& name, std::vector<int64_t> shape,
                   DataType dtype = DataType::kFloat32) {
  proto::Request r;
  r.set_type(type);
  r.set_name(name);
  r.set_dtype(static_cast<int>(dtype));
  r.set_reduce_op(static_cast<int>(ReduceOp::kSum));
  for (int64_t d : shape) r.add_shape(d);
  r.set_prescale_factor(1.0);
  r.set_postscale_factor(1.0);
  r.set_device(-1);
  return r;
}

proto::Request Allreduce(const std::string& name, int64_t count, DataType dtype = DataType::kFloat32) {
  return Req(proto::ALLREDUCE, name, {count}, dtype);
}

// `requests[r]` as rank r submitted it (request_rank set, as MessageTable does).
std::vector<proto::Request> FromRanks(std::vector<proto::Request> requests) {
  for (size_t r = 0; r < requests.size(); ++r) requests[r].set_request_rank(static_cast<int>(r));
  return requests;
}

const Clock::time_point kT0 = Clock::now();
Clock::time_point At(int ms) { return kT0 + std::chrono::milliseconds(ms); }

// Feeds requests[r] from rank r into a table of requests.size() ranks, takes the ready
// tensor and builds its response.
proto::Response Negotiate(const std::vector<proto::Request>& requests) {
  MessageTable table(static_cast<int>(requests.size()));
  for (size_t r = 0; r < requests.size(); ++r) table.Add(static_cast<int>(r), requests[r], At(0));
  const auto ready = table.TakeReady();
  EXPECT_EQ(ready.size(), 1u);
  if (ready.empty()) return proto::Response();
  return table.BuildResponse(ready[0]);
}

// ---------------------------------------------------------------- readiness

TEST(MessageTableTest, ReadyOnlyAfterEveryRankSubmits) {
  MessageTable table(3);
  table.Add(0, Allreduce("a", 4), At(0));
  EXPECT_THAT(table.TakeReady(), IsEmpty());
  table.Add(2, Allreduce("a", 4), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty());
  EXPECT_EQ(table.pending_count(), 1u);
  table.Add(1, Allreduce("a", 4), At(2));
  EXPECT_THAT(table.TakeReady(), ElementsAre("a"));
  EXPECT_THAT(table.TakeReady(), IsEmpty()) << "TakeReady hands each name out once";
  proto::Response resp = table.BuildResponse("a");
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_EQ(table.pending_count(), 0u) << "BuildResponse forgets the tensor";
}

TEST(MessageTableTest, SingleRankIsReadyImmediately) {
  MessageTable table(1);
  table.Add(0, Allreduce("solo", 3), At(0));
  EXPECT_THAT(table.TakeReady(), ElementsAre("solo"));
}

TEST(MessageTableTest, ReadyOrderIsTheOrderOfCompletion) {
  MessageTable table(2);
  table.Add(0, Allreduce("a", 1), At(0));
  table.Add(0, Allreduce("b", 1), At(0));
  table.Add(0, Allreduce("c", 1), At(0));
  table.Add(0, Allreduce("d", 1), At(0));
  table.Add(1, Allreduce("c", 1), At(1));
  table.Add(1, Allreduce("a", 1), At(1));
  table.Add(1, Allreduce("d", 1), At(1));
  EXPECT_THAT(table.TakeReady(), ElementsAre("c", "a", "d"));
  table.Add(1, Allreduce("b", 1), At(2));
  EXPECT_THAT(table.TakeReady(), ElementsAre("b"));
}

TEST(MessageTableTest, NameCanBeReusedAfterItsResponseWasBuilt) {
  MessageTable table(2);
  for (int round = 0; round < 3; ++round) {
    table.Add(0, Allreduce("w", 8), At(round));
    EXPECT_THAT(table.TakeReady(), IsEmpty());
    table.Add(1, Allreduce("w", 8), At(round));
    ASSERT_THAT(table.TakeReady(), ElementsAre("w"));
    EXPECT_EQ(table.BuildResponse("w").type(), proto::RESPONSE_ALLREDUCE) << "round " << round;
  }
}

// ---------------------------------------------------------------- BuildResponse fields

TEST(BuildResponseTest, AllreduceCopiesTheAgreedFields) {
  std::vector<proto::Request> reqs(3, Allreduce("grad", 100, DataType::kFloat16));
  for (auto& r : reqs) {
    r.set_reduce_op(static_cast<int>(ReduceOp::kAverage));
    r.set_prescale_factor(0.5);
    r.set_postscale_factor(4.0);
    r.set_device(2);
    r.set_group_id(9);
  }
  proto::Response resp = Negotiate(reqs);
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_THAT(resp.names(), ElementsAre("grad"));
  EXPECT_EQ(resp.dtype(), static_cast<int>(DataType::kFloat16));
  EXPECT_EQ(resp.reduce_op(), static_cast<int>(ReduceOp::kAverage));
  EXPECT_EQ(resp.prescale_factor(), 0.5);
  EXPECT_EQ(resp.postscale_factor(), 4.0);
  EXPECT_EQ(resp.device(), 2);
  EXPECT_EQ(resp.group_id(), 9);
  EXPECT_THAT(resp.counts(), ElementsAre(100));
  EXPECT_THAT(resp.rank_dims(), IsEmpty());
  EXPECT_THAT(resp.joined_ranks(), IsEmpty());
  EXPECT_EQ(resp.error_code(), 0);
  EXPECT_EQ(resp.error_message(), "");
}

TEST(BuildResponseTest, ZeroElementAllreduce) {
  proto::Response resp = Negotiate({Allreduce("empty", 0), Allreduce("empty", 0)});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_THAT(resp.counts(), ElementsAre(0));
}

TEST(BuildResponseTest, AllgatherCountsRowsAndRankDims) {
  proto::Response resp = Negotiate({Req(proto::ALLGATHER, "g", {2, 3, 4}, DataType::kInt64),
                                    Req(proto::ALLGATHER, "g", {5, 3, 4}, DataType::kInt64),
                                    Req(proto::ALLGATHER, "g", {0, 3, 4}, DataType::kInt64)});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLGATHER);
  EXPECT_EQ(resp.dtype(), static_cast<int>(DataType::kInt64));
  EXPECT_THAT(resp.counts(), ElementsAre(12)) << "elements per first-dimension row";
  EXPECT_THAT(resp.rank_dims(), ElementsAre(2, 5, 0)) << "each rank's first dimension, by rank";
}

TEST(BuildResponseTest, OneDimensionalAllgather) {
  proto::Response resp =
      Negotiate({Req(proto::ALLGATHER, "g", {7}), Req(proto::ALLGATHER, "g", {1})});
  EXPECT_THAT(resp.counts(), ElementsAre(1));
  EXPECT_THAT(resp.rank_dims(), ElementsAre(7, 1));
}

TEST(BuildResponseTest, BroadcastCarriesRootAndCount) {
  std::vector<proto::Request> reqs(2, Req(proto::BROADCAST, "b", {2, 3}));
  for (auto& r : reqs) r.set_root_rank(1);
  proto::Response resp = Negotiate(reqs);
  EXPECT_EQ(resp.type(), proto::RESPONSE_BROADCAST);
  EXPECT_EQ(resp.root_rank(), 1);
  EXPECT_THAT(resp.counts(), ElementsAre(6));
}

TEST(BuildResponseTest, ReducescatterCountsAndFirstDimension) {
  proto::Response resp =
      Negotiate({Req(proto::REDUCESCATTER, "rs", {6, 2}), Req(proto::REDUCESCATTER, "rs", {6, 2})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_REDUCESCATTER);
  EXPECT_THAT(resp.counts(), ElementsAre(12));
  EXPECT_THAT(resp.rank_dims(), ElementsAre(6));
}

TEST(BuildResponseTest, Barrier) {
  proto::Response resp =
      Negotiate({Req(proto::BARRIER, "__barrier.0", {}), Req(proto::BARRIER, "__barrier.0", {})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_BARRIER);
  EXPECT_THAT(resp.names(), ElementsAre("__barrier.0"));
}

TEST(BuildResponseTest, JoinReportsTheLastRankToJoin) {
  MessageTable table(3);
  table.Add(2, Req(proto::JOIN, "__join", {}), At(0));
  table.Add(0, Req(proto::JOIN, "__join", {}), At(1));
  table.Add(1, Req(proto::JOIN, "__join", {}), At(2));
  ASSERT_THAT(table.TakeReady(), ElementsAre("__join"));
  proto::Response resp = table.BuildResponse("__join");
  EXPECT_EQ(resp.type(), proto::RESPONSE_JOIN);
  EXPECT_EQ(resp.root_rank(), 1);
}

TEST(BuildResponseTest, AlltoallSplitMatrix) {
  std::vector<proto::Request> reqs = {Req(proto::ALLTOALL, "a2a", {4, 3}),
                                      Req(proto::ALLTOALL, "a2a", {5, 3})};
  reqs[0].add_splits(1);
  reqs[0].add_splits(3);
  reqs[1].add_splits(5);
  reqs[1].add_splits(0);
  proto::Response resp = Negotiate(reqs);
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLTOALL);
  EXPECT_THAT(resp.counts(), ElementsAre(3));
  EXPECT_THAT(resp.split_matrix(), ElementsAre(1, 3, 5, 0)) << "rank s to rank d at s * size + d";

  // Without splits the first dimension is divided evenly.
  resp = Negotiate({Req(proto::ALLTOALL, "even", {4}), Req(proto::ALLTOALL, "even", {6})});
  EXPECT_THAT(resp.split_matrix(), ElementsAre(2, 2, 3, 3));
}

TEST(BuildResponseTest, AlltoallInvalidSplits) {
  auto with_splits = [](int64_t rows, std::vector<int64_t> splits) {
    proto::Request r = Req(proto::ALLTOALL, "a2a", {rows});
    for (int64_t s : splits) r.add_splits(s);
    return r;
  };
  proto::Response resp = Negotiate({with_splits(4, {2, 2}), with_splits(4, {1, 4})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_EQ(resp.error_code(), static_cast<int>(StatusCode::kInvalidArgument));
  EXPECT_THAT(resp.error_message(),
              AllOf(HasSubstr("'a2a'"), HasSubstr("rank 1"), HasSubstr("add up to 5"), HasSubstr("4")));
  resp = Negotiate({with_splits(4, {2, 2}), with_splits(4, {4, 0, 0})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(resp.error_message(), AllOf(HasSubstr("rank 1"), HasSubstr("3 split sizes"), HasSubstr("2 ranks")));
  resp = Negotiate({with_splits(4, {5, -1}), with_splits(4, {2, 2})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(resp.error_message(), AllOf(HasSubstr("rank 0"), HasSubstr("negative"), HasSubstr("-1")));
  resp = Negotiate({Req(proto::ALLTOALL, "odd", {3}), Req(proto::ALLTOALL, "odd", {4})});
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(resp.error_message(),
              AllOf(HasSubstr("'odd'"), HasSubstr("rank 0"), HasSubstr("3"), HasSubstr("not divisible by 2")));
}

TEST(BuildResponseTest, LastArrival) {
  MessageTable table(3);
  table.Add(1, Allreduce("x", 1), At(10));
  table.Add(0, Allreduce("x", 1), At(15));
  table.Add(2, Allreduce("x", 1), At(250));
  ASSERT_THAT(table.TakeReady(), ElementsAre("x"));
  table.BuildResponse("x");
  EXPECT_EQ(table.last_arrival().last_rank, 2);
  EXPECT_EQ(table.last_arrival().lag, std::chrono::milliseconds(240));
}

// ---------------------------------------------------------------- CheckAgreement

TEST(CheckAgreementTest, IdenticalRequestsAgree) {
  for (auto type : {proto::ALLREDUCE, proto::ALLGATHER, proto::BROADCAST, proto::REDUCESCATTER,
                    proto::BARRIER, proto::JOIN}) {
    std::vector<proto::Request> reqs = FromRanks(std::vector<proto::Request>(4, Req(type, "t", {3, 2})));
    EXPECT_EQ(CheckAgreement("t", reqs), "") << OpTypeName(static_cast<OpType>(type));
  }
}

// Builds two-rank requests where rank 1 differs from rank 0 by `mutate`, and checks the
// message from CheckAgreement and from BuildResponse (which must be RESPONSE_ERROR with
// kMismatch and the same text).
void ExpectMismatch(proto::Request base, const std::function<void(proto::Request*)>& mutate,
                    const std::vector<std::string>& parts) {
  std::vector<proto::Request> reqs = {base, base};
  mutate(&reqs[1]);
  reqs = FromRanks(reqs);
  const std::string msg = CheckAgreement(base.name(), reqs);
  EXPECT_THAT(msg, HasSubstr("'" + base.name() + "'"));
  for (const auto& p : parts) EXPECT_THAT(msg, HasSubstr(p));
  proto::Response resp = Negotiate(reqs);
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_EQ(resp.error_code(), static_cast<int>(StatusCode::kMismatch));
  EXPECT_EQ(resp.error_message(), msg);
  EXPECT_THAT(resp.names(), ElementsAre(base.name()));
}

TEST(CheckAgreementTest, Collective) {
  ExpectMismatch(Allreduce("w", 4), [](proto::Request* r) { r->set_type(proto::ALLGATHER); },
                 {"collective", "rank 0 has allreduce", "rank 1 has allgather"});
}

TEST(CheckAgreementTest, Dtype) {
  ExpectMismatch(Allreduce("w", 4),
                 [](proto::Request* r) { r->set_dtype(static_cast<int>(DataType::kFloat64)); },
                 {"dtype", "rank 0 has float32; rank 1 has float64"});
}

TEST(CheckAgreementTest, ElementCount) {
  ExpectMismatch(Allreduce("w", 100), [](proto::Request* r) { r->set_shape(0, 99); },
                 {"allreduce", "element count", "rank 0 has 100; rank 1 has 99"});
}

TEST(CheckAgreementTest, AllreduceShape) {
  // Same element count, different shape: a mismatch, as in Horovod.
  ExpectMismatch(Req(proto::ALLREDUCE, "w", {17, 1311}),
                 [](proto::Request* r) {
                   r->set_shape(1, 23);
                   r->add_shape(57);
                 },
                 {"allreduce", "shape", "rank 0 has [17, 1311]; rank 1 has [17, 23, 57]"});
}

TEST(CheckAgreementTest, ReduceOp) {
  ExpectMismatch(Allreduce("w", 4),
                 [](proto::Request* r) { r->set_reduce_op(static_cast<int>(ReduceOp::kMax)); },
                 {"reduce op", "rank 0 has sum; rank 1 has max"});
}

TEST(CheckAgreementTest, PrescaleFactor) {
  ExpectMismatch(Allreduce("w", 4), [](proto::Request* r) { r->set_prescale_factor(0.5); },
                 {"prescale factor", "rank 0 has 1; rank 1 has 0.5"});
}

TEST(CheckAgreementTest, PostscaleFactor) {
  ExpectMismatch(Allreduce("w", 4), [](proto::Request* r) { r->set_postscale_factor(0.25); },
                 {"postscale factor", "rank 0 has 1; rank 1 has 0.25"});
}

TEST(CheckAgreementTest, RootRank) {
  ExpectMismatch(Req(proto::BROADCAST, "b", {8}), [](proto::Request* r) { r->set_root_rank(1); },
                 {"broadcast", "root rank", "rank 0 has 0; rank 1 has 1"});
}

TEST(CheckAgreementTest, BroadcastShape) {
  // Same element count, different shape: broadcast compares the whole shape.
  ExpectMismatch(Req(proto::BROADCAST, "b", {2, 3}),
                 [](proto::Request* r) {
                   r->set_shape(0, 3);
                   r->set_shape(1, 2);
                 },
                 {"shape", "rank 0 has [2, 3]; rank 1 has [3, 2]"});
}

TEST(CheckAgreementTest, AllgatherTrailingShape) {
  ExpectMismatch(Req(proto::ALLGATHER, "g", {2, 3}), [](proto::Request* r) { r->set_shape(1, 4); },
                 {"allgather", "shape after the first dimension", "rank 0 has [3]; rank 1 has [4]"});
}

TEST(CheckAgreementTest, AllgatherFirstDimensionMayDiffer) {
  std::vector<proto::Request> reqs =
      FromRanks({Req(proto::ALLGATHER, "g", {2, 3}), Req(proto::ALLGATHER, "g", {9, 3})});
  EXPECT_EQ(CheckAgreement("g", reqs), "");
}

TEST(CheckAgreementTest, AllgatherNumberOfDimensions) {
  ExpectMismatch(Req(proto::ALLGATHER, "g", {2, 3}), [](proto::Request* r) { r->add_shape(1); },
                 {"number of dimensions", "rank 0 has 2; rank 1 has 3"});
}

TEST(CheckAgreementTest, Device) {
  ExpectMismatch(Allreduce("w", 4), [](proto::Request* r) { r->set_device(0); },
                 {"device", "rank 0 has cpu; rank 1 has cuda"});
}

TEST(CheckAgreementTest, GpuIndexMayDifferAcrossRanks) {
  proto::Request a = Allreduce("w", 4), b = Allreduce("w", 4);
  a.set_device(0);
  b.set_device(1);
  EXPECT_EQ(CheckAgreement("w", FromRanks({a, b})), "");
}

TEST(CheckAgreementTest, ReducescatterShapeAndOp) {
  ExpectMismatch(Req(proto::REDUCESCATTER, "rs", {4, 2}), [](proto::Request* r) { r->set_shape(0, 2); },
                 {"shape", "rank 0 has [4, 2]; rank 1 has [2, 2]"});
  ExpectMismatch(Req(proto::REDUCESCATTER, "rs", {4}),
                 [](proto::Request* r) { r->set_reduce_op(static_cast<int>(ReduceOp::kAverage)); },
                 {"reduce op", "rank 0 has sum; rank 1 has average"});
}

TEST(CheckAgreementTest, AlltoallUseOfSplits) {
  ExpectMismatch(Req(proto::ALLTOALL, "a", {4}),
                 [](proto::Request* r) {
                   r->add_splits(1);
                   r->add_splits(3);
                 },
                 {"split sizes", "rank 0 has no splits; rank 1 has splits"});
}

TEST(CheckAgreementTest, BarrierRankList) {
  ExpectMismatch(Req(proto::BARRIER, "ps", {0, 1}), [](proto::Request* r) { r->add_shape(2); },
                 {"rank list", "rank 0 has [0, 1]; rank 1 has [0, 1, 2]"});
}

TEST(CheckAgreementTest, GroupsRanksThatAgree) {
  std::vector<proto::Request> reqs(4, Allreduce("w", 100));
  reqs[1].set_shape(0, 99);
  reqs[3].set_shape(0, 99);
  const std::string msg = CheckAgreement("w", FromRanks(reqs));
  EXPECT_THAT(msg, HasSubstr("ranks 0, 2 have 100; ranks 1, 3 have 99"));

  std::vector<proto::Request> three(5, Allreduce("v", 1));
  three[2].set_shape(0, 2);
  three[3].set_shape(0, 3);
  three[4].set_shape(0, 2);
  EXPECT_THAT(CheckAgreement("v", FromRanks(three)),
              AllOf(HasSubstr("tensor 'v'"), HasSubstr("ranks 0, 1 have 1; ranks 2, 4 have 2; rank 3 has 3")));
}

TEST(CheckAgreementTest, MessageNamesRanksByRequestRank) {
  // The ranks in the message are the submitting ranks, not positions in the vector.
  std::vector<proto::Request> reqs = {Allreduce("w", 5), Allreduce("w", 6)};
  reqs[0].set_request_rank(3);
  reqs[1].set_request_rank(7);
  EXPECT_THAT(CheckAgreement("w", reqs), HasSubstr("rank 3 has 5; rank 7 has 6"));
}

// Regression (fixed in e83a5c8): scale factors were compared as 6-significant-digit
// text, so factors differing past the sixth digit agreed and rank 0's was silently used.
TEST(CheckAgreementTest, ScaleFactorsDifferingPastSixDigitsAreAMismatch) {
  std::vector<proto::Request> reqs = {Allreduce("w", 4), Allreduce("w", 4)};
  reqs[1].set_prescale_factor(1.0000001);
  EXPECT_THAT(CheckAgreement("w", FromRanks(reqs)), HasSubstr("prescale factor"));
  reqs[1].set_prescale_factor(1.0);
  reqs[0].set_postscale_factor(0.1234567);
  reqs[1].set_postscale_factor(0.1234568);
  EXPECT_THAT(CheckAgreement("w", FromRanks(reqs)), HasSubstr("postscale factor"));
}

// ---------------------------------------------------------------- duplicates

TEST(MessageTableTest, DuplicateSubmissionByOneRankIsReported) {
  MessageTable table(2);
  table.Add(0, Allreduce("dup", 4), At(0));
  table.Add(0, Allreduce("dup", 4), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty()) << "a second request from rank 0 is not rank 1's";
  table.Add(1, Allreduce("dup", 4), At(2));
  ASSERT_THAT(table.TakeReady(), ElementsAre("dup"));
  proto::Response resp = table.BuildResponse("dup");
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_NE(resp.error_code(), 0);
  EXPECT_THAT(resp.error_message(), AllOf(HasSubstr("'dup'"), HasSubstr("twice"), HasSubstr("rank 0")));
  EXPECT_THAT(resp.names(), ElementsAre("dup"));
}

// ---------------------------------------------------------------- failure paths

TEST(MessageTableTest, FailWaitingOnFailsOnlyTensorsMissingThatRank) {
  MessageTable table(3);
  table.Add(0, Allreduce("a", 1), At(0));
  table.Add(1, Allreduce("a", 1), At(0));
  table.Add(0, Allreduce("b", 1), At(0));
  table.Add(2, Allreduce("b", 1), At(0));
  table.Add(1, Allreduce("c", 1), At(0));
  std::vector<proto::Response> failed =
      table.FailWaitingOn(2, static_cast<int>(StatusCode::kShutDown), "rank 2 has shut down");
  ASSERT_EQ(failed.size(), 2u);
  std::vector<std::string> names;
  for (const auto& r : failed) {
    ASSERT_EQ(r.names_size(), 1);
    names.push_back(r.names(0));
    EXPECT_EQ(r.type(), proto::RESPONSE_ERROR);
    EXPECT_EQ(r.error_code(), static_cast<int>(StatusCode::kShutDown));
    EXPECT_THAT(r.error_message(), AllOf(HasSubstr("'" + r.names(0) + "'"), HasSubstr("rank 2 has shut down")));
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("a", "c"));
  EXPECT_EQ(table.pending_count(), 1u);
  table.Add(1, Allreduce("b", 1), At(1));
  EXPECT_THAT(table.TakeReady(), ElementsAre("b")) << "'b' had rank 2 already";
  EXPECT_TRUE(table.FailWaitingOn(0, 7, "x").empty());
}

TEST(MessageTableTest, FailForgetsThePendingTensor) {
  MessageTable table(2);
  table.Add(0, Allreduce("a", 1), At(0));
  proto::Response resp = table.Fail("a", static_cast<int>(StatusCode::kTimeout), "stalled: 'a'");
  EXPECT_EQ(resp.type(), proto::RESPONSE_ERROR);
  EXPECT_THAT(resp.names(), ElementsAre("a"));
  EXPECT_EQ(resp.error_code(), static_cast<int>(StatusCode::kTimeout));
  EXPECT_EQ(resp.error_message(), "stalled: 'a'");
  EXPECT_EQ(table.pending_count(), 0u);
  EXPECT_TRUE(table.Pending().empty());
  // The name starts over: rank 1 alone does not complete it.
  table.Add(1, Allreduce("a", 1), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty());
}

TEST(MessageTableTest, FailRemovesAReadyTensorFromTheReadyList) {
  MessageTable table(1);
  table.Add(0, Allreduce("a", 1), At(0));
  table.Add(0, Allreduce("b", 1), At(0));
  table.Fail("a", 5, "gone");
  EXPECT_THAT(table.TakeReady(), ElementsAre("b"));
}

TEST(MessageTableTest, PendingListsSubmittedAndMissingRanksOldestFirst) {
  MessageTable table(4);
  table.Add(3, Allreduce("young", 1), At(30));
  table.Add(1, Allreduce("old", 1), At(10));
  table.Add(2, Allreduce("middle", 1), At(20));
  table.Add(0, Allreduce("old", 1), At(40));  // a later arrival does not make it younger
  table.Add(0, Allreduce("done", 1), At(0));
  table.Add(1, Allreduce("done", 1), At(0));
  table.Add(2, Allreduce("done", 1), At(0));
  table.Add(3, Allreduce("done", 1), At(0));
  ASSERT_THAT(table.TakeReady(), ElementsAre("done"));
  table.BuildResponse("done");
  std::vector<PendingTensor> p = table.Pending();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].name, "old");
  EXPECT_THAT(p[0].submitted, ElementsAre(0, 1));
  EXPECT_THAT(p[0].missing, ElementsAre(2, 3));
  EXPECT_EQ(p[0].first_seen, At(10));
  EXPECT_EQ(p[1].name, "middle");
  EXPECT_THAT(p[1].submitted, ElementsAre(2));
  EXPECT_THAT(p[1].missing, ElementsAre(0, 1, 3));
  EXPECT_EQ(p[1].first_seen, At(20));
  EXPECT_EQ(p[2].name, "young");
  EXPECT_THAT(p[2].submitted, ElementsAre(3));
  EXPECT_THAT(p[2].missing, ElementsAre(0, 1, 2));
}

// ---------------------------------------------------------------- join

TEST(MessageTableTest, JoinedRanksStandInForAllreduceOnly) {
  MessageTable table(3);
  table.SetJoined({2});
  table.Add(0, Allreduce("x", 4), At(0));
  EXPECT_THAT(table.TakeReady(), IsEmpty()) << "rank 1 has neither submitted nor joined";
  table.Add(1, Allreduce("x", 4), At(0));
  ASSERT_THAT(table.TakeReady(), ElementsAre("x"));
  proto::Response resp = table.BuildResponse("x");
  EXPECT_EQ(resp.type(), proto::RESPONSE_ALLREDUCE);
  EXPECT_THAT(resp.joined_ranks(), ElementsAre(2));
  EXPECT_THAT(resp.counts(), ElementsAre(4));

  table.Add(0, Req(proto::ALLGATHER, "g", {1}), At(1));
  table.Add(1, Req(proto::ALLGATHER, "g", {1}), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty()) << "a joined rank cannot stand in for allgather";
  table.Add(0, Req(proto::BROADCAST, "b", {1}), At(1));
  table.Add(1, Req(proto::BROADCAST, "b", {1}), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty());

  std::vector<proto::Response> doomed = table.FailUnjoinable();
  ASSERT_EQ(doomed.size(), 2u);
  for (const auto& r : doomed) {
    EXPECT_EQ(r.type(), proto::RESPONSE_ERROR);
    EXPECT_EQ(r.error_code(), static_cast<int>(StatusCode::kInvalidUsage));
    EXPECT_THAT(r.error_message(), AllOf(HasSubstr("'" + r.names(0) + "'"), HasSubstr("2"), HasSubstr("join")));
  }
  EXPECT_EQ(table.pending_count(), 0u);
}

TEST(MessageTableTest, SetJoinedCompletesAllreducesAlreadyWaiting) {
  MessageTable table(3);
  table.Add(0, Allreduce("p", 1), At(0));
  table.Add(1, Allreduce("p", 1), At(0));
  table.Add(0, Req(proto::ALLGATHER, "q", {1}), At(0));
  table.Add(1, Req(proto::ALLGATHER, "q", {1}), At(0));
  table.Add(0, Allreduce("r", 1), At(0));  // still waits on rank 1
  EXPECT_THAT(table.TakeReady(), IsEmpty());
  table.SetJoined({2});
  EXPECT_THAT(table.TakeReady(), ElementsAre("p"));
  EXPECT_THAT(table.BuildResponse("p").joined_ranks(), ElementsAre(2));
  // Un-joining: everything needs every rank again.
  table.SetJoined({});
  table.Add(0, Allreduce("s", 1), At(1));
  table.Add(1, Allreduce("s", 1), At(1));
  EXPECT_THAT(table.TakeReady(), IsEmpty());
  EXPECT_TRUE(table.FailUnjoinable().empty()) << "nothing is unjoinable with no joined ranks";
}

TEST(MessageTableTest, FailUnjoinableLeavesAllreduceAndUnaffectedTensors) {
  MessageTable table(3);
  table.Add(0, Req(proto::ALLGATHER, "g", {1}), At(0));  // waits on 1 (not joined) and 2
  table.Add(1, Req(proto::BROADCAST, "b", {1}), At(0));
  table.Add(2, Req(proto::BROADCAST, "b", {1}), At(0));  // waits on rank 0 only
  table.SetJoined({0});
  std::vector<proto::Response> doomed = table.FailUnjoinable();
  ASSERT_EQ(doomed.size(), 1u);
  EXPECT_THAT(doomed[0].names(), ElementsAre("b"));
  EXPECT_THAT(doomed[0].error_message(), AllOf(HasSubstr("'b'"), HasSubstr("broadcast"), HasSubstr("0")));
  EXPECT_EQ(table.pending_count(), 1u);
}

}  // namespace
}  // namespace hvd
