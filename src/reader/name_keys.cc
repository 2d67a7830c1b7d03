#include "reader/name_keys.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace lmdbloader {

Status NameKeys::Build(std::string blob, std::string_view offsets, uint64_t records, const std::string& where,
                       NameKeys* out) {
  auto damaged = [&](const std::string& what) { return Status::Corruption("corpus " + where + ": " + what); };
  if (offsets.size() != (records + 1) * 8) return damaged("name offsets do not match the record count");
  NameKeys keys;
  keys.ends_.resize(records);
  uint64_t previous = 0;
  std::memcpy(&previous, offsets.data(), 8);
  if (previous != 0) return damaged("bad name offsets");
  for (uint64_t i = 0; i < records; ++i) {
    uint64_t end = 0;
    std::memcpy(&end, offsets.data() + (i + 1) * 8, 8);
    if (end < previous || end > blob.size()) return damaged("bad name offsets");
    keys.ends_[i] = previous = end;
  }
  keys.blob_ = std::move(blob);
  bool sorted = true;
  for (uint64_t i = 1; i < records && sorted; ++i) sorted = keys.Name(i - 1) < keys.Name(i);
  if (!sorted) {
    keys.by_name_.resize(records);
    std::iota(keys.by_name_.begin(), keys.by_name_.end(), uint64_t{0});
    std::sort(keys.by_name_.begin(), keys.by_name_.end(),
              [&keys](uint64_t a, uint64_t b) { return keys.Name(a) < keys.Name(b); });
    for (uint64_t i = 1; i < records; ++i)
      if (keys.Name(keys.by_name_[i - 1]) == keys.Name(keys.by_name_[i]))
        return damaged("records " + std::to_string(keys.by_name_[i - 1]) + " and " +
                       std::to_string(keys.by_name_[i]) + " have the same name");
  }
  *out = std::move(keys);
  return Status::OK();
}

std::string_view NameKeys::Name(uint64_t i) const {
  const uint64_t begin = i == 0 ? 0 : ends_[i - 1];
  return std::string_view(blob_).substr(begin, ends_[i] - begin);
}

uint64_t NameKeys::Rank(std::string_view name) const {
  // std::string_view compares bytes as unsigned char, then by length: LMDB's
  // default order, the one `convert --order sorted` writes.
  uint64_t lo = 0, hi = size();
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (Name(sorted() ? mid : by_name_[mid]) < name) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

uint64_t NameKeys::LowerBound(std::string_view name) const {
  const uint64_t rank = Rank(name);
  return rank >= size() || sorted() ? rank : by_name_[rank];
}

bool NameKeys::Find(std::string_view name, uint64_t* i) const {
  const uint64_t position = LowerBound(name);
  if (position >= size() || Name(position) != name) return false;
  *i = position;
  return true;
}

uint64_t NameKeys::MemoryBytes() const {
  return blob_.capacity() + ends_.capacity() * sizeof(uint64_t) + by_name_.capacity() * sizeof(uint64_t);
}

}  // namespace lmdbloader
