// LmdbEnv: an LMDB environment opened read-only with one read transaction.
//
// Owns MDB_env* and MDB_txn*; move-only; closing is idempotent. Used by the
// index walk (briefly) and, in lock mode, held by a Reader so a concurrent
// writer cannot reuse pages its index points to. Never used after fork(): a
// child opens its own (lmdb.h, Caveats).
#ifndef LMDBLOADER_SRC_LMDB_ENV_H_
#define LMDBLOADER_SRC_LMDB_ENV_H_

#include <lmdb.h>

#include <memory>
#include <string>

#include "lmdbloader/status.h"
#include "record_index.h"

namespace lmdbloader {

// Where an environment's files are: a directory holding data.mdb, or a single
// file opened with MDB_NOSUBDIR.
struct DataLocation {
  std::string path;       // as given by the user
  std::string data_path;  // the data file itself
  bool subdir = true;
};

// Resolves `path` (directory or file). IOError naming the path when missing.
Status ResolveLocation(const std::string& path, DataLocation* location);

class LmdbEnv {
 public:
  // Opens read-only (MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS, and MDB_NOLOCK
  // unless `lock`), begins a read transaction, opens `db_name` (main when
  // empty) and fills identity(). Corruption when the file is shorter than
  // LMDB's meta page says (touching the missing pages would raise SIGBUS).
  static Status Open(const DataLocation& location, bool lock, const std::string& db_name,
                     std::unique_ptr<LmdbEnv>* env);
  ~LmdbEnv();
  LmdbEnv(const LmdbEnv&) = delete;
  LmdbEnv& operator=(const LmdbEnv&) = delete;

  MDB_env* env() const { return env_; }
  MDB_txn* txn() const { return txn_; }
  MDB_dbi dbi() const { return dbi_; }
  unsigned db_flags() const { return db_flags_; }
  const FileIdentity& identity() const { return identity_; }
  void Close();

 private:
  LmdbEnv() = default;
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
  MDB_dbi dbi_ = 0;
  unsigned db_flags_ = 0;
  FileIdentity identity_;
};

// stat() fields of the data file into `identity` (txnid and page size untouched).
Status StatIdentity(const std::string& data_path, FileIdentity* identity);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_ENV_H_
