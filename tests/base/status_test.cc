#include "lmdbloader/status.h"

#include <gtest/gtest.h>
#include <lmdb.h>

#include <cerrno>

namespace lmdbloader {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrnoNamesCallPathAndReason) {
  Status s = Status::FromErrno(ENOENT, "open", "/x/data.mdb");
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.sys_errno(), ENOENT);
  EXPECT_EQ(s.message(), "open /x/data.mdb: No such file or directory");
}

TEST(StatusTest, LmdbCodesMapToKinds) {
  EXPECT_TRUE(Status::FromLmdb(MDB_NOTFOUND, "mdb_get", "p").IsNotFound());
  EXPECT_EQ(Status::FromLmdb(MDB_INVALID, "mdb_env_open", "p").code(), Status::Code::kCorruption);
  EXPECT_EQ(Status::FromLmdb(MDB_CORRUPTED, "mdb_get", "p").code(), Status::Code::kCorruption);
  EXPECT_EQ(Status::FromLmdb(EACCES, "mdb_env_open", "p").code(), Status::Code::kIOError);
  EXPECT_EQ(Status::FromLmdb(MDB_READERS_FULL, "mdb_txn_begin", "p").code(), Status::Code::kLmdbError);
  EXPECT_TRUE(Status::FromLmdb(MDB_SUCCESS, "x", "p").ok());
}

TEST(StatusTest, NotAnLmdbFileSaysSo) {
  Status s = Status::FromLmdb(MDB_INVALID, "mdb_env_open", "/d/data.mdb");
  EXPECT_NE(s.message().find("/d/data.mdb"), std::string::npos);
  EXPECT_NE(s.message().find("not an LMDB file"), std::string::npos);
}

TEST(StatusTest, DecodeErrorsCarryAPrefixAndTheirBatchItem) {
  Status s = Status::DecodeError("JPEG: truncated").WithPrefix("image 3 of 8: ").WithReason(
      Status::Reason::kBatchItem, 3);
  EXPECT_EQ(s.code(), Status::Code::kDecodeError);
  EXPECT_EQ(s.ToString(), "DecodeError: image 3 of 8: JPEG: truncated");
  EXPECT_EQ(s.reason(), Status::Reason::kBatchItem);
  EXPECT_EQ(s.reason_detail(), 3u);
}

}  // namespace
}  // namespace lmdbloader
