#include "controller/loop/wire.h"

namespace hvd {

// The values both sides use: hvd::OpType and RequestType, hvd::ResponseType and
// proto::ResponseType (DataType and ReduceOp travel as plain ints).
static_assert(static_cast<int>(OpType::kAllreduce) == proto::ALLREDUCE);
static_assert(static_cast<int>(OpType::kAllgather) == proto::ALLGATHER);
static_assert(static_cast<int>(OpType::kBroadcast) == proto::BROADCAST);
static_assert(static_cast<int>(OpType::kAlltoall) == proto::ALLTOALL);
static_assert(static_cast<int>(OpType::kReducescatter) == proto::REDUCESCATTER);
static_assert(static_cast<int>(OpType::kBarrier) == proto::BARRIER);
static_assert(static_cast<int>(OpType::kJoin) == proto::JOIN);
static_assert(static_cast<int>(ResponseType::kAllreduce) == proto::RESPONSE_ALLREDUCE);
static_assert(static_cast<int>(ResponseType::kAllgather) == proto::RESPONSE_ALLGATHER);
static_assert(static_cast<int>(ResponseType::kBroadcast) == proto::RESPONSE_BROADCAST);
static_assert(static_cast<int>(ResponseType::kAlltoall) == proto::RESPONSE_ALLTOALL);
static_assert(static_cast<int>(ResponseType::kReducescatter) == proto::RESPONSE_REDUCESCATTER);
static_assert(static_cast<int>(ResponseType::kBarrier) == proto::RESPONSE_BARRIER);
static_assert(static_cast<int>(ResponseType::kJoin) == proto::RESPONSE_JOIN);
static_assert(static_cast<int>(ResponseType::kError) == proto::RESPONSE_ERROR);

void ToRequest(const TensorEntry& e, int rank, proto::Request* r) {
  r->Clear();
  r->set_request_rank(rank);
  r->set_type(static_cast<proto::RequestType>(e.type));
  r->set_name(e.name);
  r->set_dtype(static_cast<int>(e.dtype));
  r->set_reduce_op(static_cast<int>(e.reduce_op));
  for (int64_t d : e.shape) r->add_shape(d);
  r->set_prescale_factor(e.prescale_factor);
  r->set_postscale_factor(e.postscale_factor);
  r->set_root_rank(e.root_rank);
  r->set_device(e.device);
  for (int64_t s : e.splits) r->add_splits(s);
  r->set_group_id(e.group_id);
  r->set_group_size(e.group_size);
}

bool SameParameters(const TensorEntry& e, const proto::Request& r) {
  auto same = [](const auto& v, const auto& repeated) {
    if (static_cast<int>(v.size()) != repeated.size()) return false;
    for (int i = 0; i < repeated.size(); ++i)
      if (v[i] != repeated.Get(i)) return false;
    return true;
  };
  return r.type() == static_cast<proto::RequestType>(e.type) &&
         r.dtype() == static_cast<int>(e.dtype) && r.reduce_op() == static_cast<int>(e.reduce_op) &&
         same(e.shape, r.shape()) && r.prescale_factor() == e.prescale_factor &&
         r.postscale_factor() == e.postscale_factor && r.root_rank() == e.root_rank &&
         r.device() == e.device && same(e.splits, r.splits()) && r.group_size() == e.group_size;
}

namespace {

template <typename T, typename Repeated>
void Assign(const Repeated& from, std::vector<T>* to) {
  to->assign(from.begin(), from.end());
}

}  // namespace

void FromWire(const proto::Response& wire, Response* out) {
  out->type = static_cast<ResponseType>(wire.type());
  out->names.resize(wire.names_size());
  for (int i = 0; i < wire.names_size(); ++i) out->names[i].assign(wire.names(i));
  out->dtype = static_cast<DataType>(wire.dtype());
  out->reduce_op = static_cast<ReduceOp>(wire.reduce_op());
  out->prescale_factor = wire.prescale_factor();
  out->postscale_factor = wire.postscale_factor();
  out->root_rank = wire.root_rank();
  out->device = wire.device();
  Assign(wire.counts(), &out->counts);
  Assign(wire.rank_dims(), &out->rank_dims);
  out->error_code = static_cast<StatusCode>(wire.error_code());
  out->error_message.assign(wire.error_message());
  Assign(wire.joined_ranks(), &out->joined_ranks);
  out->group_id = wire.group_id();
  Assign(wire.split_matrix(), &out->split_matrix);
}

}  // namespace hvd
