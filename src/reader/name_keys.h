// NameKeys: the keys of a corpus keyed by names (lmdbloader/corpus_keys.h),
// held in memory as the record index holds a plain LMDB's keys: one buffer
// of the names and the end of each. Lookups are binary searches, over the
// names themselves when they are in byte order (what `convert --order
// sorted` writes), else over a sorted permutation (8 bytes a record more).
// Immutable once built: safe to read from many threads.
#ifndef LMDBLOADER_SRC_READER_NAME_KEYS_H_
#define LMDBLOADER_SRC_READER_NAME_KEYS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

class NameKeys {
 public:
  // `blob` holds the names back to back; `offsets` is the corpus's
  // names.offsets value (records + 1 little-endian uint64, the first 0).
  // Corruption naming `where` when the offsets do not describe `blob`, or a
  // name repeats (a corpus's names are unique).
  static Status Build(std::string blob, std::string_view offsets, uint64_t records, const std::string& where,
                      NameKeys* out);

  uint64_t size() const { return ends_.size(); }
  std::string_view Name(uint64_t i) const;
  // Position of `name`; false when absent.
  bool Find(std::string_view name, uint64_t* i) const;
  // Position of the smallest name >= `name` in byte order (size() when
  // none). When sorted(), every later position holds a larger name.
  uint64_t LowerBound(std::string_view name) const;
  bool sorted() const { return by_name_.empty(); }
  uint64_t MemoryBytes() const;

 private:
  uint64_t Rank(std::string_view name) const;  // names in byte order before `name`

  std::string blob_;
  std::vector<uint64_t> ends_;     // end of name i in blob_
  std::vector<uint64_t> by_name_;  // positions in name order; empty when already sorted
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_READER_NAME_KEYS_H_
