#include "lmdb/lmdb_env.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "corpus/corpus_format.h"

namespace lmdbloader {

namespace {

// Whether `dir` holds parts that `convert --shard-index` writes.
bool HoldsShardParts(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.path().filename().string().rfind("part-", 0) == 0) return true;
  return false;
}

// liblmdb opens (creating it when missing) the lock file beside the data
// and reports its failures as the environment's: when mdb_env_open fails,
// name the lock file if it is what is wrong.
Status LockFileProblem(const DataLocation& location, int rc) {
  const std::string lock = location.subdir ? location.path + "/lock.mdb" : location.path + "-lock";
  struct stat st;
  if (::lstat(lock.c_str(), &st) != 0) return Status::OK();
  if (S_ISLNK(st.st_mode) && ::stat(lock.c_str(), &st) != 0)
    return Status::IOError("lock=True: the lock file " + lock + " is a link to a missing file (" +
                               std::strerror(errno) + ")",
                           rc);
  if (S_ISDIR(st.st_mode))
    return Status::IOError("lock=True: the lock file " + lock + " is a directory, not LMDB's lock file", rc);
  if (!S_ISREG(st.st_mode))
    return Status::IOError("lock=True: the lock file " + lock + " is not a regular file", rc);
  return Status::OK();
}

}  // namespace

Status ResolveLocation(const std::string& path, DataLocation* location) {
  if (path.empty()) return Status::InvalidArgument("empty database path");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::FromErrno(errno, "open", path);
  location->path = path;
  if (S_ISDIR(st.st_mode)) {
    location->subdir = true;
    location->data_path = path + (path.back() == '/' ? "" : "/") + "data.mdb";
    struct stat data;
    if (::stat(location->data_path.c_str(), &data) != 0) {
      const int err = errno;
      Status s = Status::FromErrno(err, "open", location->data_path);
      if (err == ENOENT && HoldsShardParts(path))
        return Status::IOError(s.message() + " (the folder holds shard parts but no " + kShardListFile +
                               ": run `lmdbloader shard-list " + path + "` once every shard is written)",
                               err);
      return s;
    }
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

Status LmdbEnv::Open(const DataLocation& location, bool lock, const std::string& db_name,
                     std::unique_ptr<LmdbEnv>* out) {
  std::unique_ptr<LmdbEnv> e(new LmdbEnv());
  const std::string& where = location.data_path;
  LMDBLOADER_RETURN_IF_ERROR(e->file_.Open(where));
  // liblmdb sees the file only after its meta pages passed the checks.
  LMDBLOADER_RETURN_IF_ERROR(e->file_.ReadMeta(0, &e->meta_));
  if (lock) {
    int rc = mdb_env_create(&e->env_);
    if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_env_create", where);
    unsigned flags = MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS;
    if (!location.subdir) flags |= MDB_NOSUBDIR;
    rc = mdb_env_open(e->env_, location.path.c_str(), flags, 0644);
    if (rc != MDB_SUCCESS) {
      LMDBLOADER_RETURN_IF_ERROR(LockFileProblem(location, rc));
      return Status::FromLmdb(rc, "mdb_env_open", where);
    }
    // The snapshot's meta page can be overwritten by a writer's second commit
    // after ours began: read it right away, and begin again if it is gone.
    Status found;
    for (int attempt = 0; attempt < 8; ++attempt) {
      rc = mdb_txn_begin(e->env_, nullptr, MDB_RDONLY, &e->txn_);
      if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_txn_begin", where);
      found = e->file_.ReadMeta(mdb_txn_id(e->txn_), &e->meta_);
      if (!found.IsNotFound()) break;
      mdb_txn_abort(e->txn_);
      e->txn_ = nullptr;
    }
    LMDBLOADER_RETURN_IF_ERROR(found);
  }
  if (db_name.empty()) {
    e->tree_ = e->meta_.main_tree;
  } else {
    LMDBLOADER_RETURN_IF_ERROR(e->file_.FindNamedTree(e->meta_, db_name, &e->tree_));
  }
  struct stat st;
  if (::fstat(e->file_.fd(), &st) != 0) return Status::FromErrno(errno, "fstat", where);
  e->identity_.device = st.st_dev;
  e->identity_.inode = st.st_ino;
  e->identity_.size = static_cast<uint64_t>(st.st_size);
  e->identity_.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  e->identity_.txnid = e->meta_.txnid;
  e->identity_.page_size = e->meta_.page_size;
  e->identity_.meta_sum = e->meta_.sum;
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
