#include "lmdb/lmdb_env.h"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <tuple>

#include "io/quiet_thread.h"


namespace lmdbloader {

namespace {

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

// The environments this process has open, one per database: the data file's
// device and inode, and whether it was opened as a directory (its lock file
// is then lock.mdb beside it, else PATH-lock).
using EnvKey = std::tuple<dev_t, ino_t, bool>;

std::mutex& EnvsMutex() {
  static std::mutex* mu = new std::mutex();  // never destroyed: in use until exit
  return *mu;
}

std::map<EnvKey, std::weak_ptr<LmdbSharedEnv>>& Envs() {
  static auto* envs = new std::map<EnvKey, std::weak_ptr<LmdbSharedEnv>>();
  return *envs;
}

// A fork while another thread holds EnvsMutex would leave it held forever
// in the child, whose reader must open its own environment.
void HoldEnvsAcrossFork() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork([] { EnvsMutex().lock(); }, [] { EnvsMutex().unlock(); }, [] { EnvsMutex().unlock(); });
  });
}

}  // namespace

// One MDB_env of a database, shared by every LmdbEnv of it in this process.
// liblmdb keeps one reader table per database, in the lock file, and an
// environment's close clears every slot this process holds in it, whichever
// environment took them (mdb.c, mdb_env_close0); a second environment of the
// same file also takes its locks anew, and can reset the whole table when
// no other process has it open (mdb_env_setup_locks), and its close drops
// the process's fcntl locks on the lock file (lmdb.h, Caveats). Either way
// the snapshot another reader in this process holds is no longer seen by
// the writer, which reuses its pages while that reader walks or reads them.
// So a process opens each database once; every LmdbEnv begins its own read
// transaction in it (MDB_NOTLS: each takes a slot of its own).
struct LmdbSharedEnv {
  MDB_env* env = nullptr;
  pid_t pid = 0;          // the process that opened it: a forked child never closes it
  // Destroyed with EnvsMutex held (LmdbEnv::Close, SharedEnvironment).
  std::mutex mu;          // serializes mdb_txn_begin, mdb_txn_abort and map resizes
  int live_txns = 0;      // read transactions begun and not yet ended (guarded by mu)
  ~LmdbSharedEnv() {
    if (env != nullptr && pid == ::getpid()) mdb_env_close(env);
  }
};

