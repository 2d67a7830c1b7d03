#include "lmdb/lmdb_pages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <vector>

#include "base/checksum.h"
#include "io/open_file.h"

namespace lmdbloader {

namespace {

// From LMDB's mdb.c (file format version 1).
constexpr uint32_t kMagic = 0xBEEFC0DE;
constexpr uint32_t kDataVersion = 1;
constexpr uint64_t kHeaderSize = 16;  // PAGEHDRSZ
constexpr uint64_t kNodeSize = 8;     // NODESIZE
constexpr uint16_t kPageBranch = 0x01, kPageLeaf = 0x02, kPageOverflow = 0x04, kPageMeta = 0x08,
                   kPageLeaf2 = 0x20, kPageSub = 0x40;
constexpr uint16_t kNodeBig = 0x01, kNodeSubData = 0x02, kNodeDupData = 0x04;
constexpr uint64_t kInvalidPage = ~0ull;
constexpr int kMaxDepth = 32;  // liblmdb's CURSOR_STACK
constexpr uint64_t kMaxWindowBytes = 1u << 20;
constexpr uint64_t kMetaSize = 152;  // header + MDB_meta up to mm_txnid

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // LMDB guarantees only 2-byte alignment
  return v;
}

int CompareBytes(std::string_view a, std::string_view b) {
  size_t n = a.size() < b.size() ? a.size() : b.size();
  int c = n ? std::memcmp(a.data(), b.data(), n) : 0;
  if (c != 0) return c < 0 ? -1 : 1;
  return a.size() < b.size() ? -1 : a.size() > b.size() ? 1 : 0;
}

int CompareReversed(std::string_view a, std::string_view b) {
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
int Compare(std::string_view a, std::string_view b, bool integer, bool reversed) {
  if (integer) return kNoOrder;
  return reversed ? CompareReversed(a, b) : CompareBytes(a, b);
}

struct PageHeader {
  uint64_t pgno;
  uint16_t pad, flags, lower, upper;
  uint32_t pages;  // overflow pages: the run's length (shares lower/upper)
  static PageHeader Parse(const char* p) {
    return PageHeader{Load<uint64_t>(p), Load<uint16_t>(p + 8), Load<uint16_t>(p + 10),
                      Load<uint16_t>(p + 12), Load<uint16_t>(p + 14), Load<uint32_t>(p + 12)};
  }
};

// Pages needed by an overflow value of `size` bytes (mdb.c's OVPAGES).
uint64_t OverflowPages(uint64_t size, uint32_t page_size) {
  return (kHeaderSize - 1 + size) / page_size + 1;
}

}  // namespace

bool LmdbTree::Parse(std::string_view b, LmdbTree* t) {
  if (b.size() != kDiskSize) return false;
  const char* p = b.data();
  t->pad = Load<uint32_t>(p);
  t->flags = Load<uint16_t>(p + 4);
  t->depth = Load<uint16_t>(p + 6);
  t->branch_pages = Load<uint64_t>(p + 8);
  t->leaf_pages = Load<uint64_t>(p + 16);
  t->overflow_pages = Load<uint64_t>(p + 24);
  t->entries = Load<uint64_t>(p + 32);
  t->root = Load<uint64_t>(p + 40);
  return true;
}

struct LmdbFile::WalkState {
  WalkState(const LmdbMeta& m, const Visitor& v) : meta(m), visit(v) {}
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
};

LmdbFile::~LmdbFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status LmdbFile::Open(const std::string& data_path) {
  path_ = data_path;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(data_path, &fd_));
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat", data_path);
  file_size_ = static_cast<uint64_t>(st.st_size);
  return Status::OK();
}

Status LmdbFile::Damaged(uint64_t pgno, const std::string& what) const {
  return Status::Corruption("walk " + path_ + ": damaged LMDB page " + std::to_string(pgno) + ": " + what);
}

