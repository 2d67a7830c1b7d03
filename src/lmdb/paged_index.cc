#include "lmdb/paged_index.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <cerrno>
#include <cstring>

#include "base/checksum.h"
#include "io/batch_io.h"
#include "io/open_file.h"

namespace lmdbloader {

namespace {

constexpr uint64_t kNoPage = UINT64_MAX;

}  // namespace

Status PagedIndex::Open(const std::string& path, const FileIdentity& expected, const std::string& db_name,
                        uint64_t cache_bytes, std::unique_ptr<PagedIndex>* out) {
  std::unique_ptr<PagedIndex> p(new PagedIndex());
  p->path_ = path;
  struct stat st;
  if (!OpenReadOnly(path, &p->fd_, &st).ok()) {
    p->fd_ = -1;
    return Status::NotFound("no saved index at " + path);
  }
  p->device_ = st.st_dev;
  p->inode_ = st.st_ino;
  const uint64_t file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < kIndexPage) return Status::Corruption("index file " + path + ": truncated");
  p->header_page_.resize(kIndexPage);
  LMDBLOADER_RETURN_IF_ERROR(p->ReadAt(p->header_page_.data(), kIndexPage, 0));
  LMDBLOADER_RETURN_IF_ERROR(DecodeIndexHeader(p->header_page_, path, file_size, &p->header_));
  if (!(p->header_.identity == expected) || p->header_.db_name != db_name)
    return Status::NotFound("saved index " + path + " is stale");
  std::string meta(p->header_.meta_bytes, '\0');
  LMDBLOADER_RETURN_IF_ERROR(p->ReadAt(meta.data(), meta.size(), p->header_.meta_offset));
  LMDBLOADER_RETURN_IF_ERROR(DecodeIndexMeta(meta, p->header_, path, &p->meta_));

  p->capacity_ = static_cast<uint32_t>(std::clamp<uint64_t>(cache_bytes / kIndexPage, 1, 1u << 20));
  // Anonymous memory, touched page by page as the cache fills: an idle or
  // small index costs no RSS for the room it may use.
  void* slots = ::mmap(nullptr, p->cache_capacity(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) return Status::FromErrno(errno, "mmap", "the page cache of " + path);
  p->slots_ = static_cast<char*>(slots);
  p->slot_page_.assign(p->capacity_, kNoPage);
  p->referenced_.assign(p->capacity_, 0);
  *out = std::move(p);
  return Status::OK();
}

PagedIndex::~PagedIndex() {
  if (fd_ >= 0) ::close(fd_);
  if (slots_ != nullptr) ::munmap(slots_, cache_capacity());
}

bool PagedIndex::HoldsFile(int fd) const {
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_dev != device_ || st.st_ino != inode_ ||
      static_cast<uint64_t>(st.st_size) != header_.file_size)
    return false;
  std::string page(kIndexPage, '\0');
  return ::pread(fd, page.data(), kIndexPage, 0) == static_cast<ssize_t>(kIndexPage) && page == header_page_;
}

Status PagedIndex::Reopen() {
  // In the child only one thread runs: a lock another thread of the parent
  // held at fork() stays held here, so the lock starts anew.
  new (&mu_) std::mutex();
  // The descriptor inherited across fork() still holds the file this index
  // opened and checked, though its name be gone (a cleaner emptied the
  // cache directory mid-run) or name another file since (a newer index):
  // pread shares no offset, so it serves the child as it is.
  if (HoldsFile(fd_)) return Status::OK();
  // A caller closed descriptors it does not own (and may have reused the
  // number): the file again by its name, while it is still the same index.
  int fd = -1;
  struct stat st;
  const Status opened = OpenReadOnly(path_, &fd, &st);
  if (opened.sys_errno() == ENOENT) return Status::NotFound("the saved index " + path_ + " is gone");
  LMDBLOADER_RETURN_IF_ERROR(opened);
  std::string page(kIndexPage, '\0');
  ssize_t n = static_cast<uint64_t>(st.st_size) == header_.file_size ? ::pread(fd, page.data(), kIndexPage, 0) : -1;
  if (n != static_cast<ssize_t>(kIndexPage) || page != header_page_) {
    ::close(fd);
    return Status::Corruption("index file " + path_ + " was replaced while it was in use; reopen the database");
  }
  fd_ = fd;
  device_ = st.st_dev;
  inode_ = st.st_ino;
  return Status::OK();
}

