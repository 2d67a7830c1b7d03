// The shard list (`shards.json`) of a shard set: which corpora, in order,
// form one dataset. Written by `lmdbloader shard-list`; read here, where
// nothing in it is trusted: parts must lie inside the set's folder (plain
// relative names, no `.`/`..` components), each listed once, with record
// counts that are counts. Fuzzed by fuzz/shard_list_fuzzer.cc.
#ifndef LMDBLOADER_SRC_SHARD_LIST_H_
#define LMDBLOADER_SRC_SHARD_LIST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "lmdb/lmdb_env.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

struct ShardEntry {
  std::string path;      // the part's path: the set's folder + "/" + its name
  int64_t records = -1;  // the count the list gives, -1 when it gives none
};

// Parses the text of `list_path`, the shard list of folder `dir`.
// Corruption naming `list_path` and the problem. `total` (when given) gets
// the list's count of all records, -1 when it gives none: where some parts
// give no count of their own, only the parts themselves can check it (the
// reader does, at open).
Status ParseShardList(const std::string& text, const std::string& dir, const std::string& list_path,
                      std::vector<ShardEntry>* parts, int64_t* total = nullptr);

// When `dir` holds a shard list, reads and parses it and sets `*is_set`;
// otherwise `*is_set` is false and `parts` is empty.
Status ReadShardList(const std::string& dir, bool* is_set, std::vector<ShardEntry>* parts,
                     int64_t* total = nullptr);

// ResolveLocation (lmdb/lmdb_env.h) for a path that may be a shard set's
// folder: when the folder holds no data.mdb but does hold the parts that
// `convert --shard-index` writes, the error says to write the shard list.
Status ResolveDataLocation(const std::string& path, DataLocation* location);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_SHARD_LIST_H_
