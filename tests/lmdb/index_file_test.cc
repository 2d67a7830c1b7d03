#include "lmdb/index_file.h"

#include <fstream>

#include "corpus/corpus_format.h"
#include "lmdb/record_index_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

RecordIndex Sample(bool sequential) {
  RecordIndex index;
  for (uint64_t i = 0; i < 100; ++i)
    EXPECT_OK(index.Add(sequential ? RecordKey(i) : "k" + std::to_string(1000 + i), i * 4096, 100));
  EXPECT_OK(index.AddMeta("__lmdbloader__/manifest", 999, 12));
  index.identity = FileIdentity{1, 2, 1 << 20, 3, 4, 4096};
  return index;
}

TEST(IndexFileTest, RoundTripsBothKeyForms) {
  testing::TempDir dir;
  for (bool sequential : {true, false}) {
    RecordIndex index = Sample(sequential);
    std::string path = dir.Sub(sequential ? "seq.idx" : "keys.idx");
    ASSERT_OK(SaveIndex(path, index));
    RecordIndex loaded;
    ASSERT_OK(LoadIndex(path, index.identity, "", &loaded));
    ASSERT_EQ(loaded.size(), 100u);
    EXPECT_EQ(loaded.sequential_keys(), sequential);
    EXPECT_EQ(loaded.offset(42), 42u * 4096);
    EXPECT_EQ(testing::KeyAt(loaded, 42), testing::KeyAt(index, 42));
    EXPECT_EQ(loaded.meta().at("__lmdbloader__/manifest").offset, 999u);
  }
}

TEST(IndexFileTest, StaleIdentityIsNotFound) {
  testing::TempDir dir;
  RecordIndex index = Sample(true);
  ASSERT_OK(SaveIndex(dir.Sub("a.idx"), index));
  FileIdentity other = index.identity;
  other.txnid += 1;
  RecordIndex loaded;
  Status s = LoadIndex(dir.Sub("a.idx"), other, "", &loaded);
  EXPECT_TRUE(s.IsNotFound()) << s.ToString();
  EXPECT_NE(s.message().find("stale"), std::string::npos);
}

TEST(IndexFileTest, TruncatedFileIsCorruptionNamingIt) {
  testing::TempDir dir;
  RecordIndex index = Sample(false);
  std::string path = dir.Sub("t.idx");
  ASSERT_OK(SaveIndex(path, index));
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), bytes.size() / 2);
  }
  RecordIndex loaded;
  Status s = LoadIndex(path, index.identity, "", &loaded);
  EXPECT_EQ(s.code(), Status::Code::kCorruption);
  EXPECT_NE(s.message().find(path), std::string::npos);
}

}  // namespace
}  // namespace lmdbloader
