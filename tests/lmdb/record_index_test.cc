#include "lmdb/record_index.h"

#include <gtest/gtest.h>

#include "corpus/corpus_format.h"

namespace lmdbloader {
namespace {

TEST(RecordIndexTest, SequentialKeysAreNotStored) {
  RecordIndex index;
  for (uint64_t i = 0; i < 1000; ++i) index.Add(RecordKey(i), i * 100, 50);
  EXPECT_TRUE(index.sequential_keys());
  EXPECT_LT(index.MemoryBytes(), 1000u * 16 + 64);
  uint64_t pos = 0;
  ASSERT_TRUE(index.Find(RecordKey(777), &pos));
  EXPECT_EQ(pos, 777u);
  EXPECT_FALSE(index.Find(RecordKey(1000), &pos));
  EXPECT_FALSE(index.Find("abc", &pos));
  EXPECT_EQ(index.Key(5), RecordKey(5));
}

TEST(RecordIndexTest, SwitchesToStoredKeysAtFirstOtherKey) {
  RecordIndex index;
  index.Add(RecordKey(0), 0, 1);
  index.Add(RecordKey(1), 10, 1);
  index.Add("zeta", 20, 1);
  EXPECT_FALSE(index.sequential_keys());
  EXPECT_EQ(index.Key(1), RecordKey(1));
  EXPECT_EQ(index.Key(2), "zeta");
  uint64_t pos = 0;
  ASSERT_TRUE(index.Find("zeta", &pos));
  EXPECT_EQ(pos, 2u);
}

TEST(RecordIndexTest, LowerBoundUsesBytewiseOrder) {
  RecordIndex index;
  for (const char* k : {"a", "ab", "b", "\x80", "\xff"}) index.Add(k, 0, 0);
  EXPECT_EQ(index.LowerBound(""), 0u);
  EXPECT_EQ(index.LowerBound("aa"), 1u);
  EXPECT_EQ(index.LowerBound("b"), 2u);
  EXPECT_EQ(index.LowerBound("c"), 3u);  // 0x80 sorts after 'c' as unsigned
  EXPECT_EQ(index.LowerBound("\xff\x01"), 5u);
}

}  // namespace
}  // namespace lmdbloader
