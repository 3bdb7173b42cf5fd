// The TensorFlow ops of dprun (their kernels: collective_kernels.cc,
// variable_kernels.cc, topology_kernels.cc; their Python wrappers and gradients:
// bindings/python/hvd/tensorflow/mpi_ops.py).
//
// Every collective is keyed by its collective name (kernel_support.h,
// CollectiveName): ranks must run ops of the same name with tensors that agree.
// Attributes common to the collectives:
//   process_set_id     the C API's process set (0: every rank);
//   ignore_name_scope  name the collective by the node's last name component only;
//   reduce_op          hvd_reduce_op_t (Sum 0, Average 1, Min 2, Max 3, Product 4,
//                      Adasum 5); prescale_factor, postscale_factor as in hvd.h;
//   root_rank          the root's rank within the process set.
// The data collectives are not stateful, as Horovod's: a graph runs independent
// ones concurrently (stateful ops are chained in program order by tf.function),
// which lets the runtime fuse them. Those without data outputs (join, barrier,
// the in-place broadcasts) and the topology queries are stateful, so they are
// neither pruned nor folded at graph build time.
#include <tensorflow/core/framework/common_shape_fns.h>
#include <tensorflow/core/framework/op.h>
#include <tensorflow/core/framework/shape_inference.h>

namespace hvd {
namespace tensorflow_ops {
namespace {

namespace tf = ::tensorflow;
using tf::shape_inference::InferenceContext;
using tf::shape_inference::ShapeHandle;

#define HVD_REDUCE_TYPES "{uint8, int8, int16, int32, int64, half, bfloat16, float, double}"
#define HVD_MOVE_TYPES \
  "{uint8, int8, uint16, int16, int32, int64, half, bfloat16, float, double, bool}"

// The attributes of a reduction, and those of every data collective (spliced into
// the REGISTER_OP chains below, which clang-format leaves as written).
// clang-format off
#define HVD_REDUCTION_ATTRS \
    .Attr("reduce_op: int") \
    .Attr("prescale_factor: float = 1.0") \
    .Attr("postscale_factor: float = 1.0")
#define HVD_COLLECTIVE_ATTRS \
    .Attr("ignore_name_scope: bool = false") \
    .Attr("process_set_id: int = 0")
// clang-format on

// Each output i has input i's shape.
tf::Status SameShapes(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return tf::Status();
}

// Each output i has input i's shape with an unknown first dimension (allgather,
// reducescatter: the runtime decides it); rank >= 1.
tf::Status FirstDimUnknown(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) {
    ShapeHandle in = c->input(i);
    if (!c->RankKnown(in)) {
      c->set_output(i, c->UnknownShape());
      continue;
    }
    ShapeHandle at_least_one;
    TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &at_least_one));
    ShapeHandle out;
    TF_RETURN_IF_ERROR(c->ReplaceDim(at_least_one, 0, c->UnknownDim(), &out));
    c->set_output(i, out);
  }
  return tf::Status();
}

}  // namespace

// clang-format off
REGISTER_OP("HvdAllreduce")
    .Attr("T: " HVD_REDUCE_TYPES)
    HVD_REDUCTION_ATTRS
    HVD_COLLECTIVE_ATTRS
    .Input("tensor: T")
    .Output("reduced: T")
    .SetShapeFn(SameShapes)
    .Doc("Reduces `tensor` across the ranks of the process set (hvd_allreduce_ex).");

REGISTER_OP("HvdGroupedAllreduce")
    .Attr("T: list(" HVD_REDUCE_TYPES ") >= 1")
    HVD_REDUCTION_ATTRS
    HVD_COLLECTIVE_ATTRS
    .Input("tensors: T")
    .Output("reduced: T")
    .SetShapeFn(SameShapes)
    .Doc("Reduces the tensors as one group, executed together (hvd_grouped_allreduce_ex).");

REGISTER_OP("HvdAllgather")
    .Attr("T: " HVD_MOVE_TYPES)
    HVD_COLLECTIVE_ATTRS
    .Input("tensor: T")
    .Output("gathered: T")
    .SetShapeFn(FirstDimUnknown)
    .Doc("Concatenates every rank's tensor along the first dimension, which may differ.");

REGISTER_OP("HvdGroupedAllgather")
    .Attr("T: list(" HVD_MOVE_TYPES ") >= 1")
    HVD_COLLECTIVE_ATTRS
    .Input("tensors: T")
    .Output("gathered: T")
    .SetShapeFn(FirstDimUnknown)
    .Doc("Allgathers the tensors as one group.");