Status PagedIndex::ReadAt(char* dst, uint64_t size, uint64_t offset) const {
  uint64_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd_, dst + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::FromErrno(errno, "read", path_);
    if (n == 0) return Status::Corruption("index file " + path_ + ": truncated while in use");
    done += static_cast<uint64_t>(n);
  }
  return Status::OK();
}

Status PagedIndex::ReadLeaves(LeafTable* leaves) const {
  std::string bytes(header_.leaf_bytes, '\0');
  LMDBLOADER_RETURN_IF_ERROR(ReadAt(bytes.data(), bytes.size(), header_.leaf_offset));
  if (Checksum(bytes) != header_.leaf_sum)
    return Status::Corruption("index file " + path_ + ": its table of leaf pages is damaged (checksum mismatch)");
  const LeafPageFormat format{header_.identity.page_size, header_.identity.page_header};
  return LeafTable::Decode(bytes, header_.records, format, path_, leaves);
}

uint64_t PagedIndex::cache_held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return uint64_t{used_} * kIndexPage;
}

Status PagedIndex::Page(uint64_t page, const char** data) const {
  auto it = where_.find(page);
  if (it != where_.end()) {
    referenced_[it->second] = 1;
    hits_.fetch_add(1, std::memory_order_relaxed);
    *data = slots_ + uint64_t{it->second} * kIndexPage;
    return Status::OK();
  }
  // CLOCK: the first slot not referenced since the hand last passed.
  uint32_t slot;
  if (used_ < capacity_) {
    slot = used_++;
  } else {
    while (referenced_[hand_]) {
      referenced_[hand_] = 0;
      hand_ = (hand_ + 1) % capacity_;
    }
    slot = hand_;
    hand_ = (hand_ + 1) % capacity_;
    where_.erase(slot_page_[slot]);
    slot_page_[slot] = kNoPage;
  }
  char* dst = slots_ + uint64_t{slot} * kIndexPage;
  const uint64_t offset = page * kIndexPage;
  LMDBLOADER_RETURN_IF_ERROR(ReadAt(dst, kIndexPage, offset));
  page_reads_.fetch_add(1, std::memory_order_relaxed);
  if (offset >= header_.blob_offset && offset < header_.meta_offset) {
    const uint64_t blob_page = (offset - header_.blob_offset) / kIndexPage;
    uint64_t sum = 0;
    std::memcpy(&sum, dst + kBlobPayload, 8);
    if (BlobPageSum(dst, blob_page) != sum)
      return Status::Corruption("index file " + path_ + ": key page " + std::to_string(blob_page) + " is damaged");
  }
  slot_page_[slot] = page;
  referenced_[slot] = 1;
  where_[page] = slot;
  *data = dst;
  return Status::OK();
}

