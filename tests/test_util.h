// Helpers shared by the C++ tests: temporary directories, LMDB fixtures with
// checkable contents, the page cache, and the kernel's memory counts.
#ifndef LMDBLOADER_TESTS_TEST_UTIL_H_
#define LMDBLOADER_TESTS_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lmdbloader/status.h"

#define ASSERT_OK(expr)                                        \
  do {                                                         \
    ::lmdbloader::Status _s = (expr);                          \
    ASSERT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString();  \
  } while (0)
#define EXPECT_OK(expr)                                        \
  do {                                                         \
    ::lmdbloader::Status _s = (expr);                          \
    EXPECT_TRUE(_s.ok()) << #expr << " -> " << _s.ToString();  \
  } while (0)

namespace lmdbloader::testing {

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Deterministic contents of record i: `size` bytes from a seeded generator,
// so a test can check any byte it reads without keeping the corpus in memory.
std::string RecordBytes(uint64_t i, size_t size);
void FillRecordBytes(uint64_t i, char* out, size_t size);

// Writes an LMDB environment in directory `dir` (created) whose records are
// (8-byte big-endian i, RecordBytes(i, value_size)) for i < count.
void WriteNumberedLmdb(const std::string& dir, uint64_t count, size_t value_size);
// Writes arbitrary (key, value) pairs; `db_name` non-empty writes a named
// database; `nosubdir` writes a single file at `path`.
void WriteLmdb(const std::string& path, const std::vector<std::pair<std::string, std::string>>& records,
               const std::string& db_name = "", bool nosubdir = false, unsigned db_flags = 0);

// A whole file's bytes ("" when it cannot be read), and a file written with
// exactly `bytes` (truncated first).
std::string ReadAll(const std::string& path);
void WriteAll(const std::string& path, const std::string& bytes);

// Every (key, value) liblmdb's own cursor returns from database `db_name` of
// the environment in directory `dir` (main when empty), duplicates included,
// in its order; the database's flags in *flags when given.
std::vector<std::pair<std::string, std::string>> LiblmdbPairs(const std::string& dir, const std::string& db_name,
                                                              unsigned* flags = nullptr);

// Drops the file from the page cache, then reads it sequentially, which leaves
// large folios in the cache (the worst case for mapped readers).
void WarmPageCache(const std::string& path);

// Runs `body` in a forked child that holds no privileges (when this process
// is root, the child becomes nobody: root reads any file, so permission errors
// can only be seen without it) and returns the child's exit status, which is
// body's return value; 98/99 when privileges could not be dropped.
int RunUnprivileged(const std::function<int()>& body);

// The kernel's count for this process, read directly from /proc/self/statm.
uint64_t ProcessRssBytes();
// The same count through one descriptor held open, for loops that sample it
// after every read: opening statm each time costs about 7x reading it (11 vs
// 1.5 us), and was most of the budget test's time. The descriptor names the
// process that opened it, so a forked child makes its own sampler.
class RssSampler {
 public:
  RssSampler();
  uint64_t ResidentBytes() const;

 private:
  struct Close {
    void operator()(const int* fd) const;
  };
  std::unique_ptr<const int, Close> fd_;  // move-only: one owner closes it
};
// File-backed and shared resident bytes of this process (statm's third field):
// the mapped pages of data files, without the heap (which sanitizers grow).
uint64_t ProcessFileRssBytes();

}  // namespace lmdbloader::testing

#endif  // LMDBLOADER_TESTS_TEST_UTIL_H_
