#include "lmdbloader/inspect.h"

#include "lmdb_env.h"

namespace lmdbloader {

Status InspectDatabase(const std::string& path, const std::string& db_name, DatabaseInfo* info) {
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(path, &location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, db_name, &env));
  // The counts LMDB keeps in the tree's header (what mdb_stat reports).
  const LmdbTree& tree = env->tree();
  info->data_path = location.data_path;
  info->file_bytes = env->identity().size;
  info->page_size = env->meta().page_size;
  info->depth = tree.depth;
  info->branch_pages = tree.branch_pages;
  info->leaf_pages = tree.leaf_pages;
  info->overflow_pages = tree.overflow_pages;
  info->entries = tree.entries;
  info->last_txnid = env->meta().txnid;
  info->map_size = env->meta().map_size;
  return Status::OK();
}

}  // namespace lmdbloader