Status LmdbFile::ReadPages(uint64_t first, uint64_t count, uint32_t page_size) {
  const uint64_t bytes = count * page_size;
  window_.resize(bytes);
  uint64_t done = 0;
  while (done < bytes) {
    ssize_t n = ::pread(fd_, window_.data() + done, bytes - done, static_cast<off_t>(first * page_size + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      window_count_ = 0;
      return Status::FromErrno(errno, "pread", path_);
    }
    if (n == 0) {
      window_count_ = 0;
      return Status::Corruption("walk " + path_ + ": the file ended at byte " +
                                std::to_string(first * page_size + done) + " (was it truncated?)");
    }
    done += static_cast<uint64_t>(n);
  }
  window_first_ = first;
  window_count_ = count;
  return Status::OK();
}

Status ReadCommittedTxnid(int fd, const char* mapped_meta_pages, uint32_t page_size, const std::string& path,
                          uint64_t* txnid) {
  uint64_t ids[2];
  for (int m = 0; m < 2; ++m) {
    const uint64_t at = m * uint64_t{page_size} + kLmdbMetaTxnidAt;
    if (mapped_meta_pages) {
      ids[m] = Load<uint64_t>(mapped_meta_pages + at);
    } else if (::pread(fd, &ids[m], 8, static_cast<off_t>(at)) != 8) {
      return Status::FromErrno(errno ? errno : EIO, "pread", path);
    }
  }
  *txnid = std::max(ids[0], ids[1]);
  return Status::OK();
}

Status LmdbFile::ReadMeta(uint64_t want_txnid, LmdbMeta* out) {
  const std::string not_lmdb = "open " + path_ + ": not an LMDB file";
  const auto not_lmdb_because = [&](const std::string& why) {
    return Status::Corruption(not_lmdb + " (" + why + ")").WithReason(Status::Reason::kNotLmdb);
  };
  if (file_size_ == 0) return not_lmdb_because("it is empty");
  char first[kMetaSize];
  if (file_size_ < kMetaSize) return not_lmdb_because("only " + std::to_string(file_size_) + " bytes");
  if (::pread(fd_, first, kMetaSize, 0) != static_cast<ssize_t>(kMetaSize))
    return Status::FromErrno(errno ? errno : EIO, "pread", path_);
  const uint32_t page_size = Load<uint32_t>(first + 40);  // the free tree's pad
  LmdbMeta metas[2];
  for (int m = 0; m < 2; ++m) {
    char buf[kMetaSize];
    const std::string which = "meta page " + std::to_string(m);
    if (m == 0) {
      std::memcpy(buf, first, kMetaSize);
    } else {
      if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0)
        return Status::Corruption("open " + path_ + ": damaged meta page 0: page size " +
                                  std::to_string(page_size) + " is not a power of two in [512, 65536]");
      if (file_size_ < 2ull * page_size)
        return Status::Corruption("open " + path_ + ": truncated: " + std::to_string(file_size_) +
                                  " bytes hold no second meta page");
      if (::pread(fd_, buf, kMetaSize, page_size) != static_cast<ssize_t>(kMetaSize))
        return Status::FromErrno(errno ? errno : EIO, "pread", path_);
    }
    PageHeader h = PageHeader::Parse(buf);
    if (!(h.flags & kPageMeta) || Load<uint32_t>(buf + 16) != kMagic) {
      if (m == 0) {
        // LMDB 1.0 (data format 3: py-lmdb's lib_version=1, lmdb-js) has a
        // longer page header, so its meta sits further into the page.
        for (size_t at = 0; at + 8 <= 64; at += 4) {
          if (at == 16 || Load<uint32_t>(first + at) != kMagic) continue;
          const uint32_t format = Load<uint32_t>(first + at + 4);
          return Status::Unsupported("open " + path_ + ": LMDB data format " + std::to_string(format) +
                                     (format == 3 ? " (LMDB 1.0)" : "") +
                                     " is not supported: lmdbloader reads LMDB 0.9 files (data format 1)")
              .WithReason(Status::Reason::kLmdbFormat, format);
        }
        return not_lmdb_because("no LMDB meta page at offset 0");
      }
      return Status::Corruption("open " + path_ + ": damaged " + which + " (bad flags or magic)");
    }
    uint32_t version = Load<uint32_t>(buf + 20);
    if (version != kDataVersion)
      return Status::Corruption("open " + path_ + ": " + which + " has LMDB format version " +
                                std::to_string(version) + ", this reader knows version 1");
    LmdbMeta& meta = metas[m];
    meta.page = m;
    meta.map_size = Load<uint64_t>(buf + 32);
    LmdbTree::Parse(std::string_view(buf + 40, LmdbTree::kDiskSize), &meta.free_tree);
    LmdbTree::Parse(std::string_view(buf + 88, LmdbTree::kDiskSize), &meta.main_tree);
    meta.last_pgno = Load<uint64_t>(buf + 136);
    meta.txnid = Load<uint64_t>(buf + kLmdbMetaTxnidAt);
    meta.page_size = meta.free_tree.pad;
    meta.sum = Checksum(buf, kMetaSize);
  }
  // LMDB reads the meta with the higher transaction id.
  int pick = metas[1].txnid > metas[0].txnid ? 1 : 0;
  if (want_txnid != 0) {
    if (metas[0].txnid == want_txnid) pick = 0;
    else if (metas[1].txnid == want_txnid) pick = 1;
    else return Status::NotFound("open " + path_ + ": no meta page holds transaction " + std::to_string(want_txnid));
  }
  LmdbMeta& meta = metas[pick];
  const std::string where = "open " + path_ + ": damaged meta page " + std::to_string(pick) + ": ";
  if (meta.page_size != page_size)
    return Status::Corruption(where + "page size " + std::to_string(meta.page_size) + " differs from meta page 0's " +
                              std::to_string(page_size));
  // The meta page's last page may lie past the end of the file: liblmdb
  // counts pages that a transaction allocated and freed again without ever
  // writing them (seen after deletes). What must lie inside the file is every
  // page the trees reach, and the walk checks each one it reads. It never
  // lies past the map size the same meta page records: liblmdb allocates no
  // page beyond its map (MDB_MAP_FULL) and grows a smaller map to the last
  // page at open.
  if (meta.last_pgno < 1 || meta.last_pgno >= meta.map_size / page_size)
    return Status::Corruption("open " + path_ + ": truncated or damaged: meta page " + std::to_string(pick) +
                              " says the last page is " + std::to_string(meta.last_pgno) + ", past its own map of " +
                              std::to_string(meta.map_size) + " bytes (the file has " +
                              std::to_string(file_size_ / page_size) + " pages of " + std::to_string(page_size) +
                              " bytes)");
  // The free-page tree maps transaction ids to page lists: never sorted
  // duplicates (liblmdb asserts on such a tree when it walks it).
  if (meta.free_tree.flags & kLmdbDupSort)
    return Status::Corruption(where + "the free-page tree claims sorted duplicates (flags " +
                              std::to_string(meta.free_tree.flags) + ")");
  for (const LmdbTree* t : {&meta.main_tree, &meta.free_tree}) {
    const char* name = t == &meta.main_tree ? "main" : "free-page";
    if (t->root == kInvalidPage) {
      if (t->entries != 0 || t->depth != 0)
        return Status::Corruption(where + "the empty " + std::string(name) + " tree claims entries");
      continue;
    }
    if (t->root < 2 || t->root > meta.last_pgno)
      return Status::Corruption(where + "the " + std::string(name) + " tree's root page " + std::to_string(t->root) +
                                " is outside pages 2.." + std::to_string(meta.last_pgno));
    if (t->depth < 1 || t->depth > kMaxDepth)
      return Status::Corruption(where + "the " + std::string(name) + " tree's depth " + std::to_string(t->depth) +
                                " is outside 1..32");
  }
  // The walk's bound on the file is its size now, not at Open: a writer
  // writes every page a commit's trees reach before that commit's meta page
  // (mdb_txn_commit: mdb_page_flush, then mdb_env_write_meta), growing the
  // file as it goes, so a size taken after reading the meta page covers the
  // snapshot, where one taken before it can miss the pages of a commit made
  // in between (a sound file then read as truncated).
  struct stat st;
  if (::fstat(fd_, &st) != 0) return Status::FromErrno(errno, "fstat", path_);
  file_size_ = static_cast<uint64_t>(st.st_size);
  *out = meta;
  return Status::OK();
}

