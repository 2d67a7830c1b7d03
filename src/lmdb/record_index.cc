#include "lmdb/record_index.h"

#include <algorithm>

#include "lmdb/record_key.h"

namespace lmdbloader {

void RecordIndex::Add(std::string_view key, uint64_t offset, uint32_t size) {
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
}

void RecordIndex::AddMeta(std::string_view key, uint64_t offset, uint32_t size) {
  meta_[std::string(key)] = ValueLocation{offset, size};
}

std::string_view RecordIndex::StoredKey(uint64_t i) const {
  uint64_t begin = i == 0 ? 0 : key_ends_[i - 1];
  return std::string_view(key_blob_).substr(begin, key_ends_[i] - begin);
}

std::string RecordIndex::Key(uint64_t i) const {
  return sequential_keys_ ? RecordKey(i) : std::string(StoredKey(i));
}

bool RecordIndex::Find(std::string_view key, uint64_t* i) const {
  if (sequential_keys_) {
    uint64_t number = 0;
    if (!ParseRecordKey(key, &number) || number >= size()) return false;
    *i = number;
    return true;
  }
  if (!keys_sorted_) {
    for (uint64_t j = 0; j < size(); ++j) {
      if (StoredKey(j) == key) {
        *i = j;
        return true;
      }
    }
    return false;
  }
  uint64_t pos = LowerBound(key);
  if (pos < size() && StoredKey(pos) == key) {
    *i = pos;
    return true;
  }
  return false;
}

uint64_t RecordIndex::LowerBound(std::string_view key) const {
  uint64_t lo = 0, hi = size();
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    // std::string_view compares bytes as unsigned char, then by length: the
    // same order as LMDB's default comparator.
    bool less = sequential_keys_ ? std::string_view(RecordKey(mid)) < key
                                 : StoredKey(mid) < key;
    if (less) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

uint64_t RecordIndex::MemoryBytes() const {
  return offsets_.capacity() * sizeof(uint64_t) + sizes_.capacity() * sizeof(uint32_t) +
         key_blob_.capacity() + key_ends_.capacity() * sizeof(uint64_t);
}

}  // namespace lmdbloader
