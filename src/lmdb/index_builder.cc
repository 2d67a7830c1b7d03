#include "lmdb/index_builder.h"

#include <sys/mman.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

namespace lmdbloader {

Status FindMapping(const void* address, const char** base, uint64_t* length) {
  std::ifstream maps("/proc/self/maps");
  if (!maps) return Status::IOError("open /proc/self/maps failed");
  const uintptr_t p = reinterpret_cast<uintptr_t>(address);
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t start = 0, end = 0;
    unsigned long long file_offset = 0;
    if (std::sscanf(line.c_str(), "%" SCNxPTR "-%" SCNxPTR " %*s %llx", &start, &end,
                    &file_offset) != 3)
      continue;
    if (p >= start && p < end) {
      *base = reinterpret_cast<const char*>(start - file_offset);
      *length = end - (start - file_offset);
      return Status::OK();
    }
  }
  return Status::Corruption("no mapping in /proc/self/maps holds the LMDB value");
}

bool KeysSorted(const LmdbEnv& env) { return (env.db_flags() & (kLmdbIntegerKey | kLmdbReverseKey)) == 0; }

Status BuildIndex(LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                  std::string_view meta_prefix, RecordIndex* index) {
  index->identity = env.identity();
  index->db_name = db_name;
  index->set_keys_sorted(KeysSorted(env));
  index->set_db_flags(static_cast<uint16_t>(env.db_flags()));
  // The tree's own count, capped by what the file could hold (a node takes
  // at least 10 bytes of a page), so a damaged count cannot allocate much.
  index->Reserve(std::min<uint64_t>(env.tree().entries, env.identity().size / 10));
  return WalkIndex(env, location, db_name, meta_prefix, index);
}

Status WalkIndex(LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                 std::string_view meta_prefix, IndexSink* sink, LeafTable* leaves) {
  const std::string& where = location.data_path;
  const bool meta_allowed = !meta_prefix.empty() && db_name.empty();
  // Duplicates are several items of one node: no record is a node of its own.
  const bool one_node_a_record = !(env.db_flags() & kLmdbDupSort);
  uint64_t count = 0;
  if (leaves != nullptr) leaves->Begin(LeafPageFormat{env.identity().page_size, env.identity().page_header});
  // LmdbFile checked that every value lies inside the file.
  Status walked = env.file().Walk(env.meta(), env.tree(), [&](const LmdbItem& item) -> Status {
    if (item.value_size > UINT32_MAX)
      return Status::Unsupported("open " + where + ": record " + std::to_string(count) + " holds " +
                                 std::to_string(item.value_size) + " bytes; records up to 4 GiB are supported");
    const bool meta = meta_allowed && item.key.substr(0, meta_prefix.size()) == meta_prefix;
    if (leaves != nullptr) {
      const bool plain = one_node_a_record && !item.named_database && item.dup_leaf_pgno == 0;
      leaves->Note(item.leaf_pgno, !meta, plain && !item.on_overflow_pages, item.value_offset, item.value_size,
                   item.key.size(), plain && item.on_overflow_pages);
    }
    if (meta) return sink->AddMeta(item.key, item.value_offset, static_cast<uint32_t>(item.value_size));
    ++count;
    return sink->Add(item.key, item.value_offset, static_cast<uint32_t>(item.value_size));
  });
  if (leaves != nullptr) leaves->Finish();
  return walked;
}

}  // namespace lmdbloader
