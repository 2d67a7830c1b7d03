// Helpers the reader's tests share (tests/test_util.h holds what every
// layer's tests share).
#ifndef LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_
#define LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "lmdbloader/reader.h"

namespace lmdbloader::testing {

// The Reader of `path`; a failed open fails the test (with the status) and
// returns null.
inline std::unique_ptr<Reader> OpenOrDie(const std::string& path, ReaderOptions options = {}) {
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(path, options, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return r;
}

}  // namespace lmdbloader::testing

#endif  // LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_
