// A shard set's part names, and WriteShardList: the list names every part in
// order with its record count, and a set that is not whole is refused with
// the folder and the part named, leaving no list behind.
#include "lmdbloader/shard_set.h"

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lmdbloader/reader.h"
#include "lmdbloader/writer.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

void WriteCorpus(const std::string& path, int count) {
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(path, WriterOptions(), &w));
  for (int i = 0; i < count; ++i) ASSERT_OK(w->Add("r" + std::to_string(i), testing::RecordBytes(i, 100)));
  ASSERT_OK(w->Finish("{}"));
}

TEST(ShardSetTest, PartNamesHaveFiveDigitsEach) {
  EXPECT_EQ(ShardName(2, 3), "part-00002-of-00003");
  EXPECT_EQ(ShardName(0, kMaxShards), "part-00000-of-99999");
}

TEST(ShardSetTest, TheListNamesEveryPartInOrderWithItsRecords) {
  TempDir dir;
  fs::create_directories(dir.Sub("set"));
  const int sizes[3] = {4, 1, 6};
  for (uint32_t p = 0; p < 3; ++p) WriteCorpus(dir.Sub("set/" + ShardName(p, 3)), sizes[p]);
  uint64_t records = 0;
  ASSERT_OK(WriteShardList(dir.Sub("set"), &records));
  EXPECT_EQ(records, 11u);
  const nlohmann::json list = nlohmann::json::parse(testing::ReadAll(dir.Sub("set/shards.json")));
  ASSERT_EQ(list["shards"].size(), 3u) << list.dump();
  for (uint32_t p = 0; p < 3; ++p) {
    EXPECT_EQ(list["shards"][p]["path"], ShardName(p, 3));
    EXPECT_EQ(list["shards"][p]["records"], sizes[p]);
  }
  EXPECT_EQ(list["records"], 11);
  // And a Reader reads the set as one dataset.
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("set"), ReaderOptions(), &r));
  EXPECT_EQ(r->size(), 11u);
}

TEST(ShardSetTest, ASetThatIsNotWholeIsRefusedNamingWhatIsWrong) {
  TempDir dir;
  fs::create_directories(dir.Sub("set"));
  uint64_t records = 0;
  Status s = WriteShardList(dir.Sub("set"), &records);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("no part-NNNNN-of-NNNNN shards"), std::string::npos) << s.message();
  WriteCorpus(dir.Sub("set/" + ShardName(0, 3)), 2);
  WriteCorpus(dir.Sub("set/" + ShardName(2, 3)), 2);
  s = WriteShardList(dir.Sub("set"), &records);
  EXPECT_NE(s.message().find("shard " + ShardName(1, 3) + " is missing"), std::string::npos) << s.message();
  WriteCorpus(dir.Sub("set/" + ShardName(1, 2)), 2);
  s = WriteShardList(dir.Sub("set"), &records);
  EXPECT_NE(s.message().find("shards of different sets"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir.Sub("set/shards.json")));
  s = WriteShardList(dir.Sub("nowhere"), &records);
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
}

}  // namespace
}  // namespace lmdbloader
