// Builds a RecordIndex by one walk over an LMDB database with the checked
// page reader (lmdb_pages.h): pages are read with pread(), nothing is mapped,
// so the walk holds a batch of pages a level (about 2 MiB in all) and the index it builds.
#ifndef LMDBLOADER_SRC_INDEX_BUILDER_H_
#define LMDBLOADER_SRC_INDEX_BUILDER_H_

#include <memory>
#include <string>
#include <string_view>

#include "lmdb/leaf_table.h"
#include "lmdb/lmdb_env.h"
#include "lmdbloader/status.h"
#include "lmdb/record_index.h"

namespace lmdbloader {

// Walks `env`'s database and fills `index` (identity and db_name included).
// Keys starting with `meta_prefix` (when not empty) go to the index's
// metadata instead of its records: the corpus format's metadata keys
// (corpus/corpus_format.h), which the caller knows and this layer does not. Corruption naming the file and page when
// the walk meets damage.
Status BuildIndex(LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                  std::string_view meta_prefix, RecordIndex* index);

// The same walk into any sink (a writer of the saved file: index_writer.h),
// which gets the records and metadata; what identifies the database
// (env.identity(), KeysSorted(env), env.db_flags()) is the caller's to record.
// `leaves` (may be null) gets the leaf pages the items lie on, finished
// (leaf_table.h).
Status WalkIndex(LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                 std::string_view meta_prefix, IndexSink* sink, LeafTable* leaves = nullptr);

// Whether the database's keys sort bytewise (not MDB_INTEGERKEY or
// MDB_REVERSEKEY), so that lookups can search instead of scan.
bool KeysSorted(const LmdbEnv& env);

// Finds the start and length of the mapping of this process that contains
// `address` and maps file offset 0 of the same file (/proc/self/maps), since
// mdb_env_info's me_mapaddr is NULL unless MDB_FIXEDMAP.
Status FindMapping(const void* address, const char** base, uint64_t* length);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_INDEX_BUILDER_H_