Status LmdbFile::FindNamedTree(const LmdbMeta& meta, std::string_view name, LmdbTree* tree) {
  bool found = false;
  Status s = Walk(meta, meta.main_tree, [&](const LmdbItem& item) -> Status {
    if (!item.named_database || item.key != name) return Status::OK();
    if (!LmdbTree::Parse(item.value, tree))
      return Status::Corruption("walk " + path_ + ": the header of database '" + std::string(name) + "' is damaged");
    found = true;
    return Status::Unsupported("");  // stops the walk
  });
  if (found) {
    if (tree->root != kInvalidPage &&
        (tree->root < 2 || tree->root > meta.last_pgno || tree->depth < 1 || tree->depth > kMaxDepth))
      return Status::Corruption("walk " + path_ + ": the header of database '" + std::string(name) +
                                "' is damaged (root page " + std::to_string(tree->root) + ", depth " +
                                std::to_string(tree->depth) + ")");
    return Status::OK();
  }
  if (!s.ok()) return s;
  return Status::NotFound("open " + path_ + ": no database named '" + std::string(name) + "'");
}

Status LmdbFile::Walk(const LmdbMeta& meta, const LmdbTree& tree, const Visitor& visit) {
  WalkState st(meta, visit);
  st.max_pgno = std::min(meta.last_pgno, file_size_ / meta.page_size - 1);
  st.tree = tree;
  window_count_ = 0;
  if (tree.root == kInvalidPage) {
    if (tree.entries != 0) return Damaged(0, "an empty tree claims " + std::to_string(tree.entries) + " entries");
    return Status::OK();
  }
  LMDBLOADER_RETURN_IF_ERROR(WalkPage(st, tree.root, 0));
  if (st.items != tree.entries)
    return Status::Corruption("walk " + path_ + ": damaged tree: its header says " + std::to_string(tree.entries) +
                              " entries, the pages hold " + std::to_string(st.items));
  return Status::OK();
}

