// The converter's options by name (ConvertOptionList, SetConvertOption).
#include <string>

#include <gtest/gtest.h>

#include "lmdbloader/convert.h"

namespace lmdbloader {
namespace {

// What an option reads back is what SetConvertOption takes, so a front that
// shows defaults from the table shows values it could pass.
TEST(ConvertOptionsTest, EveryDefaultReadsBackAndSetsAgain) {
  const ConvertOptions defaults;
  for (const OptionInfo& info : ConvertOptionList()) {
    ConvertOptions o;
    const std::string text = ConvertOptionValue(defaults, info.name);
    ASSERT_TRUE(SetConvertOption(info.name, text, &o).ok()) << info.name << " = '" << text << "'";
    EXPECT_EQ(ConvertOptionValue(o, info.name), text) << info.name;
  }
  EXPECT_EQ(ConvertOptionList().size(), 13u);
}

TEST(ConvertOptionsTest, ChoicesAreTheEnumsNames) {
  ConvertOptions o;
  for (const char* kind : {"image_folder", "video_folder", "jsonl", "lmdb"}) {
    ASSERT_TRUE(SetConvertOption("kind", kind, &o).ok()) << kind;
    EXPECT_STREQ(SourceKindName(o.source_kind), kind);
  }
  for (const char* order : {"given", "sorted", "shuffle"}) {
    ASSERT_TRUE(SetConvertOption("order", order, &o).ok()) << order;
    EXPECT_STREQ(RecordOrderName(o.order), order);
  }
  for (const char* layout : {"as_is", "caffe", "msgpack", "raw"}) {
    ASSERT_TRUE(SetConvertOption("record", layout, &o).ok()) << layout;
    EXPECT_STREQ(RecordLayoutName(o.record), layout);
  }
  Status s = SetConvertOption("order", "sideways", &o);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "order must be one of given, sorted, shuffle; got 'sideways'");
}

TEST(ConvertOptionsTest, IntegersAreCheckedAgainstTheirRangeHoweverLarge) {
  ConvertOptions o;
  EXPECT_TRUE(SetConvertOption("seed", "18446744073709551615", &o).ok());
  EXPECT_EQ(o.seed, UINT64_MAX);
  EXPECT_FALSE(SetConvertOption("seed", "18446744073709551616", &o).ok());
  EXPECT_FALSE(SetConvertOption("seed", "-1", &o).ok());
  EXPECT_TRUE(SetConvertOption("shard_index", "-1", &o).ok());
  EXPECT_EQ(o.shard_index, -1);
  EXPECT_FALSE(SetConvertOption("shard_index", "-2", &o).ok());
  EXPECT_FALSE(SetConvertOption("shard_index", "99999", &o).ok());
  Status s = SetConvertOption("num_shards", "100000", &o);
  EXPECT_EQ(s.message(), "num_shards must be between 1 and 99999, got 100000");
  EXPECT_FALSE(SetConvertOption("frame_step", "0", &o).ok());
  EXPECT_FALSE(SetConvertOption("frame_step", "2147483648", &o).ok());
  s = SetConvertOption("frame_step", "2x", &o);
  EXPECT_EQ(s.message(), "frame_step must be an integer, got '2x'");
}

TEST(ConvertOptionsTest, AnUnknownNameIsRefusedNamingEveryKnownOne) {
  ConvertOptions o;
  Status s = SetConvertOption("shards", "2", &o);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  for (const OptionInfo& info : ConvertOptionList())
    EXPECT_NE(s.message().find(info.name), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
