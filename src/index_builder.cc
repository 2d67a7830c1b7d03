#include "index_builder.h"

#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <string>

#include "corpus_format.h"
#include "residency.h"

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

Status BuildIndex(const LmdbEnv& env, const DataLocation& location, const std::string& db_name,
                  uint64_t budget, RecordIndex* index, WalkReport* report) {
  const std::string& where = location.data_path;
  if (env.db_flags() & MDB_DUPSORT)
    return Status::Unsupported("open " + where +
                               ": MDB_DUPSORT databases (several values per key) are not supported");
  index->identity = env.identity();
  index->db_name = db_name;
  index->set_keys_sorted((env.db_flags() & (MDB_INTEGERKEY | MDB_REVERSEKEY)) == 0);

  WalkTrimmer trimmer(budget ? budget / 2 : (256ull << 20));
  LMDBLOADER_RETURN_IF_ERROR(trimmer.Start());

  MDB_cursor* cursor = nullptr;
  int rc = mdb_cursor_open(env.txn(), env.dbi(), &cursor);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_cursor_open", where);
  // The cursor is closed on every path out.
  std::unique_ptr<MDB_cursor, void (*)(MDB_cursor*)> cursor_owner(cursor, mdb_cursor_close);

  const char* base = nullptr;
  uint64_t map_length = 0;
  const uint64_t file_size = env.identity().size;
  const bool corpus_meta_allowed = db_name.empty();
  MDB_val key, value;
  uint64_t count = 0;
  for (rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST); rc == MDB_SUCCESS;
       rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)) {
    if (base == nullptr) LMDBLOADER_RETURN_IF_ERROR(FindMapping(value.mv_data, &base, &map_length));
    const char* data = static_cast<const char*>(value.mv_data);
    if (data < base || static_cast<uint64_t>(data - base) + value.mv_size > file_size)
      return Status::Corruption("walk " + where + ": a value lies outside the data file (record " +
                                std::to_string(count) + ")");
    uint64_t offset = static_cast<uint64_t>(data - base);
    std::string_view k(static_cast<const char*>(key.mv_data), key.mv_size);
    if (corpus_meta_allowed && IsMetaKey(k)) {
      index->AddMeta(k, offset, static_cast<uint32_t>(value.mv_size));
    } else {
      index->Add(k, offset, static_cast<uint32_t>(value.mv_size));
    }
    if ((++count & 63) == 0) LMDBLOADER_RETURN_IF_ERROR(trimmer.Check(base, map_length));
  }
  if (rc != MDB_NOTFOUND) return Status::FromLmdb(rc, "mdb_cursor_get", where);
  // Leave nothing of the walk mapped.
  if (base != nullptr) ::madvise(const_cast<char*>(base), map_length, MADV_DONTNEED);
  if (report) report->drops = trimmer.drops();
  return Status::OK();
}

}  // namespace lmdbloader
