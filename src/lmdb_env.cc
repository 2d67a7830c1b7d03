#include "lmdb_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace lmdbloader {

Status ResolveLocation(const std::string& path, DataLocation* location) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "open", path);
  location->path = path;
  if (S_ISDIR(st.st_mode)) {
    location->subdir = true;
    location->data_path = path + (path.back() == '/' ? "" : "/") + "data.mdb";
    struct stat data;
    if (::stat(location->data_path.c_str(), &data) != 0)
      return Status::FromErrno(errno, "open", location->data_path);
  } else if (S_ISREG(st.st_mode)) {
    location->subdir = false;
    location->data_path = path;
  } else {
    return Status::InvalidArgument("open " + path + ": neither a directory nor a regular file");
  }
  if (::access(location->data_path.c_str(), R_OK) != 0)
    return Status::FromErrno(errno, "open", location->data_path);
  return Status::OK();
}

Status StatIdentity(const std::string& data_path, FileIdentity* identity) {
  struct stat st;
  if (::stat(data_path.c_str(), &st) != 0) return Status::FromErrno(errno, "stat", data_path);
  identity->device = st.st_dev;
  identity->inode = st.st_ino;
  identity->size = static_cast<uint64_t>(st.st_size);
  identity->mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return Status::OK();
}

Status LmdbEnv::Open(const DataLocation& location, bool lock, const std::string& db_name,
                     std::unique_ptr<LmdbEnv>* out) {
  std::unique_ptr<LmdbEnv> e(new LmdbEnv());
  const std::string& where = location.data_path;
  int rc = mdb_env_create(&e->env_);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_create", where);
  if (!db_name.empty()) {
    rc = mdb_env_set_maxdbs(e->env_, 1024);
    if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_set_maxdbs", where);
  }
  unsigned flags = MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS;
  if (!lock) flags |= MDB_NOLOCK;
  if (!location.subdir) flags |= MDB_NOSUBDIR;
  rc = mdb_env_open(e->env_, location.path.c_str(), flags, 0644);
  if (rc != MDB_SUCCESS) {
    // mdb_env_open on a directory-less lock file can fail with EACCES; name
    // the data file, which is what the user asked for.
    return Status::FromLmdb(rc, "mdb_env_open", where);
  }
  MDB_envinfo info;
  MDB_stat stat;
  mdb_env_info(e->env_, &info);
  mdb_env_stat(e->env_, &stat);
  LMDBLOADER_RETURN_IF_ERROR(StatIdentity(where, &e->identity_));
  e->identity_.txnid = info.me_last_txnid;
  e->identity_.page_size = stat.ms_psize;
  uint64_t needed = (static_cast<uint64_t>(info.me_last_pgno) + 1) * stat.ms_psize;
  if (e->identity_.size < needed) {
    return Status::Corruption("open " + where + ": truncated: file has " +
                              std::to_string(e->identity_.size) + " bytes, LMDB's meta page needs " +
                              std::to_string(needed));
  }
  rc = mdb_txn_begin(e->env_, nullptr, MDB_RDONLY, &e->txn_);
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_txn_begin", where);
  rc = mdb_dbi_open(e->txn_, db_name.empty() ? nullptr : db_name.c_str(), 0, &e->dbi_);
  if (rc == MDB_NOTFOUND)
    return Status::NotFound("mdb_dbi_open " + where + ": no database named '" + db_name + "'");
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_dbi_open", where);
  mdb_dbi_flags(e->txn_, e->dbi_, &e->db_flags_);
  *out = std::move(e);
  return Status::OK();
}

void LmdbEnv::Close() {
  // Null the handles first so a second Close (or the destructor) is a no-op.
  MDB_txn* txn = txn_;
  MDB_env* env = env_;
  txn_ = nullptr;
  env_ = nullptr;
  if (txn) mdb_txn_abort(txn);
  if (env) mdb_env_close(env);
}

LmdbEnv::~LmdbEnv() { Close(); }

}  // namespace lmdbloader
