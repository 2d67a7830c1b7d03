// Reading what LMDB records about a database, without liblmdb's trust in its
// pages: the counts (database_info.h), the named databases
// (named_databases.h), the leaf layout (leaf_layout.h), the page check
// (page_check.h) and liblmdb's version (lmdb_version.h). One file, because all
// open the database the same way, through the checked page reader.
#include "lmdbloader/database_info.h"
#include "lmdbloader/leaf_layout.h"
#include "lmdbloader/lmdb_version.h"
#include "lmdbloader/named_databases.h"

#include <algorithm>

#include "lmdb/lmdb_env.h"
#include "corpus/page_check.h"
#include "corpus/shard_list.h"

namespace lmdbloader {

namespace {

Status InspectOne(const std::string& path, const std::string& db_name, DatabaseInfo* info) {
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(path, &location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, db_name, &env));
  // The counts LMDB keeps in the tree's header (what mdb_stat reports).
  const LmdbTree& tree = env->tree();
  info->data_path = location.data_path;
  info->file_bytes = env->identity().size;
  info->page_size = env->meta().page_size;
  info->lmdb_format = env->meta().format;
  info->depth = tree.depth;
  info->branch_pages = tree.branch_pages;
  info->leaf_pages = tree.leaf_pages;
  info->overflow_pages = tree.overflow_pages;
  info->entries = tree.entries;
  info->last_txnid = env->meta().txnid;
  info->last_pgno = env->meta().last_pgno;
  info->map_size = env->meta().map_size;
  return Status::OK();
}

}  // namespace

void AddDatabaseInfo(const DatabaseInfo& part, DatabaseInfo* sum) {
  const bool first = sum->page_size == 0;
  sum->file_bytes += part.file_bytes;
  if (first) {
    sum->page_size = part.page_size;
    sum->lmdb_format = part.lmdb_format;
  }
  sum->depth = std::max(sum->depth, part.depth);
  sum->branch_pages += part.branch_pages;
  sum->leaf_pages += part.leaf_pages;
  sum->overflow_pages += part.overflow_pages;
  sum->entries += part.entries;
  sum->last_txnid = std::max(sum->last_txnid, part.last_txnid);
  sum->last_pgno += part.last_pgno;
  sum->map_size += part.map_size;
}

Status ListNamedDatabases(const std::string& path, std::vector<std::string>* names) {
  names->clear();
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(path, &location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, "", &env));
  const LmdbMeta meta = env->meta();
  return env->file().Walk(meta, meta.main_tree, [&](const LmdbItem& item) {
    if (!item.named_database) return Status::OK();
    // LMDB 1.0 stores the name's terminating NUL too; py-lmdb 3 lists it without.
    std::string_view name = item.key;
    if (meta.format == 3 && !name.empty() && name.back() == '\0') name.remove_suffix(1);
    names->emplace_back(name);
    return Status::OK();
  });
}

Status ReadLeafLayout(const std::string& path, const std::string& db_name, LeafLayout* layout) {
  *layout = LeafLayout{};
  bool shard_set = false;
  std::vector<ShardEntry> parts;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &parts));
  if (shard_set) return Status::Unsupported(path + " is a shard set: its parts have leaf pages of their own");
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(path, &location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, db_name, &env));
  uint64_t keys = 0;  // key nodes seen
  uint64_t leaf = 0, dup_leaf = 0;
  return env->file().Walk(env->meta(), env->tree(), [&](const LmdbItem& item) {
    if (item.dup_index == 0) {
      if (keys > 0 && item.leaf_pgno != leaf) layout->key_page_starts.push_back(keys);
      leaf = item.leaf_pgno;
      ++keys;
    } else if (item.dup_leaf_pgno != dup_leaf) {
      if (layout->dup_page_starts.empty() || layout->dup_page_starts.back().first != keys - 1)
        layout->dup_page_starts.emplace_back(keys - 1, std::vector<uint64_t>{});
      layout->dup_page_starts.back().second.push_back(item.dup_index);
    }
    dup_leaf = item.dup_leaf_pgno;
    return Status::OK();
  });
}

void LmdbVersion(int* major, int* minor, int* patch) { mdb_version(major, minor, patch); }

Status CheckPages(const std::string& path, const std::string& db_name, std::vector<std::string>* problems) {
  bool shard_set = false;
  std::vector<ShardEntry> parts;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &parts));
  if (!shard_set) parts.push_back({path, -1});
  for (const ShardEntry& part : parts) {
    DataLocation location;
    LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(part.path, &location));
    std::unique_ptr<LmdbEnv> env;
    Status s = LmdbEnv::Open(location, false, db_name, &env);
    if (!s.ok()) {
      problems->push_back(s.ToString());
      continue;
    }
    LmdbFile& file = env->file();
    uint64_t damaged = 0;
    s = file.Walk(env->meta(), env->tree(), [&](const LmdbItem& item) -> Status {
      if (!item.on_overflow_pages) return Status::OK();
      Status c = file.CheckOverflow(env->meta(), item.value_offset, item.value_size);
      if (!c.ok() && ++damaged <= 100) problems->push_back(c.ToString());
      return Status::OK();
    });
    if (!s.ok()) problems->push_back(s.ToString());
  }
  return Status::OK();
}

Status InspectDatabase(const std::string& path, const std::string& db_name, DatabaseInfo* info) {
  bool shard_set = false;
  std::vector<ShardEntry> parts;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &parts));
  if (!shard_set) return InspectOne(path, db_name, info);
  // A shard set: the parts' counts summed, the deepest tree, the newest txn.
  *info = DatabaseInfo();
  info->data_path = path;
  for (const ShardEntry& part : parts) {
    DatabaseInfo one;
    LMDBLOADER_RETURN_IF_ERROR(InspectOne(part.path, db_name, &one));
    AddDatabaseInfo(one, info);
  }
  return Status::OK();
}

}  // namespace lmdbloader
