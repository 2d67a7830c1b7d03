// The record index's lookups as values, for tests: each fails the test on an
// error status instead of returning it.
#ifndef LMDBLOADER_TESTS_LMDB_RECORD_INDEX_UTIL_H_
#define LMDBLOADER_TESTS_LMDB_RECORD_INDEX_UTIL_H_

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "lmdb/record_index.h"

namespace lmdbloader {
namespace testing {

inline std::string KeyAt(const RecordIndex& index, uint64_t i) {
  std::string key;
  Status s = index.Key(i, &key);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return key;
}

// Whether `key` is in the index, and where.
inline bool Finds(const RecordIndex& index, std::string_view key, uint64_t* i) {
  bool found = false;
  Status s = index.Find(key, &found, i);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return found;
}

inline uint64_t LowerBoundOf(const RecordIndex& index, std::string_view key) {
  uint64_t position = 0;
  Status s = index.LowerBound(key, &position);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return position;
}

inline ValueLocation LocationOf(const RecordIndex& index, uint64_t i) {
  ValueLocation at;
  Status s = index.Locate(i, &at);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return at;
}

}  // namespace testing
}  // namespace lmdbloader

#endif  // LMDBLOADER_TESTS_LMDB_RECORD_INDEX_UTIL_H_
