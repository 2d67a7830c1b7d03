// PagedIndex: a saved record index (index_format.h) read where it lies, a few
// bytes a record as reads need them, instead of held in memory.
//
// Why: a resident index costs 12 bytes a record plus the keys of a foreign
// database (29 bytes a record for py-lmdb's b"%09d" keys) in every process,
// 2.8 GB per DataLoader worker at 10^8 records. The saved file is read with
// pread from the page cache, which no process's RSS counts (the same reason
// the data are read with pread), so a process holds only this object's page
// cache: a fixed number of 4 KiB pages, whatever the record count.
//
// Reads: a batch's entries that share an index page load that page into the
// cache (sequential and sorted batches: one read for up to 256 records); an
// entry alone on its page is read alone (16 or 24 bytes), which leaves the
// cache to the pages that are read again: the upper probes of key lookups.
// Every entry is checked (its 32-bit check, its bounds) as it is read, and
// every key page by its sum, so a damaged index file gives Corruption naming
// it, never a wrong record.
//
// Safe for concurrent use: the cache is behind a mutex, reads of lone entries
// are made outside it. After fork() the child reads through the descriptor
// it inherited (Reopen), which holds the file even once its name is gone.
#ifndef LMDBLOADER_SRC_LMDB_PAGED_INDEX_H_
#define LMDBLOADER_SRC_LMDB_PAGED_INDEX_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lmdb/index_format.h"
#include "lmdb/leaf_table.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

class BatchIo;

class PagedIndex {
 public:
  // Opens the index file `path`: reads and checks its header and metadata
  // (nothing per record, so opening takes the same time for any record
  // count). NotFound when the file is absent, of an older version, or
  // describes another state of the data file than `expected` or another
  // database than `db_name`; Corruption naming it when it is damaged.
  // `cache_bytes`: the most its page cache holds (at least one page).
  static Status Open(const std::string& path, const FileIdentity& expected, const std::string& db_name,
                     uint64_t cache_bytes, std::unique_ptr<PagedIndex>* out);
  ~PagedIndex();
  PagedIndex(const PagedIndex&) = delete;
  PagedIndex& operator=(const PagedIndex&) = delete;

  const IndexHeader& header() const { return header_; }
  const std::map<std::string, ValueLocation>& meta() const { return meta_; }
  const std::string& path() const { return path_; }
  uint64_t size() const { return header_.records; }

  // Where records[k] lies, for each k (each < size()). `io` (may be null)
  // reads the lone entries of a batch together, many in flight.
  Status Locate(const uint64_t* records, size_t count, ValueLocation* out, BatchIo* io = nullptr) const;
  // Stored key of record i (keys that are not record numbers).
  Status Key(uint64_t i, std::string* key) const;
  // First position whose key is >= key (size() when none), keys sorted bytewise.
  Status LowerBound(std::string_view key, uint64_t* position) const;
  // Calls fn(i, location) for every record in order, reading the entries a
  // page at a time past the cache.
  Status ForEach(const std::function<void(uint64_t, const ValueLocation&)>& fn) const;

  // The whole index into a resident one, read a chunk at a time (its final
  // size and 1 MiB beside it; reading the file whole first held it twice).
  // Corruption naming the file when an entry or key page is damaged.
  Status LoadResident(RecordIndex* index) const;

  // The saved table of leaf pages (leaf_table.h), read whole and checked
  // (its sum, its order): empty when the file has none. Corruption naming
  // the file when damaged.
  Status ReadLeaves(LeafTable* leaves) const;
  uint64_t leaf_table_bytes() const { return header_.leaf_bytes; }

  // After fork(), in the child: the cache's lock made anew (a thread of the
  // parent may have held it at the fork), and the inherited descriptor kept
  // while it still holds the file opened (the same inode, size and header
  // page), whether or not its name is still there. Only where the
  // descriptor was closed (or its number reused) is the file opened again by
  // its name: NotFound when the name is gone, Corruption when it names
  // another file.
  Status Reopen();

  uint64_t cache_capacity() const { return static_cast<uint64_t>(capacity_) * kIndexPage; }
  uint64_t cache_held() const;  // bytes of pages the cache holds now
  uint64_t page_reads() const { return page_reads_.load(std::memory_order_relaxed); }
  uint64_t entry_reads() const { return entry_reads_.load(std::memory_order_relaxed); }
  uint64_t cache_hits() const { return hits_.load(std::memory_order_relaxed); }

 private:
  PagedIndex() = default;
  // The cached copy of file page `page` (reading it on a miss); mu_ held.
  Status Page(uint64_t page, const char** data) const;
  Status ReadAt(char* dst, uint64_t size, uint64_t offset) const;
  // Whether descriptor `fd` holds the file this index opened.
  bool HoldsFile(int fd) const;
  Status KeyLocked(uint64_t i, std::string* key) const;
  Status ForEach(const std::function<void(uint64_t, const IndexEntry&)>& fn) const;

  std::string path_;
  int fd_ = -1;
  dev_t device_ = 0;  // the file fd_ holds, to recognise it after fork
  ino_t inode_ = 0;
  IndexHeader header_;
  std::string header_page_;  // as read, to recognise the file after fork
  std::map<std::string, ValueLocation> meta_;

  mutable std::mutex mu_;
  uint32_t capacity_ = 0;                           // pages
  char* slots_ = nullptr;                           // capacity_ pages, anonymous memory touched as used
  mutable std::vector<uint64_t> slot_page_;         // file page held by each slot (UINT64_MAX: none)
  mutable std::vector<uint8_t> referenced_;         // CLOCK's bits
  mutable std::unordered_map<uint64_t, uint32_t> where_;  // file page -> slot
  mutable uint32_t hand_ = 0;
  mutable uint32_t used_ = 0;
  mutable std::atomic<uint64_t> page_reads_{0}, entry_reads_{0}, hits_{0};
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_PAGED_INDEX_H_