Status LmdbFile::WalkPage(WalkState& st, uint64_t pgno, int level) {
  const uint32_t psize = st.meta.page_size;
  if (pgno < 2 || pgno > st.max_pgno) return Damaged(pgno, st.Outside(pgno));
  if (++st.pages_visited > st.max_pgno)
    return Damaged(pgno, "the walk reached more pages than the file has (a cycle?)");
  if (pgno < window_first_ || pgno >= window_first_ + window_count_)
    LMDBLOADER_RETURN_IF_ERROR(ReadPages(pgno, 1, psize));
  const char* page = window_.data() + (pgno - window_first_) * psize;
  PageHeader h = PageHeader::Parse(page);
  if (h.pgno != pgno) return Damaged(pgno, "its header says page " + std::to_string(h.pgno));
  const bool bottom = level == st.tree.depth - 1;
  const uint16_t want = bottom ? kPageLeaf : kPageBranch;
  if ((h.flags & (kPageBranch | kPageLeaf | kPageOverflow | kPageMeta)) != want)
    return Damaged(pgno, std::string("expected a ") + (bottom ? "leaf" : "branch") + " page at level " +
                             std::to_string(level) + ", found flags " + std::to_string(h.flags));
  if ((h.flags & kPageLeaf2) && !(st.dup_tree && (st.tree.flags & kLmdbDupFixed)))
    return Damaged(pgno, "fixed-size leaf page outside a MDB_DUPFIXED duplicate tree");
  // A fixed-size page keeps its entries packed after the header; liblmdb
  // counts 2 bytes of mp_lower and (size - 2) of mp_upper per entry, so
  // neither bounds the layout (1-byte entries move mp_upper up and mp_lower
  // past the entries' end). VisitLeaf checks that the entries fit.
  const bool leaf2 = h.flags & kPageLeaf2;
  if (h.lower < kHeaderSize || (h.lower & 1) || (!leaf2 && (h.lower > h.upper || h.upper > psize)))
    return Damaged(pgno, "free-space bounds " + std::to_string(h.lower) + ".." + std::to_string(h.upper) +
                             " do not fit the page");
  if (bottom) return VisitLeaf(st, page, pgno);

  const uint64_t n = (h.lower - kHeaderSize) / 2;
  if (n == 0) return Damaged(pgno, "a branch page with no children");
  // Take the children out before reading any of them moves the window.
  std::vector<uint64_t> children(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ptr = Load<uint16_t>(page + kHeaderSize + 2 * i);
    if (ptr < h.upper || ptr + kNodeSize > psize)
      return Damaged(pgno, "node " + std::to_string(i) + " at offset " + std::to_string(ptr) + " is outside the page");
    uint64_t ksize = Load<uint16_t>(page + ptr + 6);
    if (ptr + kNodeSize + ksize > psize) return Damaged(pgno, "the key of node " + std::to_string(i) + " runs past the page");
    children[i] = Load<uint16_t>(page + ptr) | (uint64_t{Load<uint16_t>(page + ptr + 2)} << 16) |
                  (uint64_t{Load<uint16_t>(page + ptr + 4)} << 32);
  }
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t child = children[i];
    if (child < 2 || child > st.max_pgno)
      return Damaged(pgno, "child " + std::to_string(i) + " points to page " + std::to_string(child) + ", " +
                               st.Outside(child));
    if (child < window_first_ || child >= window_first_ + window_count_) {
      // Read this child and the neighbours that the next children name.
      uint64_t run = 1;
      while (i + run < n && children[i + run] == child + run && child + run <= st.max_pgno &&
             (run + 1) * psize <= kMaxWindowBytes)
        ++run;
      LMDBLOADER_RETURN_IF_ERROR(ReadPages(child, run, psize));
    }
    LMDBLOADER_RETURN_IF_ERROR(WalkPage(st, child, level + 1));
  }
  return Status::OK();
}

