// File sets: many ordinary LMDB databases read as one dataset.
//
// Corpora in the wild are often split into many LMDB files (fairchem's
// folders of *.lmdb, chunk files of a few thousand samples each): a Reader
// opened on a folder of them, a glob, or a list of paths reads them one after
// the other, record positions running on from file to file. Each file is
// opened (descriptors, index) only while it is read, a bounded number at once
// (reader_rep.h says how), so that neither the descriptor limit nor the
// budget grows with the file count.
#ifndef LMDBLOADER_SRC_READER_FILE_SET_H_
#define LMDBLOADER_SRC_READER_FILE_SET_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// The databases `path` names when it is a file set, in sorted order:
//  - a folder that holds neither data.mdb nor a shard list: its files named
//    *.lmdb or *.mdb (not lock files) and its subfolders holding data.mdb,
//    named *.lmdb or *.mdb, or holding lock.mdb, a shard list or databases
//    of their own (those that are no database are listed so that opening
//    them says so: a set is one folder deep);
//  - a glob pattern (*, ? or [ in a path that does not exist): what it
//    matches, lock files left out.
// *is_set false (nothing listed) when `path` is one database or a shard set.
// IOError naming `path` when a folder or pattern names no database.
Status ListFileSet(const std::string& path, bool* is_set, std::vector<std::string>* files);

// Why `path`, listed as one database of a set, is none before its data file
// is opened: IOError for a folder without data.mdb (saying so where it holds
// databases of its own), InvalidArgument for a shard set's folder. OK for
// anything else (its open says what is wrong).
Status CheckFileSetMember(const std::string& path);

// The paths of a set's files as one column: the folder they share, once,
// and each path's rest in one buffer. A set of 10^6 files keeps their names'
// bytes and 8 bytes each, where a std::string each would cost 32 bytes and a
// heap block (with glibc's 16 bytes around it) for any path past 15 bytes.
// Not thread-safe to build; const methods may be called from many threads.
class MemberPaths {
 public:
  MemberPaths() = default;
  // `paths`, in their order.
  explicit MemberPaths(const std::vector<std::string>& paths);
  // From the parts another column gave (prefix(), each rest()): a saved
  // listing's, without a std::string a path on the way.
  MemberPaths(std::string prefix, std::string rests, std::vector<uint64_t> ends)
      : prefix_(std::move(prefix)), rests_(std::move(rests)), ends_(std::move(ends)) {}
  size_t size() const { return ends_.size(); }
  // Path `i` (< size()) as it was given.
  std::string operator[](size_t i) const;
  const std::string& prefix() const { return prefix_; }
  std::string_view rest(size_t i) const {
    const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
    return std::string_view(rests_).substr(begin, ends_[i] - begin);
  }
  // What the column holds, in bytes (its buffers' capacity).
  uint64_t MemoryBytes() const;

 private:
  std::string prefix_;         // the longest leading run of whole folders that every path shares
  std::string rests_;          // each path without prefix_, one after the other
  std::vector<uint64_t> ends_; // the end of path i's rest in rests_
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_FILE_SET_H_
