// Inspection of an LMDB database's structure, for `lmdbloader stat`.
#ifndef LMDBLOADER_INSPECT_H_
#define LMDBLOADER_INSPECT_H_

#include <cstdint>
#include <string>
#include <vector>

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

// liblmdb's version, as mdb_version() reports it.
void LmdbVersion(int* major, int* minor, int* patch);

// Walks every data file of `path` (each part of a shard set) with the
// checked page reader, and also reads the header of every overflow page run
// that holds a value (which opening skips: one random read per record).
// Appends one line per damaged place to `problems`; a non-OK status when a
// file cannot be read at all.
Status CheckPages(const std::string& path, const std::string& db_name, std::vector<std::string>* problems);

}  // namespace lmdbloader

#endif  // LMDBLOADER_INSPECT_H_
