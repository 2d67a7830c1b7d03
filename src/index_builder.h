// Builds a RecordIndex by one cursor walk over an LMDB database, itself under
// the memory budget: the walk's mapped pages are released whenever the
// kernel's count grows past half the budget.
#ifndef LMDBLOADER_SRC_INDEX_BUILDER_H_
#define LMDBLOADER_SRC_INDEX_BUILDER_H_

#include <memory>

#include "lmdb_env.h"
#include "lmdbloader/status.h"
#include "record_index.h"

namespace lmdbloader {

struct WalkReport {
  uint64_t drops = 0;  // times the walk released its mapping
};

// Walks `env`'s database and fills `index` (identity and db_name included).
// `budget` 0 still releases the walk's pages every 256 MiB grown.
Status BuildIndex(const LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                  uint64_t budget, RecordIndex* index, WalkReport* report);

// Finds the start and length of the mapping of this process that contains
// `address` and maps file offset 0 of the same file (/proc/self/maps), since
// mdb_env_info's me_mapaddr is NULL unless MDB_FIXEDMAP.
Status FindMapping(const void* address, const char** base, uint64_t* length);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_INDEX_BUILDER_H_
