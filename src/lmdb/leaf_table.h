// LeafTable: the LMDB leaf pages of a database's records, in key order, so
// that a read of a small record can take its value straight out of its leaf
// page: one read a record where a paged index needs two (its entry in the
// saved index, then the value).
//
// Why: a random read of a 64-byte record under a paged index costs a pread
// of its index entry and a pread of its value, each a page-cache lookup of
// its own. Reading the record's leaf page whole and copying the value out of
// it (what a C measurement suggested: docs/NOTES.md, "The record index at
// scale") ran no faster in the reader, since copying 4 KiB out of the page
// cache took a third of the read; reading only the record's node (below)
// runs at the resident index's speed. The table costs 8 bytes a leaf page
// (page number and the ordinal of its first record): 1.7 MB for 10^7
// records of 64 B under 9-byte keys, 48 a leaf, where the resident index
// costs 29 bytes a record.
//
// A leaf is usable when every node on it is a record whose value lies inline
// (no overflow value, no named database, no corpus metadata, no duplicates):
// record r of leaf k is then node r - first(k), and the leaf holds exactly
// first(k + 1) - first(k) nodes. Other leaves are kept as unusable (page 0),
// and their records are located through the index as before.
//
// A usable leaf is also regular when its nodes have the table's one shape
// (key size, value size, and node j's value at value_top - j * stride in the
// page): LMDB's append (MDB_APPEND, what converters and putmulti(append=True)
// write) puts node j right below node j - 1, so equal records make every leaf
// regular. A regular record's node is then read alone (its 8-byte header, key
// and value: 81 bytes for a 64-byte record of a 9-byte key) instead of its
// page (4 KiB copied out of the page cache, a third of a read's time); its
// header and key size are checked, and its key where keys are record numbers.
//
// Values too large for a leaf (2 KiB and up with 4 KiB pages) lie on overflow
// pages, which the same append allocates one run after another: in a leaf of
// such records of one size, node j's run starts j * pages_per_value after node
// 0's. A table of that shape keeps node 0's run beside each leaf (12 bytes a
// leaf of ~150 records) and reads a record as its run's page header and value
// together, checking the header (page number, P_OVERFLOW, run length): one
// read where the paged index needs its entry too.
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

// Bytes each leaf costs, held or saved: its page number (31 bits, the top
// bit saying it is regular) and first record (32 bits), and in a table of
// overflow values node 0's overflow page (32 bits); a table is not built past
// 2^31 pages or 2^32 records. The saved form starts with the shape
// (kLeafShapeBytes).
inline constexpr uint64_t kLeafEntryBytes = 8;
inline constexpr uint64_t kOverflowLeafEntryBytes = 12;
inline constexpr uint64_t kLeafShapeBytes = 16;

// Where a record sits: its leaf page, its node there and the leaf's node
// count; for a regular leaf, where its node and its value lie in the file.
struct LeafSpot {
  uint64_t pgno = 0;
  uint32_t node = 0;
  uint32_t nodes = 0;
  bool regular = false;
  uint64_t node_offset = 0;   // regular: file offset of the node's header (or its overflow page's)
  uint64_t value_offset = 0;  // regular: file offset of its value
  uint64_t overflow_pgno = 0;  // regular, values on overflow pages: the value's first page
};

// The shape of the pages a LeafTable's leaves are checked against.
struct LeafPageFormat {
  uint32_t page_size = 0;
  uint32_t header_size = 16;  // LMDB 0.9: 16; LMDB 1.0 (data format 3): 24
};

// The one shape of a table's regular leaves' nodes.
struct LeafShape {
  uint32_t value_top = 0;   // node 0's value: its offset in the page (0: values on overflow pages)
  uint32_t stride = 0;      // bytes between node j's value and node j + 1's (overflow: pages a value)
  uint32_t value_size = 0;
  uint32_t key_size = 0;
  uint32_t node_head = 0;   // bytes read before the value: the node's header and key, or the page header
  bool overflow() const { return value_top == 0 && stride != 0; }
};

class LeafTable {
 public:
  // Builder side, fed by the index walk in key order: every item of the tree
  // (records and corpus metadata alike) with the leaf page it sits on,
  // whether it is a record whose value lies inline on that leaf, and that
  // value's file offset and size and its key's size.
  void Begin(const LeafPageFormat& format) { format_ = format; }
  // `overflow`: a record whose value lies on overflow pages (inline_record false).
  void Note(uint64_t leaf_pgno, bool record, bool inline_record, uint64_t value_offset = 0, uint64_t value_size = 0,
            uint64_t key_size = 0, bool overflow = false);
  // After the last item. An empty table when nothing is usable or a page
  // number or record count is too large.
  void Finish();

  // Unusable leaves included.
  uint64_t leaves() const { return pgnos_.size(); }
  uint64_t usable_leaves() const { return usable_; }
  uint64_t regular_leaves() const { return regular_; }
  uint64_t records() const { return records_; }
  const LeafShape& shape() const { return shape_; }
  bool empty() const { return usable_ == 0; }
  uint64_t MemoryBytes() const { return (pgnos_.capacity() + firsts_.capacity() + overflow_.capacity()) * 4; }

