#include "reader/name_keys.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace lmdbloader {
namespace {

// The names blob and names.offsets value a corpus writer stores.
void Encode(const std::vector<std::string>& names, std::string* blob, std::string* offsets) {
  blob->clear();
  offsets->assign(8, '\0');
  for (const std::string& n : names) {
    *blob += n;
    const uint64_t end = blob->size();
    offsets->append(reinterpret_cast<const char*>(&end), 8);
  }
}

Status Build(const std::vector<std::string>& names, NameKeys* keys) {
  std::string blob, offsets;
  Encode(names, &blob, &offsets);
  return NameKeys::Build(blob, offsets, names.size(), "c/data.mdb", keys);
}

TEST(NameKeysTest, FindsBinaryNamesInByteOrder) {
  const std::vector<std::string> names = {std::string("\x00", 1), std::string("\x00\x00", 2), "\x01\xff", "\x7f",
                                          "\x80", std::string("\xff\x00\xff", 3)};
  NameKeys keys;
  ASSERT_TRUE(Build(names, &keys).ok());
  EXPECT_TRUE(keys.sorted());
  for (uint64_t i = 0; i < names.size(); ++i) {
    uint64_t at = 99;
    ASSERT_TRUE(keys.Find(names[i], &at)) << i;
    EXPECT_EQ(at, i);
    EXPECT_EQ(keys.Name(i), names[i]);
  }
  uint64_t at = 0;
  EXPECT_FALSE(keys.Find("", &at));
  EXPECT_FALSE(keys.Find(std::string("\x7f\x00", 2), &at));
  EXPECT_EQ(keys.LowerBound(std::string("\x7f\x00", 2)), 4u);  // "\x80"
  EXPECT_EQ(keys.LowerBound("\xff\xff"), names.size());
}

TEST(NameKeysTest, NamesOutOfOrderAreFoundThroughAPermutation) {
  const std::vector<std::string> names = {"d", "a", "c", "b"};
  NameKeys keys;
  ASSERT_TRUE(Build(names, &keys).ok());
  EXPECT_FALSE(keys.sorted());
  for (uint64_t i = 0; i < names.size(); ++i) {
    uint64_t at = 99;
    ASSERT_TRUE(keys.Find(names[i], &at));
    EXPECT_EQ(at, i);
  }
  EXPECT_EQ(keys.LowerBound("bb"), 2u);  // the position of "c", the smallest name >= "bb"
  EXPECT_EQ(keys.LowerBound("e"), names.size());
}

TEST(NameKeysTest, DamagedOffsetsAndRepeatedNamesAreCorruptionNamingTheFile) {
  NameKeys keys;
  Status repeated = Build({"b", "a", "b"}, &keys);
  EXPECT_EQ(repeated.code(), Status::Code::kCorruption);
  EXPECT_NE(repeated.message().find("c/data.mdb: records 0 and 2 have the same name"), std::string::npos)
      << repeated.message();
  std::string blob, offsets;
  Encode({"ab", "cd"}, &blob, &offsets);
  EXPECT_EQ(NameKeys::Build(blob, offsets, 3, "c/data.mdb", &keys).code(), Status::Code::kCorruption);
  std::string past_end = offsets;
  const uint64_t huge = 1000;
  std::memcpy(&past_end[16], &huge, 8);
  EXPECT_EQ(NameKeys::Build(blob, past_end, 2, "c/data.mdb", &keys).code(), Status::Code::kCorruption);
  std::string backwards = offsets;
  const uint64_t one = 1;
  std::memcpy(&backwards[16], &one, 8);
  EXPECT_EQ(NameKeys::Build(blob, backwards, 2, "c/data.mdb", &keys).code(), Status::Code::kCorruption);
}

}  // namespace
}  // namespace lmdbloader
