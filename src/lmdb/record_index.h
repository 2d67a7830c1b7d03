// RecordIndex: where each record's value lies in the data file.
//
// Built once by a cursor walk (index_builder.h) or loaded from a saved file
// (index_file.h). Two forms behind one interface:
//  - resident: holds, per record in key order, the value's file offset and
//    size (12 bytes), and the keys compactly (one buffer plus end offsets)
//    unless the keys are the corpus record numbers 0..n-1, which are
//    computed instead;
//  - paged: reads the saved index file as reads need it (paged_index.h),
//    holding a page cache of fixed size whatever the record count.
// Which one a Reader uses is ReaderOptions::index_residence's rule.
// Immutable after building: safe for concurrent const use.
#ifndef LMDBLOADER_SRC_RECORD_INDEX_H_
#define LMDBLOADER_SRC_RECORD_INDEX_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// What identifies the exact state of a data file; a saved index is valid only
// for an equal identity.
struct FileIdentity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  // The inode's change time: every write moves it, and unlike the mtime no
  // tool puts it back (`rsync -t --inplace` and `tar -x` restore the mtime of
  // a file they rewrote in place). A chmod, chown or new hard link moves it too.
  int64_t ctime_ns = 0;
  uint64_t txnid = 0;      // LMDB's last committed transaction
  uint32_t page_size = 0;  // LMDB page size
  uint32_t page_header = 16;  // LMDB's page header: 16 bytes (LMDB 0.9) or 24 (1.0)
  // XXH3-64 of the meta page read (its trees, last page and transaction id):
  // a file of the same size and mtime on a recycled inode still differs here.
  uint64_t meta_sum = 0;
  bool operator==(const FileIdentity& o) const {
    return device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns &&
           txnid == o.txnid && page_size == o.page_size && page_header == o.page_header && meta_sum == o.meta_sum;
  }
};

struct ValueLocation {
  uint64_t offset = 0;
  uint64_t size = 0;
};

// Where a walk of the database puts what it finds: a resident index, or a
// writer of the saved file (index_writer.h).
class IndexSink {
 public:
  virtual ~IndexSink() = default;
  // The next record in key order.
  virtual Status Add(std::string_view key, uint64_t offset, uint32_t size) = 0;
  // Metadata entries of a corpus, keyed by their full key.
  virtual Status AddMeta(std::string_view key, uint64_t offset, uint32_t size) = 0;
};

class BatchIo;
class LeafTable;
class PagedIndex;

class RecordIndex : public IndexSink {
 public:
  uint64_t size() const;
  bool paged() const { return paged_ != nullptr; }
  const PagedIndex* paged_index() const { return paged_.get(); }
  // The paged form of a saved index: `paged` takes the place of the records.
  void UsePaged(std::shared_ptr<PagedIndex> paged);
  // A paged index's table of leaf pages (leaf_table.h), held beside it so
  // that reads take small values out of their leaves; null when not held.
  void UseLeaves(std::shared_ptr<const LeafTable> leaves) { leaves_ = std::move(leaves); }
  const LeafTable* leaves() const { return leaves_.get(); }
  // Empty, and holding no memory (assigning an empty index would leave the
  // key buffer's allocation in place: a string moved from a short one keeps it).
  void Clear();
  // After fork(): a paged index's own descriptor (nothing for a resident one).
  Status ReopenFile();

  // Where records[k] lies, for each k (each < size()). Corruption naming the
  // index file when a paged index meets a damaged entry.
  // `io` (may be null): a paged index reads a batch's entries with it.
  Status Locate(const uint64_t* records, size_t count, ValueLocation* out, BatchIo* io = nullptr) const;
  Status Locate(uint64_t i, ValueLocation* out) const { return Locate(&i, 1, out); }
  // Resident form only.
  uint64_t offset(uint64_t i) const { return offsets_[i]; }
  uint32_t value_size(uint64_t i) const { return sizes_[i]; }

  // Room for `n` records, so that building does not hold twice the index
  // while a vector grows.
  void Reserve(uint64_t n) {
    offsets_.reserve(n);
    sizes_.reserve(n);
  }
  // Appends the next record in key order (resident form).
  Status Add(std::string_view key, uint64_t offset, uint32_t size) override;
  Status AddMeta(std::string_view key, uint64_t offset, uint32_t size) override;
  const std::map<std::string, ValueLocation>& meta() const { return meta_; }

  bool sequential_keys() const { return sequential_keys_; }
  // Keys sort bytewise (LMDB's default comparator); false for MDB_INTEGERKEY
  // or MDB_REVERSEKEY databases, whose lookups then scan.
  bool keys_sorted() const { return keys_sorted_; }
  void set_keys_sorted(bool sorted) { keys_sorted_ = sorted; }
  // LMDB's flags of the database (MDB_DUPSORT, MDB_INTEGERKEY, ...). With
  // MDB_DUPSORT a key repeats once per duplicate, in LMDB's order.
  uint16_t db_flags() const { return db_flags_; }
  void set_db_flags(uint16_t flags) { db_flags_ = flags; }

  // Key of record i (i < size()).
  Status Key(uint64_t i, std::string* key) const;
  // Position of `key` in *i and *found true; *found false when absent.
  Status Find(std::string_view key, bool* found, uint64_t* i) const;
  // First position whose key is >= `key` (size() when none).
  Status LowerBound(std::string_view key, uint64_t* position) const;

  // Bytes this index holds or may hold in memory: the resident arrays, or a
  // paged index's page cache and its table of leaves.
  uint64_t MemoryBytes() const;

  FileIdentity identity;
  std::string db_name;

 private:
  friend class IndexFileCodec;
  friend class PagedIndex;  // LoadResident
  std::string_view StoredKey(uint64_t i) const;

  std::shared_ptr<PagedIndex> paged_;
  std::shared_ptr<const LeafTable> leaves_;

  std::vector<uint64_t> offsets_;
  std::vector<uint32_t> sizes_;
  bool sequential_keys_ = true;
  bool keys_sorted_ = true;
  uint16_t db_flags_ = 0;
  std::string key_blob_;            // concatenated keys (when not sequential)
  std::vector<uint64_t> key_ends_;  // end of key i in key_blob_
  std::map<std::string, ValueLocation> meta_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_RECORD_INDEX_H_
