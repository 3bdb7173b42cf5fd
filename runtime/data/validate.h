// ValidateEntry: whether one rank's entry can be enqueued at all, before any
// negotiation: a pure function of the entry (plus, for a device tensor, a look at
// its memory), shared by the runtime's enqueue and any binding that checks early.
// What ranks must agree on (dtype, shape, op, ...) is the controller's check
// (controller/negotiation.h); this is only what is wrong on this rank alone.
#ifndef HVD_RUNTIME_DATA_VALIDATE_H_
#define HVD_RUNTIME_DATA_VALIDATE_H_

#include "runtime/common/status.h"
#include "runtime/data/tensor_queue.h"

namespace hvd {

// OK, or kInvalidArgument (kInvalidUsage for a device tensor this build or machine
// cannot take) naming the tensor and what is wrong: an empty or over-long name, an
// unknown dtype or op, a negative or overflowing shape or split, a missing buffer,
// a non-finite scale factor, an op the collective does not support.
Status ValidateEntry(const TensorEntry& e);

// Sets an all-reduce's or broadcast's shape from the element count its caller gave
// and, optionally, a shape of `ndim` dimensions at `dims` that must hold it (ndim 0:
// [count]). kInvalidArgument naming the tensor (e->name, set before) for a negative
// count or a shape whose product is not the count.
Status SetCountShape(int64_t count, const int64_t* dims, int ndim, TensorEntry* e);

}  // namespace hvd

#endif  // HVD_RUNTIME_DATA_VALIDATE_H_
