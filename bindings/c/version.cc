// hvd_version: the library's version, from the header it was built with.
#include "bindings/c/hvd.h"

extern "C" hvd_status_t hvd_version(int* major, int* minor, int* patch, int* abi) {
  if (major != nullptr) *major = HVD_VERSION_MAJOR;
  if (minor != nullptr) *minor = HVD_VERSION_MINOR;
  if (patch != nullptr) *patch = HVD_VERSION_PATCH;
  if (abi != nullptr) *abi = HVD_ABI_VERSION;
  return HVD_SUCCESS;
}
