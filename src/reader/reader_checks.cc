// Reader: what a read checks of the file it read (reader_rep.h declares
// these): a writer's commit to a plain LMDB (CheckSnapshot), a file written
// in place since it was indexed (SameFile, at reopen and after every read),
// a file of a set indexed again once so, and the faults of a mapping that
// the storage failed to read (read_retry.h).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "io/mapping.h"
#include "io/open_file.h"
#include "lmdb/lmdb_pages.h"
#include "io/read_retry.h"
#include "io/residency.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Rep::CheckSnapshot() const {
  // Only a plain LMDB, always a single part, is watched (a set's files are
  // each the state found when it was opened).
  if (file_set_) return Status::OK();
  Part& p = *parts_.front();
  if (!p.watched) return Status::OK();
  // After the reads it vouches for: a page of the snapshot opened at
  // transaction T is freed by a commit of T+1 at the earliest and reused by
  // a writer of T+2, which starts after T+1 is committed. So an unchanged id
  // read after the records means they were the snapshot's.
  std::atomic_thread_fence(std::memory_order_acquire);  // the records' loads before the id's
  uint64_t now = 0;
  std::shared_ptr<Mapping> meta = std::atomic_load(&p.meta_pages);
  const uint32_t page_size = p.index.identity.page_size, header = p.index.identity.page_header;
  LMDBLOADER_RETURN_IF_ERROR(
      ReadCommittedTxnid(p.fd, meta ? meta->data() : nullptr, page_size, header, p.location.data_path, &now));
  if (meta && meta->shrank()) {
    // Zeros were read: the file shrank, or the storage failed to read the
    // pages (EIO from NFS or FUSE raises the same fault). A file of its size
    // still is mapped again, and its ids read through pread meanwhile, so
    // that one failed read leaves nothing broken.
    LMDBLOADER_RETURN_IF_ERROR(MappedReadFailed(p));
    std::shared_ptr<Mapping> fresh;
    if (!Mapping::Map(p.fd, 2ull * page_size, p.location.data_path, &fresh).ok()) fresh.reset();
    std::atomic_compare_exchange_strong(&p.meta_pages, &meta, fresh);
    LMDBLOADER_RETURN_IF_ERROR(WithReadRetries(
        [&] { return ReadCommittedTxnid(p.fd, nullptr, page_size, header, p.location.data_path, &now); }));
  }
  if (now == p.index.identity.txnid) return Status::OK();
  return Status::IOError(p.location.data_path + ": a writer committed to it since it was opened (transaction " +
                         std::to_string(p.index.identity.txnid) + ", now " + std::to_string(now) +
                         "), and without the lock file nothing keeps the pages read from being reused: "
                         "open it with lock=True (--lock) while a writer may change it, or reopen it");
}

Status SameFile(const std::string& path, const struct stat& st, const FileIdentity& identity) {
  const int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  const int64_t ctime = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == identity.size && mtime == identity.mtime_ns && ctime == identity.ctime_ns) return Status::OK();
  std::string what = size != identity.size ? "its size went from " + std::to_string(identity.size) + " to " +
                                                 std::to_string(size) + " bytes"
                     : mtime != identity.mtime_ns ? "its modification time moved"
                                                  : "its change time moved (its mtime did not: put back?)";
  return Status::Corruption(path + ": the file changed since it was indexed (" + what +
                            "): it was written in place (cp or rsync --inplace onto it) or its attributes changed "
                            "(chmod), so its index may point at other bytes; none are returned: reopen it");
}

Status OpenDataFile(const std::string& path, const FileIdentity& identity, bool unchanged, int* fd) {
  int f = -1;
  struct stat st;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(path, &f, &st));
  Status s;
  if (st.st_dev != identity.device || st.st_ino != identity.inode ||
      static_cast<uint64_t>(st.st_size) < identity.size)
    s = Status::Corruption("open " + path + ": the file was replaced or truncated since it was indexed");
  else if (unchanged)
    s = SameFile(path, st, identity);
  if (!s.ok()) {
    ::close(f);
    return s;
  }
  *fd = f;
  return Status::OK();
}

