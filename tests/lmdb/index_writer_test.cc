#include "lmdb/index_writer.h"

#include <unistd.h>

#include <filesystem>

#include "lmdb/index_file.h"
#include "lmdb/record_index_util.h"
#include "lmdb/record_key.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

const FileIdentity kIdentity{1, 2, uint64_t{1} << 40, 3, 4, 4096, 5};

TEST(IndexWriterTest, AKeyAfterNumberedOnesRewritesTheEntriesWide) {
  testing::TempDir dir;
  const std::string path = dir.Sub("w.idx");
  std::unique_ptr<IndexWriter> w;
  ASSERT_OK(IndexWriter::Create(path, &w));
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_OK(w->Add(RecordKey(i), i, 1));
  ASSERT_OK(w->Add("zzz", 5000, 2));
  ASSERT_OK(w->Finish(kIdentity, "", 0, true));
  RecordIndex resident;
  ASSERT_OK(LoadIndex(path, kIdentity, "", &resident));
  EXPECT_FALSE(resident.sequential_keys());
  EXPECT_EQ(testing::KeyAt(resident, 999), RecordKey(999));
  EXPECT_EQ(testing::KeyAt(resident, 1000), "zzz");
  EXPECT_EQ(testing::LocationOf(resident, 1000).offset, 5000u);
  EXPECT_EQ(testing::LocationOf(resident, 500).offset, 500u);
}

TEST(IndexWriterTest, AnUnfinishedWriterLeavesNoFile) {
  testing::TempDir dir;
  const std::string path = dir.Sub("u.idx");
  {
    std::unique_ptr<IndexWriter> w;
    ASSERT_OK(IndexWriter::Create(path, &w));
    ASSERT_OK(w->Add("a", 0, 1));
  }
  EXPECT_EQ(::access(path.c_str(), F_OK), -1);
  int left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left += !entry.path().empty();
  EXPECT_EQ(left, 0) << "temporary files left behind";
}

TEST(IndexWriterTest, ALateOtherKeyRewritesManyEntriesAChunkAtATime) {
  // Big-endian record numbers, then a metadata key that sorts after them:
  // more narrow entries than one chunk of the rewrite (65,536).
  testing::TempDir dir;
  const std::string path = dir.Sub("late.idx");
  const uint64_t n = 70001;
  std::unique_ptr<IndexWriter> w;
  ASSERT_OK(IndexWriter::Create(path, &w));
  for (uint64_t i = 0; i < n; ++i) ASSERT_OK(w->Add(RecordKey(i), i * 3, static_cast<uint32_t>(i % 7)));
  ASSERT_OK(w->Add("__len__", 99, 5));
  ASSERT_OK(w->Finish(kIdentity, "", 0, true));
  RecordIndex loaded;
  ASSERT_OK(LoadIndex(path, kIdentity, "", &loaded));
  ASSERT_EQ(loaded.size(), n + 1);
  for (uint64_t i : {uint64_t{0}, uint64_t{255}, uint64_t{256}, uint64_t{65535}, uint64_t{65536}, n - 1}) {
    EXPECT_EQ(testing::KeyAt(loaded, i), RecordKey(i)) << i;
    EXPECT_EQ(testing::LocationOf(loaded, i).offset, i * 3) << i;
    EXPECT_EQ(testing::LocationOf(loaded, i).size, i % 7) << i;
  }
  EXPECT_EQ(testing::KeyAt(loaded, n), "__len__");
  int left = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) left += entry.path() != path;
  EXPECT_EQ(left, 0) << "temporary files left behind";
}

TEST(IndexWriterTest, WritesWhatTheResidentIndexHolds) {
  testing::TempDir dir;
  RecordIndex index;
  for (uint64_t i = 0; i < 3000; ++i) ASSERT_OK(index.Add("k" + std::to_string(100000 + i), i * 10, 7));
  ASSERT_OK(index.AddMeta("__m", 1, 2));
  index.identity = kIdentity;
  index.db_name = "named";
  index.set_db_flags(4);
  ASSERT_OK(SaveIndex(dir.Sub("s.idx"), index));
  RecordIndex loaded;
  ASSERT_OK(LoadIndex(dir.Sub("s.idx"), kIdentity, "named", &loaded));
  EXPECT_EQ(loaded.size(), 3000u);
  EXPECT_EQ(loaded.db_flags(), 4u);
  EXPECT_EQ(testing::KeyAt(loaded, 2999), "k102999");
  EXPECT_EQ(testing::LocationOf(loaded, 2999).offset, 29990u);
  EXPECT_EQ(loaded.meta().at("__m").size, 2u);
}

TEST(IndexWriterTest, AnUnwritableDirectoryIsAnErrorNamingIt) {
  std::unique_ptr<IndexWriter> w;
  Status s = IndexWriter::Create("/proc/self/no/such.idx", &w);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/proc/self/no"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
