// What a read checks of the file it read (src/reader/reader_checks.cc):
// files written in place since they were indexed, and a set's file indexed
// again. Transient storage errors are tried over the FUSE emulation
// (tests/python/test_transient_errors.py), which C++ tests have not here.
#include <fcntl.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <vector>

#include "lmdbloader/reader.h"
#include "reader_test_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::OpenOrDie;
using testing::TempDir;

// cp B A writes B's bytes into A's inode: the Reader's index of A must never
// be used for them, held (an open Reader) or saved (a new one, with A's old
// mtime put back as rsync -t --inplace does).
TEST(ReaderChecksTest, AFileWrittenInPlaceIsNeverReadThroughItsOldIndex) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("a"), 50, 100);
  testing::WriteNumberedLmdb(dir.Sub("b"), 50, 150);
  const std::string a = dir.Sub("a") + "/data.mdb";
  struct stat before;
  ASSERT_EQ(::stat(a.c_str(), &before), 0);
  for (AccessMode mode : {AccessMode::kPread, AccessMode::kMmap}) {
    ReaderOptions o;
    o.mode = mode;
    auto r = OpenOrDie(dir.Sub("a"), o);
    std::string value;
    ASSERT_OK(r->Read(7, &value));
    testing::WriteAll(a, testing::ReadAll(dir.Sub("b") + "/data.mdb"));
    Status s = r->Read(7, &value);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("changed since it was indexed"), std::string::npos) << s.message();
    testing::WriteAll(a, testing::ReadAll(dir.Sub("b") + "/data.mdb"));  // for the next mode's open
  }
  struct stat after;
  ASSERT_EQ(::stat(a.c_str(), &after), 0);
  ASSERT_EQ(after.st_ino, before.st_ino);
  // A saved index of A, then B written over it with A's mtime put back.
  testing::WriteNumberedLmdb(dir.Sub("c"), 50, 100);
  const std::string c = dir.Sub("c") + "/data.mdb";
  { auto r = OpenOrDie(dir.Sub("c")); }
  struct stat old;
  ASSERT_EQ(::stat(c.c_str(), &old), 0);
  testing::WriteAll(c, testing::ReadAll(dir.Sub("b") + "/data.mdb"));
  const struct timespec times[2] = {old.st_atim, old.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, c.c_str(), times, 0), 0);
  auto r = OpenOrDie(dir.Sub("c"));
  EXPECT_EQ(r->stats().index_source.rfind("built", 0), 0u) << r->stats().index_source;
  std::string value;
  ASSERT_OK(r->Read(7, &value));
  EXPECT_EQ(value, testing::RecordBytes(7, 150));
}

// A file of a set written in place with the same record count is indexed
// again at its next read, and read as it is now.
TEST(ReaderChecksTest, AFileOfASetWrittenInPlaceIsIndexedAgain) {
  TempDir dir;
  ASSERT_EQ(::mkdir(dir.Sub("set").c_str(), 0755), 0);
  std::vector<std::string> files;
  for (int f = 0; f < 3; ++f) {
    files.push_back(dir.Sub("set/f" + std::to_string(f) + ".lmdb"));
    testing::WriteLmdb(files.back(), {{"a", "file" + std::to_string(f) + "-a"}, {"b", "file" + std::to_string(f) + "-b"}},
                       "", /*nosubdir=*/true);
  }
  ReaderOptions o;
  o.index_dir = "none";
  auto r = OpenOrDie(dir.Sub("set"), o);
  std::string value;
  ASSERT_OK(r->Read(3, &value));
  EXPECT_EQ(value, "file1-b");
  testing::WriteLmdb(dir.Sub("other.lmdb"), {{"a", "a longer value, elsewhere"}, {"b", "so is this one"}}, "", true);
  testing::WriteAll(files[1], testing::ReadAll(dir.Sub("other.lmdb")));
  ASSERT_OK(r->Read(3, &value));
  EXPECT_EQ(value, "so is this one");
  ASSERT_OK(r->Read(2, &value));
  EXPECT_EQ(value, "a longer value, elsewhere");
}

}  // namespace
}  // namespace lmdbloader