namespace {

// This process's environment of the database `location` names (whose data
// file `data_fd` has open), opened with MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS
// when it has none yet (or only one a parent process opened before fork).
Status SharedEnvironment(const DataLocation& location, int data_fd, std::shared_ptr<LmdbSharedEnv>* out) {
  const std::string& where = location.data_path;
  struct stat st;
  if (::fstat(data_fd, &st) != 0) return Status::FromErrno(errno, "fstat", where);
  const EnvKey key{st.st_dev, st.st_ino, location.subdir};
  HoldEnvsAcrossFork();
  std::lock_guard<std::mutex> lock(EnvsMutex());
  auto& envs = Envs();
  auto found = envs.find(key);
  if (found != envs.end()) {
    std::shared_ptr<LmdbSharedEnv> env = found->second.lock();
    if (env && env->pid == ::getpid()) {
      *out = std::move(env);
      return Status::OK();
    }
    // Closed, or a parent's before fork. (An entry stays once its database
    // is closed, until it is opened again: a few bytes per database.)
    envs.erase(found);
  }
  auto env = std::make_shared<LmdbSharedEnv>();
  int rc = mdb_env_create(&env->env);
  if (rc != MDB_SUCCESS) {
    env->env = nullptr;
    return Status::FromLmdb(rc, "mdb_env_create", where);
  }
  env->pid = ::getpid();
  unsigned flags = MDB_RDONLY | MDB_NORDAHEAD | MDB_NOTLS;
  if (!location.subdir) flags |= MDB_NOSUBDIR;
  rc = mdb_env_open(env->env, location.path.c_str(), flags, 0644);
  if (rc != MDB_SUCCESS) {
    LMDBLOADER_RETURN_IF_ERROR(LockFileProblem(location, rc));
    return Status::FromLmdb(rc, "mdb_env_open", where);
  }
  envs[key] = env;
  *out = std::move(env);
  return Status::OK();
}

// Begins a read transaction in `shared`. A writer that raised its map size
// since the environment was opened makes liblmdb refuse (MDB_MAP_RESIZED)
// until the environment adopts the new size, which lmdb.h allows only while
// no transaction of it is active in this process.
Status BeginRead(LmdbSharedEnv& shared, const std::string& where, MDB_txn** txn) {
  std::lock_guard<std::mutex> lock(shared.mu);
  int rc = mdb_txn_begin(shared.env, nullptr, MDB_RDONLY, txn);
  if (rc == MDB_MAP_RESIZED && shared.live_txns == 0) {
    rc = mdb_env_set_mapsize(shared.env, 0);
    if (rc == MDB_SUCCESS) rc = mdb_txn_begin(shared.env, nullptr, MDB_RDONLY, txn);
  }
  if (rc == MDB_MAP_RESIZED)
    return Status::IOError("open " + where + " with lock=True: a writer grew the database's map past the one "
                           "that another reader of it in this process still holds a snapshot in "
                           "(MDB_MAP_RESIZED); close that reader to open this one");
  if (rc != MDB_SUCCESS) return Status::FromLmdb(rc, "mdb_txn_begin", where);
  ++shared.live_txns;
  return Status::OK();
}

// Whether `tree` has the counts of the main tree `txn` copied from its meta
// page (mdb_stat reads only that copy: no page of the file). Under the
// environment's lock: mdb_dbi_open sets the environment's comparator.
bool SameMainTree(LmdbSharedEnv& shared, MDB_txn* txn, const LmdbTree& tree) {
  std::lock_guard<std::mutex> lock(shared.mu);
  MDB_dbi dbi;
  MDB_stat st;
  if (mdb_dbi_open(txn, nullptr, 0, &dbi) != MDB_SUCCESS || mdb_stat(txn, dbi, &st) != MDB_SUCCESS) return false;
  return st.ms_depth == tree.depth && st.ms_branch_pages == tree.branch_pages && st.ms_leaf_pages == tree.leaf_pages &&
         st.ms_overflow_pages == tree.overflow_pages && st.ms_entries == tree.entries;
}

void EndRead(LmdbSharedEnv& shared, MDB_txn* txn) {
  std::lock_guard<std::mutex> lock(shared.mu);
  mdb_txn_abort(txn);
  --shared.live_txns;
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
    if (::stat(location->data_path.c_str(), &data) != 0) return Status::FromErrno(errno, "open", location->data_path);
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

namespace {

MetaCount CountOne(const std::string& path, const std::string& db_name) {
  MetaCount count;
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return count;
  std::string data_path = path;
  if (S_ISDIR(st.st_mode)) data_path += path.back() == '/' ? "data.mdb" : "/data.mdb";
  else if (!S_ISREG(st.st_mode)) return count;
  LmdbFile file;
  LmdbMeta meta;
  if (!file.Open(data_path).ok() || !file.ReadMeta(0, &meta).ok()) return count;
  LmdbTree tree = meta.main_tree;
  if (!db_name.empty() && !file.FindNamedTree(meta, db_name, &tree).ok()) return count;
  count.ok = true;
  count.format = static_cast<uint8_t>(meta.format);
  count.db_flags = tree.flags;
  count.records = tree.entries;
  count.file_bytes = file.file_size();
  count.txnid = meta.txnid;
  if (::fstat(file.fd(), &st) != 0) return MetaCount{};
  count.device = static_cast<uint64_t>(st.st_dev);
  count.inode = static_cast<uint64_t>(st.st_ino);
  count.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  count.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return count;
}

}  // namespace

void CountRecords(const std::vector<std::string>& paths, const std::string& db_name, unsigned threads,
                  std::vector<MetaCount>* counts) {
  counts->assign(paths.size(), MetaCount{});
  if (paths.empty()) return;
  // Files are taken kChunk at a time, so that threads rarely meet on the counter.
  constexpr size_t kChunk = 64;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t first; (first = next.fetch_add(kChunk)) < paths.size();)
      for (size_t k = first; k < std::min(first + kChunk, paths.size()); ++k) (*counts)[k] = CountOne(paths[k], db_name);
  };
  const size_t helpers = std::min<size_t>(std::max(threads, 1u) - 1, (paths.size() + kChunk - 1) / kChunk - 1);
  std::vector<std::thread> started;
  for (size_t t = 0; t < helpers; ++t) {
    try {
      started.push_back(StartQuietThread(work));
    } catch (const std::system_error&) {
      break;  // no thread to be had (a container's limit): fewer do the work
    }
  }
  work();
  for (std::thread& t : started) t.join();
}

