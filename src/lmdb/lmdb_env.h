// LmdbEnv: an LMDB database opened read-only, its meta pages checked.
//
// The walk goes through LmdbFile (lmdb_pages.h), which checks every page it
// reads: liblmdb never walks the file in this process. liblmdb is used only
// in lock mode, and only to open the environment and hold one read
// transaction (the snapshot that keeps a concurrent writer from reusing the
// pages the index points to); it reads nothing but the meta pages, which
// LmdbFile checked first. Every LmdbEnv of one database in a process shares
// one MDB_env (LmdbSharedEnv, lmdb_env.cc says why) and owns its MDB_txn; not
// copyable; closing is idempotent. Never used after fork(): a child opens its
// own (lmdb.h, Caveats), and closing the parent's there leaves liblmdb alone.
#ifndef LMDBLOADER_SRC_LMDB_ENV_H_
#define LMDBLOADER_SRC_LMDB_ENV_H_

#include <lmdb.h>

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "lmdb/lmdb_pages.h"
#include "lmdbloader/status.h"
#include "lmdb/record_index.h"

namespace lmdbloader {

struct LmdbSharedEnv;

// Where an environment's files are: a directory holding data.mdb, or a single
// file opened with MDB_NOSUBDIR.
struct DataLocation {
  std::string path;       // as given by the user
  std::string data_path;  // the data file itself
  bool subdir = true;
};

// Resolves `path` (directory or file). IOError naming the path when missing.
Status ResolveLocation(const std::string& path, DataLocation* location);

// What a database's meta page says of its records, for a set of files read
// as one dataset: their positions run on from file to file, so opening the
// set needs every file's count, and this is all it reads of each.
struct MetaCount {
  bool ok = false;        // false: not read this way (LmdbEnv::Open says why)
  uint8_t format = 0;     // LMDB's data format: 1 (0.9) or 3 (1.0)
  uint16_t db_flags = 0;  // the database's flags (MDB_DUPSORT, ...)
  uint64_t records = 0;
  uint64_t file_bytes = 0;  // the data file's size
  // The data file's identity when counted (a file set's saved listing):
  // st_dev, st_ino, mtime and ctime in ns, and the meta page's txn id.
  uint64_t device = 0, inode = 0, txnid = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
};

// The record count of each of `paths` (a folder holding data.mdb, or a data
// file) from its meta pages, checked as LmdbEnv::Open checks them (and, for
// `db_name` not empty, that database's header in the main tree), into
// (*counts)[k], on up to `threads` threads at once (the cost is system calls
// and, on a network file system, round trips, so threads overlap them): a
// stat, open, fstat, one pread where pages are 4 KiB, two fstats and a close a
// file; no mapping, no liblmdb.
void CountRecords(const std::vector<std::string>& paths, const std::string& db_name, unsigned threads,
                  std::vector<MetaCount>* counts);

class LmdbEnv {
 public:
  // Checks the meta pages, finds `db_name` (main when empty) and fills
  // identity(). With `lock`, also opens the environment with liblmdb
  // (MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS) and begins the read transaction
  // whose snapshot the walk then reads. Corruption naming the file when the
  // meta pages are damaged (a file cut short of pages its trees reach opens:
  // the walk finds it, checking every page it reads against the file's size);
  // NotFound when there is no database `db_name`.
  static Status Open(const DataLocation& location, bool lock, const std::string& db_name,
                     std::unique_ptr<LmdbEnv>* env);
  ~LmdbEnv();
  LmdbEnv(const LmdbEnv&) = delete;
  LmdbEnv& operator=(const LmdbEnv&) = delete;

  LmdbFile& file() { return file_; }
  const LmdbMeta& meta() const { return meta_; }
  const LmdbTree& tree() const { return tree_; }  // the database's own tree
  unsigned db_flags() const { return tree_.flags; }
  const FileIdentity& identity() const { return identity_; }
  void Close();

 private:
  LmdbEnv() = default;
  std::shared_ptr<LmdbSharedEnv> env_;  // lock mode only
  MDB_txn* txn_ = nullptr;              // lock mode only
  pid_t pid_ = 0;                       // the process that began txn_
  LmdbFile file_;
  LmdbMeta meta_;
  LmdbTree tree_;
  FileIdentity identity_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_ENV_H_
