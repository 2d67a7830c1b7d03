// LmdbFile: a bounds-checked reader of LMDB's on-disk page format.
//
// liblmdb trusts every page it reads: a damaged page makes it assert
// (abort), follow a pointer past its map (SIGSEGV) or touch a page past the
// end of a short file (SIGBUS). A training job must survive a damaged file,
// so the index walk never hands an unchecked file to liblmdb. This reader
// reads pages with pread() (nothing mapped, so nothing to fault on) and
// checks everything it follows before using it:
// - meta pages: page flag, magic, version, page size, last page within the
//   file, roots within the last page;
// - every tree page: its page number in the header equals the number that
//   led to it, its type is the one its level needs (branch above, leaf at the
//   bottom), its free-space bounds and node offsets lie inside the page, and
//   each node's key and inline value lie inside the page;
// - values on overflow pages lie within the file and the last page;
// - keys come in strictly increasing order under the database's comparator
//   (which also catches cycles and pages reached twice; not in integer-key
//   trees, whose order liblmdb takes from bytes past short keys), the walk visits no
//   more pages than the file has, the tree is no deeper than it says (and
//   than liblmdb's 32 levels), and the number of entries found equals the
//   tree's own count.
// Layout facts (structure sizes, flags, the 48-bit child page number of a
// branch node) are from LMDB's mdb.c; the file format is LMDB's version 1,
// little-endian, 64-bit page numbers.
//
// Not thread-safe; one walk at a time per object.
#ifndef LMDBLOADER_SRC_LMDB_PAGES_H_
#define LMDBLOADER_SRC_LMDB_PAGES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

class BatchIo;

// Database flags stored in a tree's header (lmdb.h's mdb_dbi_open flags).
inline constexpr uint16_t kLmdbReverseKey = 0x02;
inline constexpr uint16_t kLmdbDupSort = 0x04;
inline constexpr uint16_t kLmdbIntegerKey = 0x08;
inline constexpr uint16_t kLmdbDupFixed = 0x10;
inline constexpr uint16_t kLmdbIntegerDup = 0x20;
inline constexpr uint16_t kLmdbReverseDup = 0x40;

// One B+tree's header (LMDB's MDB_db, 48 bytes on disk).
struct LmdbTree {
  uint32_t pad = 0;  // key size of DUPFIXED pages; the page size in the free tree
  uint16_t flags = 0;
  uint16_t depth = 0;
  uint64_t branch_pages = 0;
  uint64_t leaf_pages = 0;
  uint64_t overflow_pages = 0;
  uint64_t entries = 0;
  uint64_t root = ~0ull;  // ~0: empty tree
  static constexpr size_t kDiskSize = 48;
  // Parses 48 bytes; false when the bytes cannot be a tree header.
  static bool Parse(std::string_view bytes, LmdbTree* tree);
};

// The meta page LMDB reads first (the newer of the two).
struct LmdbMeta {
  // LMDB's data format: 1 (LMDB 0.9) or 3 (LMDB 1.0, which adds the creating
  // transaction's id to every page header and lays nodes out on even offsets).
  uint32_t format = 1;
  uint32_t header_size = 16;  // PAGEHDRSZ: 16 in format 1, 24 in format 3
  uint32_t page_size = 0;
  uint64_t map_size = 0;
  uint64_t last_pgno = 0;
  uint64_t txnid = 0;
  int page = 0;  // 0 or 1: which meta page
  uint64_t sum = 0;  // XXH3-64 of its bytes (header and MDB_meta)
  LmdbTree free_tree;
  LmdbTree main_tree;
};

// Where a meta page keeps mm_txnid: after the page header (`header_size`
// bytes), MDB_meta's magic, version, address, map size, two trees and last page.
inline constexpr size_t LmdbMetaTxnidAt(uint32_t header_size) { return header_size + 128; }