namespace {

// A duplicate of `outer_key` whose bytes sit in a page: a page of a tree of
// duplicates (dup_leaf_pgno is that page), or a sub-page inside the key's
// node (dup_leaf_pgno 0).
LmdbItem Duplicate(std::string_view outer_key, uint64_t leaf_pgno, uint64_t dup_leaf_pgno, uint64_t dup_index,
                   std::string_view value, uint64_t value_offset) {
  LmdbItem item;
  item.key = outer_key;
  item.value = value;
  item.value_offset = value_offset;
  item.value_size = value.size();
  item.leaf_pgno = leaf_pgno;
  item.dup_leaf_pgno = dup_leaf_pgno;
  item.dup_index = dup_index;
  return item;
}

}  // namespace

Status LmdbFile::VisitLeaf(WalkState& st, const char* page, uint64_t pgno) {
  const uint32_t psize = st.meta.page_size;
  const uint64_t page_offset = pgno * psize;
  PageHeader h = PageHeader::Parse(page);
  const uint64_t n = (h.lower - kHeaderSize) / 2;
  if (n == 0) return Damaged(pgno, "a leaf page with no entries");
  const bool dupsort = !st.dup_tree && (st.tree.flags & kLmdbDupSort);
  const bool integer = st.dup_tree ? (st.tree.flags & kLmdbIntegerDup) : (st.tree.flags & kLmdbIntegerKey);
  const bool reversed = st.dup_tree ? (st.tree.flags & kLmdbReverseDup) : (st.tree.flags & kLmdbReverseKey);
  // Duplicates below move the window: keep this page.
  std::string copy;
  if (dupsort) {
    copy.assign(page, psize);
    page = copy.data();
  }
  auto ordered = [&](std::string_view key, uint64_t i) -> Status {
    if (st.have_prev) {
      const int c = Compare(st.prev, key, integer, reversed);
      if (c != kNoOrder && c >= 0) return Damaged(pgno, "node " + std::to_string(i) + "'s key is out of order (duplicate, cycle or damage)");
    }
    st.prev.assign(key.data(), key.size());
    st.have_prev = true;
    return Status::OK();
  };

  if (h.flags & kPageLeaf2) {  // DUPFIXED duplicates: n values of pad bytes each
    const uint64_t ks = h.pad;
    if (ks == 0 || ks != st.tree.pad || kHeaderSize + n * ks > psize)
      return Damaged(pgno, "fixed-size entries of " + std::to_string(ks) + " bytes do not fit the page");
    for (uint64_t i = 0; i < n; ++i) {
      std::string_view dup(page + kHeaderSize + i * ks, ks);
      LMDBLOADER_RETURN_IF_ERROR(ordered(dup, i));
      LMDBLOADER_RETURN_IF_ERROR(
          st.visit(Duplicate(st.outer_key, st.outer_pgno, pgno, st.items++, dup, page_offset + kHeaderSize + i * ks)));
    }
    return Status::OK();
  }

  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ptr = Load<uint16_t>(page + kHeaderSize + 2 * i);
    if (ptr < h.upper || ptr + kNodeSize > psize)
      return Damaged(pgno, "node " + std::to_string(i) + " at offset " + std::to_string(ptr) + " is outside the page");
    const char* node = page + ptr;
    const uint64_t dsize = Load<uint16_t>(node) | (uint64_t{Load<uint16_t>(node + 2)} << 16);
    const uint16_t flags = Load<uint16_t>(node + 4);
    const uint64_t ksize = Load<uint16_t>(node + 6);
    const uint64_t data_pos = ptr + kNodeSize + ksize;
    if (data_pos > psize) return Damaged(pgno, "the key of node " + std::to_string(i) + " runs past the page");
    std::string_view key(node + kNodeSize, ksize);
    LMDBLOADER_RETURN_IF_ERROR(ordered(key, i));
    if (flags & ~(kNodeBig | kNodeSubData | kNodeDupData))
      return Damaged(pgno, "node " + std::to_string(i) + " has unknown flags " + std::to_string(flags));
    if (st.dup_tree) {  // a duplicate: the node's key is the value, and it carries no data
      if (flags != 0 || dsize != 0) return Damaged(pgno, "a duplicate in node " + std::to_string(i) + " carries data");
      LMDBLOADER_RETURN_IF_ERROR(
          st.visit(Duplicate(st.outer_key, st.outer_pgno, pgno, st.items++, key, page_offset + ptr + kNodeSize)));
      continue;
    }

    if (flags & kNodeDupData) {
      if (!dupsort) return Damaged(pgno, "node " + std::to_string(i) + " claims duplicates in a database without MDB_DUPSORT");
      if (flags & kNodeBig) return Damaged(pgno, "node " + std::to_string(i) + " has contradictory flags");
      const bool subtree = flags & kNodeSubData;
      if (data_pos + (subtree ? LmdbTree::kDiskSize : dsize) > psize ||
          (subtree && dsize != LmdbTree::kDiskSize))
        return Damaged(pgno, "the duplicates of node " + std::to_string(i) + " run past the page");
      LMDBLOADER_RETURN_IF_ERROR(
          VisitDuplicates(st, key, node + kNodeSize + ksize, dsize, page_offset + data_pos, subtree, pgno));
      continue;
    }

    LmdbItem item;
    item.key = key;
    item.value_size = dsize;
    if (flags & kNodeBig) {
      if (flags & kNodeSubData) return Damaged(pgno, "node " + std::to_string(i) + " has contradictory flags");
      if (data_pos + 8 > psize) return Damaged(pgno, "the overflow page number of node " + std::to_string(i) + " runs past the page");
      const uint64_t ov = Load<uint64_t>(node + kNodeSize + ksize);
      const uint64_t pages = OverflowPages(dsize, psize);
      if (ov < 2 || ov > st.max_pgno || pages > st.max_pgno + 1 - ov)
        return Damaged(pgno, "the value of node " + std::to_string(i) + " (" + std::to_string(dsize) +
                                 " bytes on overflow page " + std::to_string(ov) + ") lies past page " +
                                 std::to_string(st.max_pgno) + ", " + st.Outside(ov + pages - 1));
      item.value_offset = ov * psize + kHeaderSize;
      item.on_overflow_pages = true;
    } else {
      if (data_pos + dsize > psize) return Damaged(pgno, "the value of node " + std::to_string(i) + " runs past the page");
      if ((flags & kNodeSubData) && dsize != LmdbTree::kDiskSize)
        return Damaged(pgno, "node " + std::to_string(i) + " claims a named database but holds " +
                                 std::to_string(dsize) + " bytes");
      item.value_offset = page_offset + data_pos;
      item.value = std::string_view(node + kNodeSize + ksize, dsize);
      item.named_database = flags & kNodeSubData;
    }
    item.leaf_pgno = pgno;
    ++st.items;
    LMDBLOADER_RETURN_IF_ERROR(st.visit(item));
  }
  return Status::OK();
}

