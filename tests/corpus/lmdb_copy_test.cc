#include "lmdbloader/lmdb_copy.h"

#include <fcntl.h>
#include <lmdb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lmdbloader/reader.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::ReadAll;

using testing::TempDir;

// Every record of `path`, read through the Reader (which checks every page).
std::vector<std::string> Records(const std::string& path) {
  std::unique_ptr<Reader> r;
  ReaderOptions options;
  options.index_dir = "none";
  EXPECT_OK(Reader::Open(path, options, &r));
  std::vector<std::string> out(r ? r->size() : 0);
  for (uint64_t i = 0; i < out.size(); ++i) EXPECT_OK(r->Read(i, &out[i]));
  return out;
}

// 2,000 records of 3 KiB (overflow pages), then every other one deleted:
// the file keeps pages a compacting copy leaves out.
void WriteWithFreePages(const std::string& dir) {
  testing::WriteNumberedLmdb(dir, 2000, 3000);
  MDB_env* env;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_mapsize(env, 1ull << 30), 0);
  ASSERT_EQ(mdb_env_open(env, dir.c_str(), 0, 0644), 0);
  MDB_txn* txn;
  ASSERT_EQ(mdb_txn_begin(env, nullptr, 0, &txn), 0);
  MDB_dbi dbi;
  ASSERT_EQ(mdb_dbi_open(txn, nullptr, 0, &dbi), 0);
  MDB_cursor* c;
  ASSERT_EQ(mdb_cursor_open(txn, dbi, &c), 0);
  MDB_val k, v;
  int n = 0;
  for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
    if (n++ % 2 == 0) {
      ASSERT_EQ(mdb_cursor_del(c, 0), 0);
    }
  }
  mdb_cursor_close(c);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

TEST(LmdbCopyTest, PlainCopyIsThePagesInUseAndCompactCopyLeavesFreePagesOut) {
  TempDir dir;
  WriteWithFreePages(dir.Sub("src"));
  const std::vector<std::string> expected = Records(dir.Sub("src"));
  ASSERT_EQ(expected.size(), 1000u);
  for (bool compact : {false, true}) {
    SCOPED_TRACE(compact ? "compact" : "plain");
    const std::string out = dir.Sub(compact ? "compact" : "plain");
    std::filesystem::create_directory(out);
    ASSERT_OK(CopyEnvironmentToDir(dir.Sub("src"), out, compact));
    EXPECT_EQ(Records(out), expected);
    const std::string source = ReadAll(dir.Sub("src/data.mdb")), copy = ReadAll(out + "/data.mdb");
    if (compact) {
      EXPECT_LT(copy.size(), source.size() * 3 / 4) << "half the records were deleted";
    } else {
      EXPECT_EQ(copy, source.substr(0, copy.size()));
    }
    EXPECT_EQ(std::distance(std::filesystem::directory_iterator(out), {}), 1) << "no temporary file left";
  }
}

TEST(LmdbCopyTest, ExistingTargetIsRefusedAndKept) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("src"), 10, 100);
  std::filesystem::create_directory(dir.Sub("out"));
  std::ofstream(dir.Sub("out/data.mdb")) << "keep me";
  Status s = CopyEnvironmentToDir(dir.Sub("src"), dir.Sub("out"), false);
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.sys_errno(), EEXIST) << s.ToString();
  EXPECT_EQ(ReadAll(dir.Sub("out/data.mdb")), "keep me");
  EXPECT_EQ(CopyEnvironmentToDir(dir.Sub("src"), dir.Sub("missing"), false).sys_errno(), ENOENT);
}

// liblmdb's compacting copy follows every page; a damaged one is found by the
// checked reader first, and nothing is left at the target.
TEST(LmdbCopyTest, CompactingCopyOfDamagedFileIsCorruptionAndLeavesNothing) {
  TempDir dir;
  testing::WriteNumberedLmdb(dir.Sub("src"), 2000, 100);
  const std::string data = dir.Sub("src/data.mdb");
  std::string bytes = ReadAll(data);
  // Page 3 is a leaf of the main tree: point its first node outside the page.
  bytes[3 * 4096 + 16] = '\xff';
  bytes[3 * 4096 + 17] = '\xff';
  std::ofstream(data, std::ios::binary | std::ios::trunc) << bytes;
  std::filesystem::create_directory(dir.Sub("out"));
  Status s = CopyEnvironmentToDir(dir.Sub("src"), dir.Sub("out"), true);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  EXPECT_NE(s.message().find("data.mdb"), std::string::npos) << s.ToString();
  EXPECT_TRUE(std::filesystem::is_empty(dir.Sub("out")));
}

}  // namespace
}  // namespace lmdbloader