Status PagedIndex::Locate(const uint64_t* records, size_t count, ValueLocation* out, BatchIo* io) const {
  // Entries alone on their index page, read after the lock is let go.
  std::vector<size_t> lone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<size_t> missing;
    for (size_t k = 0; k < count; ++k) {
      const uint64_t offset = header_.EntryOffset(records[k]);
      auto it = where_.find(offset / kIndexPage);
      if (it == where_.end()) {
        missing.push_back(k);
        continue;
      }
      referenced_[it->second] = 1;
      hits_.fetch_add(1, std::memory_order_relaxed);
      IndexEntry e;
      LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(slots_ + uint64_t{it->second} * kIndexPage + offset % kIndexPage,
                                                  records[k], header_, path_, &e));
      out[k] = ValueLocation{e.offset, e.size};
    }
    if (!missing.empty()) {
      const uint64_t per_page = header_.entries_per_page();
      std::sort(missing.begin(), missing.end(),
                [&](size_t a, size_t b) { return records[a] / per_page < records[b] / per_page; });
      for (size_t m = 0; m < missing.size();) {
        size_t end = m + 1;
        while (end < missing.size() && records[missing[end]] / per_page == records[missing[m]] / per_page) ++end;
        if (end - m == 1) {
          lone.push_back(missing[m]);
        } else {
          const char* page = nullptr;
          LMDBLOADER_RETURN_IF_ERROR(Page(header_.EntryOffset(records[missing[m]]) / kIndexPage, &page));
          for (size_t j = m; j < end; ++j) {
            const size_t k = missing[j];
            IndexEntry e;
            LMDBLOADER_RETURN_IF_ERROR(
                DecodeIndexEntry(page + header_.EntryOffset(records[k]) % kIndexPage, records[k], header_, path_, &e));
            out[k] = ValueLocation{e.offset, e.size};
          }
        }
        m = end;
      }
    }
  }
  if (lone.empty()) return Status::OK();
  entry_reads_.fetch_add(lone.size(), std::memory_order_relaxed);
  // One read per lone entry, all in flight at once where an engine is given:
  // from the page cache they cost a system call's worth each, from a cold
  // device the queue depth the data reads get.
  const uint32_t size = header_.entry_size;
  std::vector<char> bytes(lone.size() * size);
  if (io != nullptr && lone.size() > 1) {
    std::vector<ReadRequest> requests(lone.size());
    for (size_t j = 0; j < lone.size(); ++j) {
      ReadRequest& r = requests[j];
      r.fd = fd_;
      r.offset = header_.EntryOffset(records[lone[j]]);
      r.size = size;
      r.dst = bytes.data() + j * size;
      r.path = &path_;
    }
    LMDBLOADER_RETURN_IF_ERROR(io->ReadAll(requests.data(), requests.size()));
  } else {
    for (size_t j = 0; j < lone.size(); ++j)
      LMDBLOADER_RETURN_IF_ERROR(ReadAt(bytes.data() + j * size, size, header_.EntryOffset(records[lone[j]])));
  }
  for (size_t j = 0; j < lone.size(); ++j) {
    const size_t k = lone[j];
    IndexEntry e;
    LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(bytes.data() + j * size, records[k], header_, path_, &e));
    out[k] = ValueLocation{e.offset, e.size};
  }
  return Status::OK();
}

Status PagedIndex::KeyLocked(uint64_t i, std::string* key) const {
  const uint64_t offset = header_.EntryOffset(i);
  const char* page = nullptr;
  LMDBLOADER_RETURN_IF_ERROR(Page(offset / kIndexPage, &page));
  IndexEntry e;
  LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(page + offset % kIndexPage, i, header_, path_, &e));
  key->resize(e.key_size);
  const uint64_t first_blob_page = header_.blob_offset / kIndexPage;
  for (uint64_t done = 0; done < e.key_size;) {
    const uint64_t at = e.key_begin + done;
    const char* blob = nullptr;
    LMDBLOADER_RETURN_IF_ERROR(Page(first_blob_page + at / kBlobPayload, &blob));
    const uint64_t n = std::min<uint64_t>(e.key_size - done, kBlobPayload - at % kBlobPayload);
    std::memcpy(key->data() + done, blob + at % kBlobPayload, n);
    done += n;
  }
  return Status::OK();
}

Status PagedIndex::Key(uint64_t i, std::string* key) const {
  if (header_.sequential_keys()) return Status::InvalidArgument("index file " + path_ + " stores no keys");
  std::lock_guard<std::mutex> lock(mu_);
  return KeyLocked(i, key);
}

