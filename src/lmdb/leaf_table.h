// LeafTable: the LMDB leaf pages of a database's records, in key order, so
// that a read of a small record can take its value straight out of its leaf
// page: one read a record where a paged index needs two (its entry in the
// saved index, then the value).
//
// Why: a random read of a 64-byte record under a paged index costs a pread
// of its index entry and a pread of its value, each a page-cache lookup of
// its own; a C measurement over 10^7 py-lmdb records (docs/NOTES.md, "The
// record index at scale") found the leaf page alone, the value copied out of
// it, 1.6-2.8x faster than the entry then the value, and the leaf then the
// value not worth it. The table costs 8 bytes a leaf page (page number and
// the ordinal of its first record): 1.6 MB for 10^7 records of 64 B, 49
// records a leaf, where the resident index costs 29 bytes a record.
//
// A leaf is usable when every node on it is a record whose value lies inline
// (no overflow value, no named database, no corpus metadata, no duplicates):
// record r of leaf k is then node r - first(k), and the leaf holds exactly
// first(k + 1) - first(k) nodes. Other leaves are kept as unusable (page 0),
// and their records are located through the index as before.
//
// Immutable once built: safe for concurrent const use.
#ifndef LMDBLOADER_SRC_LMDB_LEAF_TABLE_H_
#define LMDBLOADER_SRC_LMDB_LEAF_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Bytes each leaf costs, held or saved: its page number and first record,
// 32 bits each (a table is not built past 2^32 pages or records).
inline constexpr uint64_t kLeafEntryBytes = 8;

// Where a record sits: its leaf page, its node there and the leaf's node count.
struct LeafSpot {
  uint64_t pgno = 0;
  uint32_t node = 0;
  uint32_t nodes = 0;
};

// The shape of the pages a LeafTable's leaves are checked against.
struct LeafPageFormat {
  uint32_t page_size = 0;
  uint32_t header_size = 16;  // LMDB 0.9: 16; LMDB 1.0 (data format 3): 24
};

class LeafTable {
 public:
  // Builder side, fed by the index walk in key order: every item of the tree
  // (records and corpus metadata alike) with the leaf page it sits on, and
  // whether it is a record whose value lies inline on that leaf.
  void Note(uint64_t leaf_pgno, bool record, bool inline_record);
  // After the last item. An empty table when nothing is usable or a page
  // number or record count needs more than 32 bits.
  void Finish();

  // Unusable leaves included.
  uint64_t leaves() const { return pgnos_.size(); }
  uint64_t usable_leaves() const { return usable_; }
  uint64_t records() const { return records_; }
  bool empty() const { return usable_ == 0; }
  uint64_t MemoryBytes() const { return (pgnos_.capacity() + firsts_.capacity()) * 4; }

  // Record `record`'s leaf, node and the leaf's node count; false when it
  // lies on an unusable leaf (or past the table).
  bool Find(uint64_t record, LeafSpot* spot) const {
    if (record >= records_ || pgnos_.empty()) return false;
    // The last leaf whose first record is <= record.
    size_t lo = 0, hi = firsts_.size();
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      if (firsts_[mid] <= record) lo = mid;
      else hi = mid;
    }
    if (pgnos_[lo] == 0) return false;
    const uint64_t end = lo + 1 < firsts_.size() ? firsts_[lo + 1] : records_;
    spot->pgno = pgnos_[lo];
    spot->node = static_cast<uint32_t>(record - firsts_[lo]);
    spot->nodes = static_cast<uint32_t>(end - firsts_[lo]);
    return true;
  }

  // The saved form: per leaf, page number and first record (u32 each,
  // little-endian); Decode checks that first records rise from 0 and stay
  // below `records`, and page numbers are 0 or at least 2.
  std::string Encode() const;
  static Status Decode(std::string_view bytes, uint64_t records, const std::string& path, LeafTable* table);

 private:
  void Close();  // ends the leaf being noted

  std::vector<uint32_t> pgnos_;   // 0: unusable
  std::vector<uint32_t> firsts_;  // first record of each leaf
  uint64_t records_ = 0;
  uint64_t usable_ = 0;
  // Building.
  uint64_t current_pgno_ = 0;
  uint64_t current_first_ = 0;
  bool current_usable_ = false;
  bool open_ = false;
  bool too_large_ = false;
};

// The value of node `spot.node` of leaf page `page` (format.page_size bytes
// read from page spot.pgno of the data file `path`): *at (its offset in the
// page) and *size. Checks the page header (its page number, a plain leaf,
// free-space bounds, exactly spot.nodes nodes), the node's offset, flags
// (an inline value) and bounds, and with `key` (not null) that the node's
// key is that one. Corruption naming `path` and the page otherwise: the
// file is not what the table was built from.
Status LeafValue(const char* page, const LeafSpot& spot, const LeafPageFormat& format, const std::string* key,
                 const std::string& path, uint32_t* at, uint32_t* size);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_LEAF_TABLE_H_