// LMDB's last committed transaction as the file says now: the higher of the
// two meta pages' ids (a commit writes the meta page it did not write last).
// Reads `mapped_meta_pages` (the file's first two pages, mapped) when given,
// else the file through `fd`. IOError naming `path` when pread fails.
Status ReadCommittedTxnid(int fd, const char* mapped_meta_pages, uint32_t page_size, uint32_t header_size,
                          const std::string& path, uint64_t* txnid);

// One item of a walk: a key and where its value lies in the file. For a
// MDB_DUPSORT tree, one item per (key, duplicate) pair, the duplicate as the
// value, in LMDB's order.
struct LmdbItem {
  std::string_view key;          // valid during the visit only
  uint64_t value_offset = 0;     // file offset of the value's bytes
  uint64_t value_size = 0;
  std::string_view value;        // the value's bytes when they sit in a tree page, else empty
  bool on_overflow_pages = false;
  bool named_database = false;   // the value is the header of a named database (F_SUBDATA)
  // Where the item sits, for callers that follow LMDB's cursor from page to
  // page: the leaf page of its key node, the duplicate's leaf page in a tree
  // of duplicates of its own (0 when the duplicates sit inside the key node
  // or there are none), and the duplicate's index within its key (0 for the
  // first, and for every item of a database without MDB_DUPSORT).
  uint64_t leaf_pgno = 0;
  uint64_t dup_leaf_pgno = 0;
  uint64_t dup_index = 0;
};

class LmdbFile {
 public:
  LmdbFile() = default;
  ~LmdbFile();
  LmdbFile(const LmdbFile&) = delete;
  LmdbFile& operator=(const LmdbFile&) = delete;

  // Opens `data_path` read-only. IOError when it cannot be opened.
  Status Open(const std::string& data_path);
  uint64_t file_size() const { return file_size_; }
  int fd() const { return fd_; }

  // Reads and checks both meta pages and picks the one LMDB would use (the
  // higher transaction id), or, when `txnid` is not 0, the one that holds it
  // (NotFound when neither does). Corruption naming the file otherwise.
  // Takes file_size() again once the meta page is read: walks of that meta
  // are bounded by the file as it is after its commit.
  Status ReadMeta(uint64_t txnid, LmdbMeta* meta);

  // The header of the named database `name` in `meta`'s main tree. NotFound
  // when there is none.
  Status FindNamedTree(const LmdbMeta& meta, std::string_view name, LmdbTree* tree);

  // Visits every item of `tree` in key order. The visitor's first non-OK
  // status stops the walk and is returned. Corruption naming the file and the
  // page when anything is out of place.
  using Visitor = std::function<Status(const LmdbItem&)>;
  Status Walk(const LmdbMeta& meta, const LmdbTree& tree, const Visitor& visit);

  // Checks the header of the overflow page run holding a value found at
  // `value_offset` (page type, page number, page count). The walk itself
  // does not read overflow pages (it would cost one random read per record on
  // a cold open); `lmdbloader verify` does.
  Status CheckOverflow(const LmdbMeta& meta, uint64_t value_offset, uint64_t value_size);

  const std::string& path() const { return path_; }

  // The walk reads a branch page's children together through `io`, many
  // requests in flight (a cold walk otherwise waits one device or network
  // round trip per page), instead of one pread() per run of neighbouring
  // pages. Not owned; nullptr (the default) goes back to pread().
  void ReadWith(BatchIo* io) { io_ = io; }

 private:
  struct WalkState;
  Status ReadPages(const uint64_t* pgnos, uint64_t count, uint32_t page_size, std::string* into);
  Status WalkTree(WalkState& st, uint64_t root);
  Status WalkPage(WalkState& st, uint64_t pgno, int level, const char* page);
  Status VisitLeaf(WalkState& st, const char* page, uint64_t pgno);
  Status VisitDuplicates(WalkState& st, std::string_view key, const char* node_data, uint64_t data_size,
                         uint64_t data_offset, bool subtree, uint64_t pgno);
  Status Damaged(uint64_t pgno, const std::string& what) const;

  std::string path_;
  int fd_ = -1;
  uint64_t file_size_ = 0;
  BatchIo* io_ = nullptr;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_PAGES_H_
