// What LMDB itself records about one database: the counts in its tree's
// header and its meta page (what mdb_stat and mdb_env_info report), for
// `lmdbloader stat` and lmdbloader.compat's stat() and info().
#ifndef LMDBLOADER_DATABASE_INFO_H_
#define LMDBLOADER_DATABASE_INFO_H_

#include <cstdint>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// LMDB's own counts for one database (mdb_stat, mdb_env_info).
struct DatabaseInfo {
  std::string data_path;
  uint64_t file_bytes = 0;
  uint32_t page_size = 0;
  uint32_t lmdb_format = 1;  // LMDB's data format: 1 (LMDB 0.9) or 3 (LMDB 1.0)
  uint32_t depth = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
  uint64_t entries = 0;
  uint64_t last_txnid = 0;
  uint64_t last_pgno = 0;  // the last page in use (LMDB's meta page)
  uint64_t map_size = 0;
};

// Adds `part`'s counts to `sum` as the counts of several files add up (a
// shard set's parts, a set of files): pages, entries, bytes and last pages
// summed, the deepest tree, the newest transaction; page size and format
// those of the first part.
void AddDatabaseInfo(const DatabaseInfo& part, DatabaseInfo* sum);

// Opens `path` read-only without a lock file and reads the counts of
// `db_name` (main database when empty). For a shard set, the counts of its
// parts summed (data_path is then the set's folder). Errors as for Reader::Open.
Status InspectDatabase(const std::string& path, const std::string& db_name, DatabaseInfo* info);

}  // namespace lmdbloader

#endif  // LMDBLOADER_DATABASE_INFO_H_
