// Helpers the reader's tests share (tests/test_util.h holds what every
// layer's tests share).
#ifndef LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_
#define LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// Record r of member f of a test's file set: says where it comes from.
inline std::string MemberValue(int f, int r) { return "file " + std::to_string(f) + " record " + std::to_string(r); }

// Member f's records, in key order: keys k100, k101, ..., values MemberValue.
inline std::vector<std::pair<std::string, std::string>> MemberRecords(int f, int per) {
  std::vector<std::pair<std::string, std::string>> records;
  for (int r = 0; r < per; ++r) records.push_back({"k" + std::to_string(100 + r), MemberValue(f, r)});
  return records;
}

// 0 .. n-1 in an order fixed by `seed`.
inline std::vector<uint64_t> Shuffled(uint64_t n, uint64_t seed) {
  std::vector<uint64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return v;
}

// One ReadBatch of `indices` into `out`, record k into a string of sizes[k]
// bytes (what the caller found its size to be).
inline Status ReadInto(Reader& r, const std::vector<uint64_t>& indices, const std::vector<uint64_t>& sizes,
                       std::vector<std::string>* out) {
  out->assign(indices.size(), std::string());
  std::vector<char*> dsts;
  for (size_t k = 0; k < indices.size(); ++k) {
    (*out)[k].resize(sizes[k]);
    dsts.push_back((*out)[k].data());
  }
  return r.ReadBatch(indices.data(), indices.size(), dsts.data());
}

}  // namespace lmdbloader::testing

#endif  // LMDBLOADER_TESTS_READER_READER_TEST_UTIL_H_
