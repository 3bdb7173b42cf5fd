// A fixture for the layer check (cmake/check_layer.cmake), never compiled: a file of
// the bottom layer that includes the runtime above it.
#include "controller/loop/runtime.h"
#include "runtime/common/status.h"