Status LmdbEnv::Open(const DataLocation& location, bool lock, const std::string& db_name,
                     std::unique_ptr<LmdbEnv>* out) {
  std::unique_ptr<LmdbEnv> e(new LmdbEnv());
  const std::string& where = location.data_path;
  LMDBLOADER_RETURN_IF_ERROR(e->file_.Open(where));
  // liblmdb sees the file only after its meta pages passed the checks.
  LMDBLOADER_RETURN_IF_ERROR(e->file_.ReadMeta(0, &e->meta_));
  if (lock && e->meta_.format != 1)
    return Status::Unsupported("open " + where + " with lock=True: an LMDB " +
                               std::string(e->meta_.format == 3 ? "1.0 file (data format 3)" : "file of another format") +
                               " is read without LMDB's lock, by lmdbloader's own page reader; lock=True takes a "
                               "snapshot through liblmdb " + std::to_string(MDB_VERSION_MAJOR) + "." +
                               std::to_string(MDB_VERSION_MINOR) + ", which reads data format 1 only")
        .WithReason(Status::Reason::kLmdbFormat, e->meta_.format);
  if (lock) {
    LMDBLOADER_RETURN_IF_ERROR(SharedEnvironment(location, e->file_.fd(), &e->env_));
    e->pid_ = ::getpid();
    // liblmdb copies the snapshot's trees from its meta page when the
    // transaction begins (mdb_txn_renew0) but hands out neither their root
    // pages nor the last page, so the walk reads that meta page again from
    // the file, where the writer's second commit after ours rewrites it (the
    // two meta pages take turns). A read that finds it gone begins again. A
    // read that overlapped the rewrite could hold the new trees under the old
    // id (mdb_env_write_meta writes the id last): the page read is taken only
    // when the main tree's counts are the ones liblmdb copied, and when, read
    // after it, neither meta page holds a later commit yet (the commit that
    // rewrites ours comes after the next one, so it had not begun).
    constexpr int kAttempts = 16;
    Status found;
    for (int attempt = 1;; ++attempt) {
      LMDBLOADER_RETURN_IF_ERROR(BeginRead(*e->env_, where, &e->txn_));
      const uint64_t txnid = mdb_txn_id(e->txn_);
      found = e->file_.ReadMeta(txnid, &e->meta_);
      if (found.ok()) {
        uint64_t committed = 0;
        LMDBLOADER_RETURN_IF_ERROR(
            ReadCommittedTxnid(e->file_.fd(), nullptr, e->meta_.page_size, e->meta_.header_size, where, &committed));
        const bool same_trees = SameMainTree(*e->env_, e->txn_, e->meta_.main_tree);
        if (same_trees && (committed == txnid || attempt == kAttempts)) break;
        if (!same_trees && attempt == kAttempts)
          found = Status::Corruption("open " + where + ": meta page " + std::to_string(e->meta_.page) +
                                     " of transaction " + std::to_string(txnid) +
                                     " holds another main tree than the one liblmdb's read transaction copied");
      } else if (!found.IsNotFound()) {
        return found;
      }
      EndRead(*e->env_, e->txn_);
      e->txn_ = nullptr;
      if (attempt == kAttempts) return found;
    }
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
  e->identity_.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  e->identity_.txnid = e->meta_.txnid;
  e->identity_.page_size = e->meta_.page_size;
  e->identity_.page_header = e->meta_.header_size;
  e->identity_.meta_sum = e->meta_.sum;
  *out = std::move(e);
  return Status::OK();
}

void LmdbEnv::Close() {
  // Null the handles first so a second Close (or the destructor) is a no-op.
  MDB_txn* txn = txn_;
  std::shared_ptr<LmdbSharedEnv> env = std::move(env_);
  txn_ = nullptr;
  env_.reset();
  // In a child after fork the transaction's slot is the parent's (the lock
  // file is shared memory): ending it there would end the parent's snapshot.
  if (txn != nullptr && env && pid_ == ::getpid()) EndRead(*env, txn);
  // The environment closes with the last LmdbEnv of it in the process that
  // opened it (~LmdbSharedEnv), under the lock its opening takes: a reader
  // opening it again meanwhile must not open a second environment while the
  // first one's close is still to clear this process's slots.
  if (!env) return;
  std::lock_guard<std::mutex> lock(EnvsMutex());
  env.reset();
}

LmdbEnv::~LmdbEnv() { Close(); }

}  // namespace lmdbloader