Status PagedIndex::LowerBound(std::string_view key, uint64_t* position) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t lo = 0, hi = size();
  std::string probe;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    LMDBLOADER_RETURN_IF_ERROR(KeyLocked(mid, &probe));
    // std::string_view compares bytes as unsigned char, then by length:
    // LMDB's default order.
    if (std::string_view(probe) < key) lo = mid + 1;
    else hi = mid;
  }
  *position = lo;
  return Status::OK();
}

Status PagedIndex::LoadResident(RecordIndex* index) const {
  RecordIndex loaded;
  loaded.identity = header_.identity;
  loaded.db_name = header_.db_name;
  loaded.set_keys_sorted(header_.keys_sorted());
  loaded.set_db_flags(header_.db_flags());
  loaded.sequential_keys_ = header_.sequential_keys();
  loaded.meta_ = meta_;
  const uint64_t n = size();
  loaded.offsets_.reserve(n);
  loaded.sizes_.reserve(n);
  if (!header_.sequential_keys()) {
    loaded.key_ends_.reserve(n);
    loaded.key_blob_.resize(header_.blob_bytes);
    const uint64_t pages = (header_.blob_bytes + kBlobPayload - 1) / kBlobPayload;
    constexpr uint64_t kPagesAtOnce = 256;
    std::string chunk;
    for (uint64_t first = 0; first < pages; first += kPagesAtOnce) {
      const uint64_t count = std::min(kPagesAtOnce, pages - first);
      chunk.resize(count * kIndexPage);
      LMDBLOADER_RETURN_IF_ERROR(ReadAt(chunk.data(), chunk.size(), header_.blob_offset + first * kIndexPage));
      for (uint64_t p = 0; p < count; ++p) {
        const char* page = chunk.data() + p * kIndexPage;
        uint64_t sum = 0;
        std::memcpy(&sum, page + kBlobPayload, 8);
        if (BlobPageSum(page, first + p) != sum)
          return Status::Corruption("index file " + path_ + ": key page " + std::to_string(first + p) + " is damaged");
        const uint64_t at = (first + p) * kBlobPayload;
        std::memcpy(loaded.key_blob_.data() + at, page, std::min(kBlobPayload, header_.blob_bytes - at));
      }
    }
  }
  Status keys = Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(ForEach([&](uint64_t i, const IndexEntry& e) {
    loaded.offsets_.push_back(e.offset);
    loaded.sizes_.push_back(e.size);
    if (!header_.sequential_keys()) {
      // The writer puts the keys back to back, in order.
      if (keys.ok() && e.key_begin != (i == 0 ? 0 : loaded.key_ends_.back()))
        keys = Status::Corruption("index file " + path_ + ": keys out of order at record " + std::to_string(i));
      loaded.key_ends_.push_back(e.key_begin + e.key_size);
    }
  }));
  LMDBLOADER_RETURN_IF_ERROR(keys);
  *index = std::move(loaded);
  return Status::OK();
}

Status PagedIndex::ForEach(const std::function<void(uint64_t, const ValueLocation&)>& fn) const {
  return ForEach([&](uint64_t i, const IndexEntry& e) { fn(i, ValueLocation{e.offset, e.size}); });
}

Status PagedIndex::ForEach(const std::function<void(uint64_t, const IndexEntry&)>& fn) const {
  const uint64_t per_page = header_.entries_per_page();
  std::string chunk;
  constexpr uint64_t kPagesAtOnce = 256;
  for (uint64_t first = 0; first < size(); first += per_page * kPagesAtOnce) {
    const uint64_t last = std::min(size(), first + per_page * kPagesAtOnce);
    const uint64_t pages = (last - first + per_page - 1) / per_page;
    chunk.resize(pages * kIndexPage);
    LMDBLOADER_RETURN_IF_ERROR(ReadAt(chunk.data(), chunk.size(), header_.EntryOffset(first)));
    for (uint64_t i = first; i < last; ++i) {
      IndexEntry e;
      LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(
          chunk.data() + (i - first) / per_page * kIndexPage + (i % per_page) * header_.entry_size, i, header_, path_,
          &e));
      fn(i, e);
    }
  }
  return Status::OK();
}

}  // namespace lmdbloader
