#include "lmdbloader/inspect.h"

#include "lmdb_env.h"

namespace lmdbloader {

Status InspectDatabase(const std::string& path, const std::string& db_name, DatabaseInfo* info) {
  DataLocation location;
  LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(path, &location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(location, false, db_name, &env));
  MDB_stat st;
  int rc = mdb_stat(env->txn(), env->dbi(), &st);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_stat", location.data_path);
  MDB_envinfo ei;
  mdb_env_info(env->env(), &ei);
  info->data_path = location.data_path;
  info->file_bytes = env->identity().size;
  info->page_size = st.ms_psize;
  info->depth = st.ms_depth;
  info->branch_pages = st.ms_branch_pages;
  info->leaf_pages = st.ms_leaf_pages;
  info->overflow_pages = st.ms_overflow_pages;
  info->entries = st.ms_entries;
  info->last_txnid = ei.me_last_txnid;
  info->map_size = ei.me_mapsize;
  return Status::OK();
}

}  // namespace lmdbloader
