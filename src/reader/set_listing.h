// A file set's saved listing: each member's path, record count and identity,
// so that opening the set again reads no member (file_set.h). Opening a set
// needs every member's count (positions run on from file to file); reading
// them is a stat, open, pread and close a file, 9 s for 10^6 files. The
// listing is saved beside the record indexes (IndexCacheDir) and trusted
// only while the set itself is unchanged:
//  - a folder (or a glob whose wildcards are in its last name only): the
//    folder's stat, taken before it was listed; an entry added, removed or
//    renamed moves its mtime and ctime. A folder changed within the last
//    second when the walk listed it is not saved (a change in the same clock
//    tick would not move its times);
//  - a list of paths: the paths, compared with the caller's;
//  - another glob: its matches, listed again at each open (no member read).
// Each member's identity (device, inode, size, mtime, ctime, LMDB txn id) is
// checked when that member is first opened (Reader::Rep::EnsureOpen).
// Internal: not part of the public API.
#ifndef LMDBLOADER_SRC_READER_SET_LISTING_H_
#define LMDBLOADER_SRC_READER_SET_LISTING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"
#include "reader/file_set.h"

namespace lmdbloader {

// A data file's identity as the listing keeps it.
struct MemberIdentity {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint64_t txnid = 0;
  bool operator==(const MemberIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns && txnid == o.txnid;
  }
  // 8 bytes that differ when any field does (XXH3-64): what a Reader keeps
  // of each member while it is closed.
  uint64_t Sum() const;
};

// What names the set, and how its sameness is checked.
enum class SetKind : uint32_t { kFolder = 1, kGlob = 2, kList = 3 };
struct SetSource {
  SetKind kind = SetKind::kList;
  std::string name;    // the folder or the pattern; empty for a list
  std::string folder;  // the folder whose stat stands for the set; empty: none (a list, a deep glob)
  // The folder's stat when the set was listed (kept when `folder` is not empty).
  uint64_t dir_device = 0, dir_inode = 0;
  int64_t dir_mtime_ns = 0, dir_ctime_ns = 0;
  bool dir_stat_ok = false;
};

// How `path` names a set, taken before it is listed: a folder, or a glob
// (stat fails and it holds * ? or [). *is_candidate false otherwise (one
// database, a shard set, a missing path: ListFileSet decides).
void DescribeSetSource(const std::string& path, SetSource* source, bool* is_candidate);

struct SetListing {
  SetSource source;
  std::string db_name;
  uint32_t format = 1, db_flags = 0;  // the first member's
  uint64_t data_bytes = 0;           // the members' data files together
  MemberPaths paths;
  std::vector<uint64_t> records;
  std::vector<MemberIdentity> identities;
};

// Where the listing of `source` for `db_name` is saved and looked for:
// IndexCacheDir(options)/set-<16 hex digits>.lst, the digits a sum of the
// kind, the name (a list: its paths), db_name and, where a path is
// relative, the working directory. Empty: nowhere (index_dir "none", no
// cache directory).
std::string SetListingPath(const SetSource& source, const std::vector<std::string>& list_paths,
                           const std::string& db_name, const ReaderOptions& options);

// The listing's bytes: version 1, little-endian, an XXH3-64 of all before
// it at the end.
std::string EncodeSetListing(const SetListing& listing);
// Checks `bytes` as untrusted: Corruption naming `path` for anything out of
// place (truncated, a count past the bytes, a wrong sum, paths empty or
// holding NUL), NotFound for another version. `check_sum` false skips the
// sum (the fuzz harness, to reach the parser behind it).
Status DecodeSetListing(std::string_view bytes, const std::string& path, SetListing* listing,
                        bool check_sum = true);

// Reads the listing at `path` (mapped, not copied: a listing of 10^6 files
// is about 100 MB). NotFound when absent; Corruption as DecodeSetListing.
Status LoadSetListing(const std::string& path, SetListing* listing);
// Writes it atomically (atomic_write.h), making the cache directory.
Status SaveSetListing(const std::string& path, const SetListing& listing);

// Whether `saved` describes the set `now` names: same kind and name, and,
// where it has a folder, its stat unchanged.
bool SameSetSource(const SetSource& saved, const SetSource& now);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_SET_LISTING_H_