REGISTER_OP("HvdBroadcast")
    .Attr("T: " HVD_MOVE_TYPES)
    .Attr("root_rank: int")
    HVD_COLLECTIVE_ATTRS
    .Input("tensor: T")
    .Output("broadcast: T")
    .SetShapeFn(SameShapes)
    .Doc("The root rank's tensor on every rank of the process set.");

REGISTER_OP("HvdBroadcastInplace")
    .Attr("T: " HVD_MOVE_TYPES)
    .Attr("num_variables: int >= 1")
    .Attr("variable_names: list(string)")
    .Attr("root_rank: int")
    .Attr("process_set_id: int = 0")
    .Input("refs: Ref(num_variables * T)")
    .Output("outputs: Ref(num_variables * T)")
    .SetIsStateful()
    .SetShapeFn(SameShapes)
    .Doc("Broadcasts reference variables in place (TF1 RefVariable).");

REGISTER_OP("HvdBroadcastInplaceResource")
    .Attr("num_variables: int >= 1")
    .Attr("variable_names: list(string)")
    .Attr("root_rank: int")
    .Attr("process_set_id: int = 0")
    .Input("resources: num_variables * resource")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::NoOutputs)
    .Doc("Broadcasts resource variables in place, in their own buffers.");

REGISTER_OP("HvdAlltoall")
    .Attr("T: " HVD_MOVE_TYPES)
    .Attr("Tsplits: {int32, int64} = DT_INT32")
    HVD_COLLECTIVE_ATTRS
    .Input("tensor: T")
    .Input("splits: Tsplits")
    .Output("output: T")
    .Output("received_splits: int32")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle in = c->input(0);
      if (c->RankKnown(in)) {
        ShapeHandle out;
        TF_RETURN_IF_ERROR(c->WithRankAtLeast(in, 1, &in));
        TF_RETURN_IF_ERROR(c->ReplaceDim(in, 0, c->UnknownDim(), &out));
        c->set_output(0, out);
      } else {
        c->set_output(0, c->UnknownShape());
      }
      c->set_output(1, c->Vector(c->UnknownDim()));
      return tf::Status();
    })
    .Doc("Sends splits[r] rows of the first dimension to rank r (empty splits: an equal "
         "share); returns the rows received, in rank order, and how many came from each.");

REGISTER_OP("HvdReducescatter")
    .Attr("T: " HVD_REDUCE_TYPES)
    HVD_REDUCTION_ATTRS
    HVD_COLLECTIVE_ATTRS
    .Input("tensor: T")
    .Output("scattered: T")
    .SetShapeFn(FirstDimUnknown)
    .Doc("Reduces across ranks and leaves each its block of the first dimension.");

REGISTER_OP("HvdGroupedReducescatter")
    .Attr("T: list(" HVD_REDUCE_TYPES ") >= 1")
    HVD_REDUCTION_ATTRS
    HVD_COLLECTIVE_ATTRS
    .Input("tensors: T")
    .Output("scattered: T")
    .SetShapeFn(FirstDimUnknown)
    .Doc("Reducescatters the tensors as one group.");

REGISTER_OP("HvdJoin")
    .Attr("process_set_id: int = 0")
    .Output("last_rank: int32")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::ScalarShape)
    .Doc("This rank has no more data: takes part in the others' allreduces with zeros "
         "until every rank joined; returns the global rank of the last to join.");

REGISTER_OP("HvdBarrier")
    .Attr("process_set_id: int = 0")
    .SetIsStateful()
    .SetShapeFn(tf::shape_inference::NoOutputs)
    .Doc("Returns once every rank of the process set has entered the barrier.");

// clang-format on

// The topology at execution time (Horovod's size_op, rank_op, ...).
#define HVD_TOPOLOGY_OP(NAME, OUT)     \
  REGISTER_OP(NAME)                    \
      .Attr("process_set_id: int = 0") \
      .Output(OUT ": int32")           \
      .SetIsStateful()                 \
      .SetShapeFn(tf::shape_inference::ScalarShape)

HVD_TOPOLOGY_OP("HvdSize", "size");
HVD_TOPOLOGY_OP("HvdLocalSize", "local_size");
HVD_TOPOLOGY_OP("HvdRank", "rank");
HVD_TOPOLOGY_OP("HvdLocalRank", "local_rank");
HVD_TOPOLOGY_OP("HvdProcessSetIncluded", "included");

}  // namespace tensorflow_ops
}  // namespace hvd
