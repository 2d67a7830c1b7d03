#include "lmdb/record_index.h"

#include <gtest/gtest.h>

#include "corpus/corpus_format.h"
#include "lmdb/record_index_util.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

TEST(RecordIndexTest, SequentialKeysAreNotStored) {
  RecordIndex index;
  for (uint64_t i = 0; i < 1000; ++i) ASSERT_OK(index.Add(RecordKey(i), i * 100, 50));
  EXPECT_TRUE(index.sequential_keys());
  EXPECT_LT(index.MemoryBytes(), 1000u * 16 + 64);
  uint64_t pos = 0;
  ASSERT_TRUE(testing::Finds(index, RecordKey(777), &pos));
  EXPECT_EQ(pos, 777u);
  EXPECT_FALSE(testing::Finds(index, RecordKey(1000), &pos));
  EXPECT_FALSE(testing::Finds(index, "abc", &pos));
  EXPECT_EQ(testing::KeyAt(index, 5), RecordKey(5));
}

TEST(RecordIndexTest, SwitchesToStoredKeysAtFirstOtherKey) {
  RecordIndex index;
  ASSERT_OK(index.Add(RecordKey(0), 0, 1));
  ASSERT_OK(index.Add(RecordKey(1), 10, 1));
  ASSERT_OK(index.Add("zeta", 20, 1));
  EXPECT_FALSE(index.sequential_keys());
  EXPECT_EQ(testing::KeyAt(index, 1), RecordKey(1));
  EXPECT_EQ(testing::KeyAt(index, 2), "zeta");
  uint64_t pos = 0;
  ASSERT_TRUE(testing::Finds(index, "zeta", &pos));
  EXPECT_EQ(pos, 2u);
}

TEST(RecordIndexTest, LowerBoundUsesBytewiseOrder) {
  RecordIndex index;
  for (const char* k : {"a", "ab", "b", "\x80", "\xff"}) ASSERT_OK(index.Add(k, 0, 0));
  EXPECT_EQ(testing::LowerBoundOf(index, ""), 0u);
  EXPECT_EQ(testing::LowerBoundOf(index, "aa"), 1u);
  EXPECT_EQ(testing::LowerBoundOf(index, "b"), 2u);
  EXPECT_EQ(testing::LowerBoundOf(index, "c"), 3u);  // 0x80 sorts after 'c' as unsigned
  EXPECT_EQ(testing::LowerBoundOf(index, "\xff\x01"), 5u);
}

}  // namespace
}  // namespace lmdbloader