Status Reader::Rep::CheckUnchanged(Part* const* parts, size_t count) const {
  // Under lock=True the environment holds the snapshot the index describes,
  // and writers change the file around it.
  if (options_.lock || count == 0) return Status::OK();
  // One fstat per file read: a single database's batch is one part, a set's
  // is sorted once (a search per record would cost the square of the batch).
  std::vector<Part*> distinct;
  if (parts_.size() == 1) {
    distinct.push_back(parts[0]);
  } else {
    distinct.assign(parts, parts + count);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  }
  for (Part* part : distinct) {
    Part& p = *part;
    struct stat st;
    if (::fstat(p.fd, &st) != 0) return Status::FromErrno(errno, "fstat", p.location.data_path);
    Status same = SameFile(p.location.data_path, st, p.index.identity);
    if (!same.ok()) {
      // A file of a set is indexed again at its next read (EnsureOpen).
      p.changed.store(true);
      changes_seen_.fetch_add(1);
      return same;
    }
  }
  return Status::OK();
}

Status Reader::Rep::RereadChanged(const std::function<Status()>& read) {
  const uint64_t seen = changes_seen_.load();
  Status s = read();
  // A file of a set found written since it was indexed is indexed again at
  // its next read (EnsureOpen): that read, once, gives the file's bytes now.
  if (!s.ok() && file_set_ && changes_seen_.load() != seen) s = read();
  return s;
}

Status Reader::Rep::MappedReadFailed(const Part& part, bool lasting) const {
  struct stat st;
  const std::string& path = part.location.data_path;
  if (::fstat(part.fd, &st) != 0) {
    // A dead FUSE daemon (ENOTCONN) or a lost server: say so, not "shrank".
    const int err = errno;
    return Status::IOError(path + ": reading it through its mapping failed, and so does fstat (" +
                               std::strerror(err) + ")",
                           err);
  }
  const uint64_t now = static_cast<uint64_t>(st.st_size);
  if (now < part.index.identity.size)
    return Status::IOError(path + ": the file shrank under its mapping (" + std::to_string(part.index.identity.size) +
                           " bytes when opened, " + std::to_string(now) +
                           " bytes now): a read reached past its end (it is being rewritten or was truncated); "
                           "reopen it");
  if (!lasting) return Status::OK();
  return Status::IOError(path + ": reading it through its mapping failed " + std::to_string(kReadRetries + 1) +
                             " times (an I/O error from its storage; the file's size is unchanged): " +
                             std::strerror(EIO),
                         EIO);
}

Status Reader::Rep::RemapAfterFailedRead(Part& part, const std::shared_ptr<Mapping>& failed) {
  LMDBLOADER_RETURN_IF_ERROR(MappedReadFailed(part));
  std::lock_guard<std::mutex> lock(reopen_mu_);
  if (std::atomic_load(&part.map) != failed) return Status::OK();  // another thread mapped it again
  std::shared_ptr<Mapping> fresh;
  LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(part.fd, part.index.identity.size, part.location.data_path, &fresh));
  std::atomic_store(&part.map, fresh);
  governor_->Attach(part.slot, fresh->data(), fresh->size());
  return Status::OK();
}

Status Reader::Rep::CopyMapped(Part& part, uint64_t offset, uint64_t size, char* dst) {
  for (int attempt = 0;; ++attempt) {
    std::shared_ptr<Mapping> map = std::atomic_load(&part.map);
    std::memcpy(dst, map->data() + offset, size);
    if (!map->shrank()) return Status::OK();
    if (attempt == kReadRetries) return MappedReadFailed(part, /*lasting=*/true);
    // The rest of that mapping reads as zeros from now on (fault_guard.h):
    // a fresh one, then the bytes again.
    LMDBLOADER_RETURN_IF_ERROR(RemapAfterFailedRead(part, map));
    WaitBeforeRetry(attempt);
  }
}

}  // namespace lmdbloader