  // Record `record`'s leaf, node and the leaf's node count; false when it
  // lies on an unusable leaf (or past the table).
  bool Find(uint64_t record, LeafSpot* spot) const {
    if (record >= records_ || pgnos_.empty()) return false;
    // The last leaf whose first record is <= record. A guess from the
    // average of the leaves before the last (exact where full leaves hold
    // equal records, as appended files' do; the last is the partial one),
    // then a gallop out from it and a binary search of the bracket: a guess
    // a leaf off costs a step or two, not a search of the whole table
    // (2 million leaves at 10^8 records: about 20 cache misses).
    const size_t n = firsts_.size();
    const uint64_t last_first = firsts_[n - 1];
    size_t guess = last_first == 0 ? 0
                                   : static_cast<size_t>(static_cast<unsigned __int128>(record) * (n - 1) / last_first);
    if (guess >= n) guess = n - 1;
    size_t lo = guess, hi = guess + 1;  // firsts_[lo] <= record < firsts_[hi] (hi == n: the end)
    if (firsts_[guess] <= record) {
      for (size_t step = 1; hi < n && firsts_[hi] <= record; step *= 2) {
        lo = hi;
        hi = n - hi > step ? hi + step : n;
      }
    } else {
      hi = guess;
      for (size_t step = 1;; step *= 2) {  // firsts_[0] is 0 (Decode checks it), so this ends
        lo = hi > step ? hi - step : 0;
        if (lo == 0 || firsts_[lo] <= record) break;
        hi = lo;
      }
    }
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      if (firsts_[mid] <= record) lo = mid;
      else hi = mid;
    }
    const uint32_t pgno = pgnos_[lo] & ~kRegular;
    if (pgno == 0) return false;
    const uint64_t end = lo + 1 < n ? firsts_[lo + 1] : records_;
    spot->pgno = pgno;
    spot->node = static_cast<uint32_t>(record - firsts_[lo]);
    spot->nodes = static_cast<uint32_t>(end - firsts_[lo]);
    spot->regular = pgnos_[lo] & kRegular;
    if (spot->regular && shape_.overflow()) {
      spot->overflow_pgno = overflow_[lo] + uint64_t{spot->node} * shape_.stride;
      spot->node_offset = spot->overflow_pgno * format_.page_size;
      spot->value_offset = spot->node_offset + shape_.node_head;
    } else if (spot->regular) {
      spot->value_offset = pgno * uint64_t{format_.page_size} + shape_.value_top - uint64_t{spot->node} * shape_.stride;
      spot->node_offset = spot->value_offset - shape_.node_head;
    }
    return true;
  }

  // The saved form: the shape (value_top, stride, value_size, key_size:
  // u32 each), then per leaf page number and first record (u32 each),
  // little-endian. Decode checks that first records rise from 0 and stay
  // below `records`, that page numbers are 0 or at least 2, and that every
  // regular leaf's nodes fit its page.
  std::string Encode() const;
  static Status Decode(std::string_view bytes, uint64_t records, const LeafPageFormat& format,
                       const std::string& path, LeafTable* table);

 private:
  static constexpr uint32_t kRegular = 0x80000000u;
  void Close();  // ends the leaf being noted
  // Whether a regular leaf of `nodes` nodes of the shape fits a page.
  bool Fits(uint64_t nodes) const;

  LeafPageFormat format_;
  LeafShape shape_;
  std::vector<uint32_t> pgnos_;   // 0: unusable; kRegular set: regular
  std::vector<uint32_t> firsts_;  // first record of each leaf
  std::vector<uint32_t> overflow_;  // values on overflow pages: node 0's first page, each leaf
  uint64_t records_ = 0;
  uint64_t usable_ = 0;
  uint64_t regular_ = 0;
  // Building: the leaf being noted.
  uint64_t current_pgno_ = 0;
  uint64_t current_first_ = 0;
  uint64_t current_nodes_ = 0;
  bool current_usable_ = false;
  bool current_regular_ = false;
  bool current_overflow_ = false;  // every node a record of one size on overflow pages, runs in order
  uint64_t current_run_ = 0;       // node 0's first overflow page
  uint64_t last_run_ = 0;
  LeafShape current_shape_;
  uint64_t last_value_at_ = 0;  // in the page
  bool open_ = false;
  bool too_large_ = false;
};

// Checks the node of a regular leaf's record read alone (spot.node_offset,
// shape.node_head + shape.value_size bytes at `node`): its value size,
// flags (an inline value) and key size, and with `key` (not null) its key;
// for values on overflow pages, the run's page header (its page number,
// P_OVERFLOW, pages enough for the value). Corruption naming `path` and the
// page otherwise.
Status LeafNodeCheck(const char* node, const LeafSpot& spot, const LeafShape& shape, const LeafPageFormat& format,
                     const std::string* key, const std::string& path);

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
