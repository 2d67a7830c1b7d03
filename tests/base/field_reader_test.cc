#include "base/field_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace lmdbloader {
namespace {

std::string Bytes(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), sizeof(v)); }

TEST(FieldReaderTest, ReadsFieldsInOrderAndRefusesPastTheEnd) {
  const std::string bytes = Bytes(7) + Bytes(3) + "abc" + "xy";
  FieldReader f(bytes);
  uint64_t v = 0;
  std::string_view s;
  ASSERT_TRUE(f.Get(&v));
  EXPECT_EQ(v, 7u);
  ASSERT_TRUE(f.GetString(&s));
  EXPECT_EQ(s, "abc");
  EXPECT_EQ(f.left(), 2u);
  EXPECT_FALSE(f.Get(&v)) << "8 bytes wanted, 2 left";
  EXPECT_EQ(f.left(), 2u) << "a refused read moves nothing";
  std::string copy;
  EXPECT_FALSE(f.GetBytes(&copy, 3));
  ASSERT_TRUE(f.GetBytes(&copy, 2));
  EXPECT_EQ(copy, "xy");
  EXPECT_TRUE(f.done());
}

TEST(FieldReaderTest, AStringLongerThanWhatIsLeftIsRefusedWhole) {
  const std::string bytes = Bytes(~uint64_t{0}) + "ab";
  FieldReader f(bytes);
  std::string_view s;
  EXPECT_FALSE(f.GetString(&s));
  EXPECT_EQ(f.left(), bytes.size()) << "the length is given back too";
  FieldReader past(bytes, 100);
  EXPECT_TRUE(past.done());
}

}  // namespace
}  // namespace lmdbloader
