// What `lmdbloader verify` checks, in the library so that every front end
// finds the same problems: every page walked and checked, every record read
// (a corpus's checksums checked, its records decoded as msgpack maps), and for
// a corpus its names, its label column and every metadata value against the
// manifest's checksums.
#ifndef LMDBLOADER_VERIFY_H_
#define LMDBLOADER_VERIFY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

struct VerifyReport {
  bool opened = false;                // the database opened (records was read)
  uint64_t records = 0;
  std::vector<std::string> problems;  // what is wrong, at most kMaxProblems
  static constexpr size_t kMaxProblems = 100;
};

// Verifies the database at `path` opened with `options` (the saved index is
// never used: the walk is the check; every record's checksum is checked,
// and for a corpus verify_checksums=kOff is InvalidArgument). A non-OK status means the
// file could not be walked at all; what is wrong inside is in
// report->problems.
Status VerifyDatabase(const std::string& path, ReaderOptions options, VerifyReport* report);

}  // namespace lmdbloader

#endif  // LMDBLOADER_VERIFY_H_
