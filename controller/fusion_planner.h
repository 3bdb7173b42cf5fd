// Fusion planning: which agreed tensors share one fusion buffer (pure).
//
// The coordinator runs PlanFusion over the cycle's responses before broadcasting
// them, so every rank executes the same fused groups. Responses of the same kind
// (allreduce, allgather or reducescatter) whose dtype, op, scale factors, device
// and joined ranks are equal are merged into one response, in order, while the
// group's bytes stay within `threshold`. A tensor larger than the threshold keeps
// a response of its own; threshold 0 disables fusion. A group closes when the next
// compatible tensor does not fit; later compatible tensors open a new group. The
// output keeps the order of each group's first tensor, and tensors keep their
// relative order within a group. The tensors of one grouped call (the same
// non-zero group_id) always share a response, whatever the threshold. Errors, broadcasts, alltoalls, barriers and joins
// are never fused.
#ifndef HVD_CONTROLLER_FUSION_PLANNER_H_
#define HVD_CONTROLLER_FUSION_PLANNER_H_

#include <cstdint>
#include <vector>

#include "controller/messages.pb.h"

namespace hvd {

// Bytes of tensor `i` of `r` on the wire; for allgather, the whole gathered output.
int64_t ResponseTensorBytes(const proto::Response& r, int i, int size);

std::vector<proto::Response> PlanFusion(const std::vector<proto::Response>& responses,
                                        int64_t threshold, int size);
// The same over responses held elsewhere (the response cache), without copying them.
std::vector<proto::Response> PlanFusion(const std::vector<const proto::Response*>& responses,
                                        int64_t threshold, int size);
// The same, appending to `out`: elements that `out` keeps from an earlier Clear()
// are reused, so a steady state of the same fused groups allocates nothing.
void PlanFusion(const std::vector<const proto::Response*>& responses, int64_t threshold,
                int size, google::protobuf::RepeatedPtrField<proto::Response>* out);

}  // namespace hvd

#endif  // HVD_CONTROLLER_FUSION_PLANNER_H_
