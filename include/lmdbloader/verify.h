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
  bool opened = false;                // the database opened (records was read); a set: each of its files
  uint64_t records = 0;
  uint64_t files = 0;                 // a set of files: its databases verified (0 for one database)
  std::vector<std::string> problems;  // what is wrong, at most kMaxProblems
  static constexpr size_t kMaxProblems = 100;
};

// Verifies the database at `path` opened with `options` (the saved index is
// never used: the walk is the check; every record's checksum is checked,
// and for a corpus verify_checksums=kOff is InvalidArgument). A non-OK status means the
// file could not be walked at all; what is wrong inside is in
// report->problems. A set of files (a folder of LMDBs or a glob, as
// Reader::Open takes them) is verified file by file, each problem naming its
// file, a file that does not open among them.
Status VerifyDatabase(const std::string& path, ReaderOptions options, VerifyReport* report);
// The databases at `paths`, one by one, as a set of files.
Status VerifyDatabase(const std::vector<std::string>& paths, ReaderOptions options, VerifyReport* report);

}  // namespace lmdbloader

#endif  // LMDBLOADER_VERIFY_H_
