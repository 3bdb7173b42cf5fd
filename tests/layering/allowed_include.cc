// A fixture for the layer check (cmake/check_layer.cmake), never compiled: a file of
// the bottom layer that includes only its own layer and system headers.
#include <vector>

#include "runtime/common/status.h"
#include "runtime/common/types.h"
