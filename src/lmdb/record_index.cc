#include "lmdb/record_index.h"

#include <algorithm>

#include "lmdb/leaf_table.h"
#include "lmdb/paged_index.h"
#include "lmdb/record_key.h"

namespace lmdbloader {

uint64_t RecordIndex::size() const { return paged_ ? paged_->size() : offsets_.size(); }

void RecordIndex::UsePaged(std::shared_ptr<PagedIndex> paged) {
  const IndexHeader& h = paged->header();
  identity = h.identity;
  db_name = h.db_name;
  sequential_keys_ = h.sequential_keys();
  keys_sorted_ = h.keys_sorted();
  db_flags_ = h.db_flags();
  meta_ = paged->meta();
  offsets_ = {};
  sizes_ = {};
  key_blob_ = {};
  key_blob_.shrink_to_fit();
  key_ends_ = {};
  paged_ = std::move(paged);
}

void RecordIndex::Clear() {
  *this = RecordIndex();
  key_blob_.shrink_to_fit();
}

Status RecordIndex::ReopenFile() { return paged_ ? paged_->Reopen() : Status::OK(); }

Status RecordIndex::Locate(const uint64_t* records, size_t count, ValueLocation* out, BatchIo* io) const {
  if (paged_) return paged_->Locate(records, count, out, io);
  for (size_t k = 0; k < count; ++k) out[k] = ValueLocation{offsets_[records[k]], sizes_[records[k]]};
  return Status::OK();
}

Status RecordIndex::Add(std::string_view key, uint64_t offset, uint32_t size) {
  uint64_t n = offsets_.size();
  if (sequential_keys_) {
    uint64_t number = 0;
    if (!ParseRecordKey(key, &number) || number != n) {
      // First key that is not the record number: materialize the keys so far.
      sequential_keys_ = false;
      key_blob_.reserve(n * 8 + key.size());
      key_ends_.reserve(n + 1);
      for (uint64_t j = 0; j < n; ++j) {
        key_blob_ += RecordKey(j);
        key_ends_.push_back(key_blob_.size());
      }
    }
  }
  if (!sequential_keys_) {
    key_blob_.append(key.data(), key.size());
    key_ends_.push_back(key_blob_.size());
  }
  offsets_.push_back(offset);
  sizes_.push_back(size);
  return Status::OK();
}

Status RecordIndex::AddMeta(std::string_view key, uint64_t offset, uint32_t size) {
  meta_[std::string(key)] = ValueLocation{offset, size};
  return Status::OK();
}

std::string_view RecordIndex::StoredKey(uint64_t i) const {
  uint64_t begin = i == 0 ? 0 : key_ends_[i - 1];
  return std::string_view(key_blob_).substr(begin, key_ends_[i] - begin);
}

Status RecordIndex::Key(uint64_t i, std::string* key) const {
  if (sequential_keys_) *key = RecordKey(i);
  else if (paged_) return paged_->Key(i, key);
  else *key = std::string(StoredKey(i));
  return Status::OK();
}

Status RecordIndex::Find(std::string_view key, bool* found, uint64_t* i) const {
  *found = false;
  if (sequential_keys_) {
    uint64_t number = 0;
    if (!ParseRecordKey(key, &number) || number >= size()) return Status::OK();
    *i = number;
    *found = true;
    return Status::OK();
  }
  if (!keys_sorted_) {
    // MDB_INTEGERKEY / MDB_REVERSEKEY: the keys are not in byte order; scan.
    std::string stored;
    for (uint64_t j = 0; j < size(); ++j) {
      if (paged_) LMDBLOADER_RETURN_IF_ERROR(paged_->Key(j, &stored));
      if ((paged_ ? std::string_view(stored) : StoredKey(j)) == key) {
        *i = j;
        *found = true;
        return Status::OK();
      }
    }
    return Status::OK();
  }
  uint64_t pos = 0;
  LMDBLOADER_RETURN_IF_ERROR(LowerBound(key, &pos));
  if (pos >= size()) return Status::OK();
  if (paged_) {
    std::string stored;
    LMDBLOADER_RETURN_IF_ERROR(paged_->Key(pos, &stored));
    *found = stored == key;
  } else {
    *found = StoredKey(pos) == key;
  }
  if (*found) *i = pos;
  return Status::OK();
}

Status RecordIndex::LowerBound(std::string_view key, uint64_t* position) const {
  if (paged_ && !sequential_keys_) return paged_->LowerBound(key, position);
  uint64_t lo = 0, hi = size();
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    // std::string_view compares bytes as unsigned char, then by length: the
    // same order as LMDB's default comparator.
    bool less = sequential_keys_ ? std::string_view(RecordKey(mid)) < key : StoredKey(mid) < key;
    if (less) lo = mid + 1;
    else hi = mid;
  }
  *position = lo;
  return Status::OK();
}

uint64_t RecordIndex::MemoryBytes() const {
  if (paged_) return paged_->cache_capacity() + (leaves_ ? leaves_->MemoryBytes() : 0);
  // An empty string's capacity is its inline buffer, not the heap's.
  return offsets_.capacity() * sizeof(uint64_t) + sizes_.capacity() * sizeof(uint32_t) +
         (key_blob_.empty() ? 0 : key_blob_.capacity()) +
         key_ends_.capacity() * sizeof(uint64_t);
}

}  // namespace lmdbloader
