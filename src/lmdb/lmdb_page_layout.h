// LMDB's page layout as mdb.c writes it (data format 1, LMDB 0.9, and data
// format 3, LMDB 1.0, which lib1/mdb.c of py-lmdb 3 writes): the
// constants and byte loads the checked page reader (lmdb_pages.cc: meta
// pages, named trees) and its walk (lmdb_walk.cc) share, and what only the
// walk reads of tree pages (node flags, key order, overflow runs). Private
// to lmdb/.
#ifndef LMDBLOADER_SRC_LMDB_PAGE_LAYOUT_H_
#define LMDBLOADER_SRC_LMDB_PAGE_LAYOUT_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "lmdb/lmdb_pages.h"

namespace lmdbloader {
namespace lmdb_layout {

// From LMDB's mdb.c.
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;     // LMDB 0.9
constexpr uint32_t kDataVersion10 = 3;   // LMDB 1.0
constexpr uint64_t kHeaderSize = 16;     // PAGEHDRSZ of format 1
constexpr uint64_t kHeaderSize10 = 24;   // format 3: mp_txnid after mp_pgno
constexpr uint64_t kNodeSize = 8;        // NODESIZE (both formats)
// An F_BIGDATA node's data: the first overflow page's number (format 1), or
// MDB_ovpage {pgno, txnid, pages} (format 3), its page number first.
constexpr uint64_t kBigRef = 8, kBigRef10 = 24;
// MDB_ENCRYPT in the meta page's flags (LMDB 1.0): the pages are encrypted.
constexpr uint16_t kEnvEncrypted = 0x2000;
constexpr uint16_t kPageBranch = 0x01, kPageLeaf = 0x02, kPageOverflow = 0x04, kPageMeta = 0x08,
                   kPageLeaf2 = 0x20, kPageSub = 0x40;
constexpr uint16_t kNodeBig = 0x01, kNodeSubData = 0x02, kNodeDupData = 0x04;
constexpr uint64_t kInvalidPage = ~0ull;
constexpr int kMaxDepth = 32;  // liblmdb's CURSOR_STACK
// What the walk reads at once: the leaves under one branch page, at most
// 1 MiB of them; a branch's branch children, 256 KiB (one batch a level is
// held while the levels below are walked); one request, 128 KiB, so that a
// run of neighbouring pages still goes as several requests in flight (over
// a network file system each request is a round trip of its own).
constexpr uint64_t kMaxLeafBatchBytes = 1u << 20;
constexpr uint64_t kMaxBranchBatchBytes = 256u << 10;
constexpr uint64_t kMaxReadBytes = 128u << 10;
constexpr uint64_t kMetaSize = 152;    // format 1's header + MDB_meta up to mm_txnid
constexpr uint64_t kMetaSize10 = 160;  // format 3's
// The page size of nearly every LMDB file (the x86-64 OS page; 64 KiB on
// some aarch64 and ppc64 kernels).
constexpr uint64_t kUsualPageSize = 4096;

template <typename T>
inline T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // LMDB guarantees only 2-byte alignment
  return v;
}

inline int CompareBytes(std::string_view a, std::string_view b) {
  size_t n = a.size() < b.size() ? a.size() : b.size();
  int c = n ? std::memcmp(a.data(), b.data(), n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

inline int CompareReversed(std::string_view a, std::string_view b) {
  size_t i = a.size(), j = b.size();
  while (i > 0 && j > 0) {
    unsigned char x = static_cast<unsigned char>(a[--i]), y = static_cast<unsigned char>(b[--j]);
    if (x != y) return x < y ? -1 : 1;
  }
  return i ? 1 : j ? -1 : 0;
}

// MDB_INTEGERKEY / MDB_INTEGERDUP keys are native (little-endian) unsigned
// integers, and lmdb.h wants them all of one size, unsigned int or size_t.
// liblmdb (and py-lmdb) write keys of any size and of several sizes anyway,
// and then order them by bytes past the key: on branch pages mdb.c compares
// 4 or 8 bytes whatever the keys' size (mdb_cmp_int, mdb_cmp_long), in leaves
// it reads from the first key's end. Once one key breaks the rule, even keys
// of a proper size can sit out of numeric order. So an integer tree's order
// is not checked: it is read in page order, as liblmdb's cursor reads it, and
// cycles are still caught by the bound on pages visited and the trees' entry
// counts.
constexpr int kNoOrder = 2;

// -1/0/1, or kNoOrder for integer keys.
inline int Compare(std::string_view a, std::string_view b, bool integer, bool reversed) {
  if (integer) return kNoOrder;
  return reversed ? CompareReversed(a, b) : CompareBytes(a, b);
}

// The page header's last 8 bytes (pad, flags, lower, upper; or the overflow
// run's length) end it in both formats; format 3's is 8 bytes longer before.
// Format 3 also counts mp_lower, mp_upper and the node offsets from the end
// of the header (PAGEBASE), so that 64 KiB pages fit 16 bits: `base` (0 or
// the header's size) is added back, and lower and upper here are offsets in
// the page in both formats.
struct PageHeader {
  uint64_t pgno;
  uint32_t pad, flags, lower, upper;
  uint32_t pages;  // overflow pages: the run's length (shares lower/upper)
  static PageHeader Parse(const char* p, uint64_t header_size, uint64_t base) {
    const char* q = p + header_size - 8;
    return PageHeader{Load<uint64_t>(p), Load<uint16_t>(q), Load<uint16_t>(q + 2),
                      static_cast<uint32_t>(Load<uint16_t>(q + 4) + base),
                      static_cast<uint32_t>(Load<uint16_t>(q + 6) + base), Load<uint32_t>(q + 4)};
  }
};

// What format 3 adds to mp_lower, mp_upper and node offsets (PAGEBASE).
inline uint64_t PageBase(const LmdbMeta& meta) { return meta.format == kDataVersion10 ? meta.header_size : 0; }

// Pages needed by an overflow value of `size` bytes (mdb.c's OVPAGES).
inline uint64_t OverflowPages(uint64_t size, uint32_t page_size, uint64_t header_size) {
  return (header_size - 1 + size) / page_size + 1;
}

// Where a node's data starts after its key: format 3 pads keys to an even
// length (NODEDATA's EVEN(mn_ksize)).
inline uint64_t KeySpan(uint64_t ksize, uint32_t format) { return format == kDataVersion10 ? (ksize + 1) & ~1ull : ksize; }

}  // namespace lmdb_layout

// What a walk carries from page to page.
struct LmdbFile::WalkState {
  WalkState(const LmdbMeta& m, const Visitor& v) : meta(m), visit(v), pages(2 * (lmdb_layout::kMaxDepth + 1)) {}
  const LmdbMeta& meta;
  const Visitor& visit;
  uint64_t max_pgno = 0;  // pages above this do not exist: the meta's last page, or the file's end
  // Why page `pgno` cannot be read: past the file's end (max_pgno is then
  // the file's last page), or outside the pages the meta page counts.
  std::string Outside(uint64_t pgno) const {
    if (pgno > max_pgno && pgno <= meta.last_pgno)
      return "past the end of the file (truncated? it holds " + std::to_string(max_pgno + 1) + " pages of " +
             std::to_string(meta.page_size) + " bytes)";
    return "outside pages 2.." + std::to_string(meta.last_pgno);
  }
  uint64_t pages_visited = 0;
  // The tree being walked.
  LmdbTree tree;
  bool dup_tree = false;        // a sub-tree of duplicates: its keys are values
  std::string_view outer_key;   // the key whose duplicates a dup tree holds
  uint64_t outer_pgno = 0;      // the leaf page of that key's node
  uint64_t items = 0;
  std::string prev;             // previous key (or duplicate) of this tree
  bool have_prev = false;
  // The pages read for each level (slot 0: the root; slot L + 1: a batch of
  // the children of a level-L page), kept while the levels below are walked;
  // a tree of duplicates has slots of its own (from kMaxDepth + 1), so its
  // walk leaves its outer tree's pages in place. Sized once: a slot never
  // moves while a page in it is being read.
  std::vector<std::string> pages;
  size_t Slot(int level) const { return (dup_tree ? lmdb_layout::kMaxDepth + 1 : 0) + static_cast<size_t>(level); }
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_PAGE_LAYOUT_H_
