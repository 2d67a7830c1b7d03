// Inspection of an LMDB database's structure, for `lmdbloader stat`.
#ifndef LMDBLOADER_INSPECT_H_
#define LMDBLOADER_INSPECT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// LMDB's own counts for one database (mdb_stat, mdb_env_info).
struct DatabaseInfo {
  std::string data_path;
  uint64_t file_bytes = 0;
  uint32_t page_size = 0;
  uint32_t depth = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
  uint64_t entries = 0;
  uint64_t last_txnid = 0;
  uint64_t last_pgno = 0;  // the last page in use (LMDB's meta page)
  uint64_t map_size = 0;
};

// Opens `path` read-only without a lock file and reads the counts of
// `db_name` (main database when empty). For a shard set, the counts of its
// parts summed (data_path is then the set's folder). Errors as for Reader::Open.
Status InspectDatabase(const std::string& path, const std::string& db_name, DatabaseInfo* info);

// Names of the named databases of `path` (entries of its main tree flagged
// as such). Walks the whole main tree: call it when the names are needed.
Status ListNamedDatabases(const std::string& path, std::vector<std::string>* names);

// Where the leaf pages of one database begin, in LMDB's order. liblmdb's
// cursor moves page by page: after a failed exact lookup whose insertion point
// is the first node of a leaf page, the cursor sits past the last node of the
// page before it, and its next move lands on that node rather than the one
// after it. py-lmdb compatibility (lmdbloader.compat) reproduces that.
struct LeafLayout {
  // Indices of the keys (key nodes; one per key in a MDB_DUPSORT database)
  // that begin a leaf page, the first page's excepted.
  std::vector<uint64_t> key_page_starts;
  // For each key whose duplicates fill a tree of their own: the key's index
  // and the indices of its duplicates that begin a leaf page of that tree,
  // the first excepted.
  std::vector<std::pair<uint64_t, std::vector<uint64_t>>> dup_page_starts;
};

// Walks `db_name` (main database when empty) of the LMDB at `path` with the
// checked page reader. Errors as for Reader::Open; Unsupported for a shard
// set: its parts are separate trees.
Status ReadLeafLayout(const std::string& path, const std::string& db_name, LeafLayout* layout);

// liblmdb's version, as mdb_version() reports it.
void LmdbVersion(int* major, int* minor, int* patch);

// Walks every data file of `path` (each part of a shard set) with the
// checked page reader, and also reads the header of every overflow page run
// that holds a value (which opening skips: one random read per record).
// Appends one line per damaged place to `problems`; a non-OK status when a
// file cannot be read at all.
Status CheckPages(const std::string& path, const std::string& db_name, std::vector<std::string>* problems);

// What `lmdbloader verify` finds: every page walked and checked, every
// record read (a corpus's checksums checked, its records decoded as msgpack
// maps), and for a corpus its names, its label column and every metadata
// value against the manifest's checksums.
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

#endif  // LMDBLOADER_INSPECT_H_
