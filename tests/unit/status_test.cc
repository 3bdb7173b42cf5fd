// Status: the codes' stable names, ToString, Prepend, and ErrnoText (the one
// errno-to-text helper every layer uses).
#include "runtime/common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace hvd {
namespace {

TEST(Status, NamesAndTextCarryTheCodeAndTheMessage) {
  EXPECT_STREQ(StatusCodeName(StatusCode::kOk), "HVD_SUCCESS");
  EXPECT_STREQ(StatusCodeName(StatusCode::kMismatch), "HVD_MISMATCH");
  const Status s = Status::RemoteError("rank 1 went away");
  EXPECT_EQ(s.code(), StatusCode::kRemoteError);
  EXPECT_EQ(s.ToString(), "HVD_REMOTE_ERROR: rank 1 went away");
  EXPECT_TRUE(Status::OK().ok());
}

TEST(Status, ErrnoTextNamesTheError) {
  EXPECT_EQ(ErrnoText(ECONNREFUSED), "Connection refused");
  EXPECT_EQ(ErrnoText(ENOENT), "No such file or directory");
  EXPECT_FALSE(ErrnoText(0).empty());
}

}  // namespace
}  // namespace hvd
