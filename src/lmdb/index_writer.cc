#include "lmdb/index_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/checksum.h"
#include "lmdb/record_key.h"

namespace lmdbloader {

namespace {

// Bytes gathered before each write: large writes, a bounded buffer.
constexpr size_t kWriteChunk = 1 << 20;

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (dir.empty() || ::stat(dir.c_str(), &st) == 0) return Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(MakeDirs(DirName(dir)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::FromErrno(errno, "mkdir", dir);
  return Status::OK();
}

Status WriteAll(int fd, const char* data, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "write", path);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status PreadAll(int fd, char* data, size_t size, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd, data + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, "read", path);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace

Status IndexWriter::Create(const std::string& path, std::unique_ptr<IndexWriter>* out) {
  LMDBLOADER_RETURN_IF_ERROR(MakeDirs(DirName(path)));
  static std::atomic<uint64_t> calls{0};
  std::unique_ptr<IndexWriter> w(new IndexWriter());
  w->path_ = path;
  // A name of its own per writer: two processes may build the same index at once.
  w->tmp_ = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(calls.fetch_add(1));
  w->keys_tmp_ = w->tmp_ + ".keys";
  w->fd_ = ::open(w->tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return Status::FromErrno(errno, "open", w->tmp_);
  w->keys_fd_ = ::open(w->keys_tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->keys_fd_ < 0) return Status::FromErrno(errno, "open", w->keys_tmp_);
  // The header page is written last, in place.
  const std::string zeros(kIndexPage, '\0');
  LMDBLOADER_RETURN_IF_ERROR(WriteAll(w->fd_, zeros.data(), zeros.size(), w->tmp_));
  *out = std::move(w);
  return Status::OK();
}

IndexWriter::~IndexWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (keys_fd_ >= 0) ::close(keys_fd_);
  if (!keys_tmp_.empty()) ::unlink(keys_tmp_.c_str());
  if (!finished_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

Status IndexWriter::Flush() {
  LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd_, pending_.data(), pending_.size(), tmp_));
  entries_written_ += pending_.size();
  pending_.clear();
  return Status::OK();
}

Status IndexWriter::FlushKeys(bool last) {
  // Whole pages only, but for the last: padded with zeros.
  if (last && keys_.size() % kBlobPayload != 0) keys_.resize((keys_.size() / kBlobPayload + 1) * kBlobPayload, '\0');
  const size_t pages = keys_.size() / kBlobPayload;
  std::string out;
  out.reserve(pages * kIndexPage);
  for (size_t p = 0; p < pages; ++p) {
    out.append(keys_, p * kBlobPayload, kBlobPayload);
    const uint64_t sum = BlobPageSum(keys_.data() + p * kBlobPayload, key_pages_written_ + p);
    out.append(reinterpret_cast<const char*>(&sum), 8);
  }
  LMDBLOADER_RETURN_IF_ERROR(WriteAll(keys_fd_, out.data(), out.size(), keys_tmp_));
  key_pages_written_ += pages;
  keys_.erase(0, pages * kBlobPayload);
  return Status::OK();
}

Status IndexWriter::AddEntry(const IndexEntry& entry) {
  const uint32_t size = wide_ ? kWideEntry : kNarrowEntry;
  if (page_.size() + size > kIndexPage) {
    page_.resize(kIndexPage, '\0');
    pending_ += page_;
    page_.clear();
    if (pending_.size() >= kWriteChunk) LMDBLOADER_RETURN_IF_ERROR(Flush());
  }
  char bytes[kWideEntry];
  EncodeIndexEntry(entry, records_, size, bytes);
  page_.append(bytes, size);
  ++records_;
  return Status::OK();
}

Status IndexWriter::Add(std::string_view key, uint64_t offset, uint32_t size) {
  if (!wide_) {
    uint64_t number = 0;
    if (!ParseRecordKey(key, &number) || number != records_) LMDBLOADER_RETURN_IF_ERROR(WidenEntries());
  }
  IndexEntry entry;
  entry.offset = offset;
  entry.size = size;
  if (wide_) {
    entry.key_begin = key_bytes_;
    entry.key_size = static_cast<uint32_t>(key.size());
    keys_.append(key.data(), key.size());
    key_bytes_ += key.size();
    if (keys_.size() >= kWriteChunk) LMDBLOADER_RETURN_IF_ERROR(FlushKeys(false));
  }
  return AddEntry(entry);
}

Status IndexWriter::WidenEntries() {
  // Usually at the first record (a foreign database's first key is rarely
  // eight bytes of zeros). Later, e.g. a metadata key after keys that are
  // big-endian record numbers, the narrow entries so far are rewritten wide
  // into a fresh file a chunk at a time, never held whole.
  LMDBLOADER_RETURN_IF_ERROR(Flush());
  if (!page_.empty()) {
    page_.resize(kIndexPage, '\0');
    LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd_, page_.data(), page_.size(), tmp_));
    entries_written_ += kIndexPage;
    page_.clear();
  }
  const uint64_t n = records_;
  const int narrow_fd = fd_;
  const std::string narrow_tmp = tmp_ + ".narrow";
  if (::rename(tmp_.c_str(), narrow_tmp.c_str()) != 0) return Status::FromErrno(errno, "rename", tmp_);
  fd_ = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  Status s = fd_ < 0 ? Status::FromErrno(errno, "open", tmp_) : Status::OK();
  if (s.ok()) {
    const std::string zeros(kIndexPage, '\0');
    s = WriteAll(fd_, zeros.data(), zeros.size(), tmp_);
  }
  entries_written_ = 0;
  records_ = 0;
  wide_ = true;
  const uint64_t per_page = kIndexPage / kNarrowEntry;
  constexpr uint64_t kPagesAtOnce = 256;
  std::string chunk;
  for (uint64_t first = 0; s.ok() && first < n; first += per_page * kPagesAtOnce) {
    const uint64_t last = std::min(n, first + per_page * kPagesAtOnce);
    chunk.resize((last - first + per_page - 1) / per_page * kIndexPage);
    s = PreadAll(narrow_fd, chunk.data(), chunk.size(), kIndexPage + first / per_page * kIndexPage, narrow_tmp);
    for (uint64_t i = first; s.ok() && i < last; ++i) {
      const char* e = chunk.data() + (i - first) * kNarrowEntry;
      uint64_t offset = 0;
      uint32_t size = 0;
      std::memcpy(&offset, e, 8);
      std::memcpy(&size, e + 8, 4);
      s = Add(RecordKey(i), offset, size);
    }
  }
  ::close(narrow_fd);
  ::unlink(narrow_tmp.c_str());
  return s;
}

Status IndexWriter::AddMeta(std::string_view key, uint64_t offset, uint32_t size) {
  meta_[std::string(key)] = ValueLocation{offset, size};
  return Status::OK();
}

Status IndexWriter::Finish(const FileIdentity& identity, const std::string& db_name, uint16_t db_flags,
                           bool keys_sorted) {
  if (!page_.empty()) {
    page_.resize(kIndexPage, '\0');
    pending_ += page_;
    page_.clear();
  }
  LMDBLOADER_RETURN_IF_ERROR(Flush());
  LMDBLOADER_RETURN_IF_ERROR(FlushKeys(true));
  IndexHeader h;
  h.flags = (wide_ ? 0u : 1u) | (keys_sorted ? 2u : 0u) | (uint32_t{db_flags} << 16);
  h.identity = identity;
  h.db_name = db_name;
  h.records = records_;
  h.entry_size = wide_ ? kWideEntry : kNarrowEntry;
  h.entries_offset = kIndexPage;
  h.blob_offset = kIndexPage + entries_written_;
  h.blob_bytes = key_bytes_;
  h.meta_offset = h.blob_offset + key_pages_written_ * kIndexPage;
  const std::string meta = EncodeIndexMeta(meta_);
  h.meta_bytes = meta.size();
  h.meta_sum = Checksum(meta.data(), meta.size());
  h.leaf_offset = h.meta_offset + meta.size();
  h.leaf_bytes = leaves_.size();
  h.leaf_sum = Checksum(leaves_.data(), leaves_.size());
  h.file_size = h.leaf_offset + leaves_.size();
  // The keys, the metadata and the leaves, after the entries.
  std::string chunk(kWriteChunk, '\0');
  for (uint64_t done = 0, total = key_pages_written_ * kIndexPage; done < total;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), total - done));
    LMDBLOADER_RETURN_IF_ERROR(PreadAll(keys_fd_, chunk.data(), n, done, keys_tmp_));
    LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd_, chunk.data(), n, tmp_));
    done += n;
  }
  LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd_, meta.data(), meta.size(), tmp_));
  LMDBLOADER_RETURN_IF_ERROR(WriteAll(fd_, leaves_.data(), leaves_.size(), tmp_));
  const std::string header = EncodeIndexHeader(h);
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()))
    return Status::FromErrno(errno ? errno : EIO, "write", tmp_);
  // A failed write-back is reported by fsync or close on some file systems:
  // fail here, not at a later read.
  const int sync_error = ::fsync(fd_) == 0 ? 0 : errno;
  const int close_error = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (sync_error != 0 || close_error != 0)
    return Status::FromErrno(sync_error ? sync_error : close_error, sync_error ? "fsync" : "close", tmp_);
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return Status::FromErrno(errno, "rename " + tmp_ + " to", path_);
  finished_ = true;
  ::close(keys_fd_);
  keys_fd_ = -1;
  ::unlink(keys_tmp_.c_str());
  return Status::OK();
}

}  // namespace lmdbloader
