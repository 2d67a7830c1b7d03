// ParseShardList: a shard list is checked, never trusted.
#include "corpus/shard_list.h"

#include "test_util.h"

namespace lmdbloader {
namespace {

Status Parse(const std::string& text, std::vector<ShardEntry>* parts) {
  return ParseShardList(text, "/set", "/set/shards.json", parts);
}

TEST(ShardListTest, ListedPartsLieInsideTheFolderWithTheirCounts) {
  std::vector<ShardEntry> parts;
  ASSERT_OK(Parse(R"({"shards": [{"path": "part-00000-of-00002", "records": 3},
                                  {"path": "part-00001-of-00002", "records": 4}], "records": 7})",
                  &parts));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].path, "/set/part-00001-of-00002");
  EXPECT_EQ(parts[1].records, 4);
}

TEST(ShardListTest, DamagedListsAreCorruptionNamingTheListAndTheReason) {
  struct Case {
    const char *text, *reason;
  };
  for (const Case& c : {Case{"{not json", "not a valid shard list"}, Case{R"({"shards": []})", "no shards listed"},
                        Case{R"({"shards": [{"path": "../x"}]})", "lies outside /set"},
                        Case{R"({"shards": [{"path": "/etc"}]})", "lies outside /set"},
                        Case{R"({"shards": [{"path": "a"}, {"path": "a"}]})", "listed twice"},
                        Case{R"({"shards": [{"path": "a", "records": -1}]})", "not a count"},
                        Case{R"({"shards": [{"path": "a", "records": 2}, {"path": "b", "records": 3}], "records": 6})",
                             "it says 6 records in all, its parts add up to 5"},
                        Case{R"({"shards": [{"path": "a"}], "records": "x"})", "'records' is not a count"}}) {
    std::vector<ShardEntry> parts;
    Status s = Parse(c.text, &parts);
    EXPECT_EQ(s.code(), Status::Code::kCorruption) << c.text;
    EXPECT_NE(s.message().find("/set/shards.json"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.reason), std::string::npos) << s.message();
  }
}

}  // namespace
}  // namespace lmdbloader