Status LmdbFile::VisitDuplicates(WalkState& st, std::string_view key, const char* data, uint64_t data_size,
                                 uint64_t data_offset, bool subtree, uint64_t pgno) {
  // The duplicates form their own ordered set; the outer key order resumes after.
  std::string saved_prev = st.prev;
  bool saved_have = st.have_prev;
  LmdbTree saved_tree = st.tree;
  uint64_t saved_items = st.items;
  std::string outer(key);
  st.dup_tree = true;
  st.outer_key = outer;
  st.outer_pgno = pgno;
  st.have_prev = false;
  st.items = 0;
  Status s;
  if (subtree) {
    LmdbTree sub;
    LmdbTree::Parse(std::string_view(data, LmdbTree::kDiskSize), &sub);
    if (sub.root == kInvalidPage || sub.depth < 1 || sub.depth > kMaxDepth)
      return Damaged(pgno, "the duplicate tree of a node has root " + std::to_string(sub.root) + " and depth " +
                               std::to_string(sub.depth));
    sub.flags = saved_tree.flags;  // the comparator follows the outer database's flags
    st.tree = sub;
    s = WalkPage(st, sub.root, 0);
    if (s.ok() && st.items != sub.entries)
      s = Damaged(pgno, "a duplicate tree says " + std::to_string(sub.entries) + " entries, its pages hold " +
                            std::to_string(st.items));
  } else {
    // A sub-page inside the node: a page header, then nodes whose keys are the duplicates.
    if (data_size < kHeaderSize) return Damaged(pgno, "a duplicate sub-page is shorter than a page header");
    PageHeader h = PageHeader::Parse(data);
    // As on whole pages, mp_upper of a fixed-size (P_LEAF2) sub-page does not
    // bound its entries; the loop below checks they fit the node.
    const bool leaf2 = h.flags & kPageLeaf2;
    if (!(h.flags & kPageLeaf) || !(h.flags & kPageSub) || h.lower < kHeaderSize || (h.lower & 1) ||
        (!leaf2 && (h.lower > h.upper || h.upper > data_size)))
      return Damaged(pgno, "a duplicate sub-page has a damaged header");
    if (leaf2 && !(saved_tree.flags & kLmdbDupFixed))
      return Damaged(pgno, "a fixed-size duplicate sub-page in a database without MDB_DUPFIXED");
    const uint64_t n = (h.lower - kHeaderSize) / 2;
    if (n == 0) return Damaged(pgno, "a duplicate sub-page with no entries");
    const bool integer = saved_tree.flags & kLmdbIntegerDup, reversed = saved_tree.flags & kLmdbReverseDup;
    std::string prev;
    for (uint64_t i = 0; i < n && s.ok(); ++i) {
      std::string_view dup;
      uint64_t at = 0;
      if (h.flags & kPageLeaf2) {
        if (h.pad == 0 || kHeaderSize + n * h.pad > data_size) return Damaged(pgno, "a fixed-size sub-page overflows");
        at = kHeaderSize + i * h.pad;
        dup = std::string_view(data + at, h.pad);
      } else {
        uint64_t ptr = Load<uint16_t>(data + kHeaderSize + 2 * i);
        if (ptr < h.upper || ptr + kNodeSize > data_size) return Damaged(pgno, "a duplicate node lies outside its sub-page");
        uint64_t ksize = Load<uint16_t>(data + ptr + 6);
        uint64_t dsize = Load<uint16_t>(data + ptr) | (uint64_t{Load<uint16_t>(data + ptr + 2)} << 16);
        if (ptr + kNodeSize + ksize > data_size || dsize != 0 || Load<uint16_t>(data + ptr + 4) != 0)
          return Damaged(pgno, "a duplicate node of a sub-page is damaged");
        at = ptr + kNodeSize;
        dup = std::string_view(data + at, ksize);
      }
      if (i > 0) {
        const int c = Compare(prev, dup, integer, reversed);
        if (c != kNoOrder && c != -1) return Damaged(pgno, "duplicates out of order in a sub-page");
      }
      prev.assign(dup.data(), dup.size());
      ++st.items;
      s = st.visit(Duplicate(outer, pgno, 0, i, dup, data_offset + at));
    }
  }
  const uint64_t found = st.items;
  st.dup_tree = false;
  st.outer_key = {};
  st.tree = saved_tree;
  st.prev = std::move(saved_prev);
  st.have_prev = saved_have;
  st.items = saved_items + found;
  return s;
}

Status LmdbFile::CheckOverflow(const LmdbMeta& meta, uint64_t value_offset, uint64_t value_size) {
  const uint32_t psize = meta.page_size;
  if (value_offset < kHeaderSize || (value_offset - kHeaderSize) % psize != 0)
    return Status::Corruption("verify " + path_ + ": a value at offset " + std::to_string(value_offset) +
                              " does not start an overflow page");
  const uint64_t pgno = (value_offset - kHeaderSize) / psize;
  char buf[kHeaderSize];
  if (::pread(fd_, buf, kHeaderSize, static_cast<off_t>(pgno * psize)) != static_cast<ssize_t>(kHeaderSize))
    return Status::Corruption("verify " + path_ + ": overflow page " + std::to_string(pgno) + " cannot be read");
  PageHeader h = PageHeader::Parse(buf);
  if (h.pgno != pgno || !(h.flags & kPageOverflow) || h.pages < OverflowPages(value_size, psize))
    return Damaged(pgno, "not the overflow page run of a " + std::to_string(value_size) + "-byte value");
  return Status::OK();
}

}  // namespace lmdbloader
