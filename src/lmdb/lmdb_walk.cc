// The walk over an LMDB tree (LmdbFile::Walk): branch, leaf, overflow and
// duplicate pages, each checked before use (lmdb_pages.h says what is
// checked), in key order.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "lmdb/lmdb_page_layout.h"
#include "lmdb/lmdb_pages.h"

namespace lmdbloader {

using namespace lmdb_layout;  // NOLINT: this file is the layout's reader

Status LmdbFile::Walk(const LmdbMeta& meta, const LmdbTree& tree, const Visitor& visit) {
  WalkState st(meta, visit);
  st.max_pgno = std::min(meta.last_pgno, file_size_ / meta.page_size - 1);
  st.tree = tree;
  if (tree.root == kInvalidPage) {
    if (tree.entries != 0) return Damaged(0, "an empty tree claims " + std::to_string(tree.entries) + " entries");
    return Status::OK();
  }
  if (tree.depth < 1 || tree.depth > kMaxDepth)
    return Damaged(tree.root, "the tree's depth " + std::to_string(tree.depth) + " is outside 1.." +
                                  std::to_string(kMaxDepth));
  LMDBLOADER_RETURN_IF_ERROR(WalkTree(st, tree.root));
  if (st.items != tree.entries)
    return Status::Corruption("walk " + path_ + ": damaged tree: its header says " + std::to_string(tree.entries) +
                              " entries, the pages hold " + std::to_string(st.items));
  return Status::OK();
}

Status LmdbFile::WalkTree(WalkState& st, uint64_t root) {
  if (root < 2 || root > st.max_pgno) return Damaged(root, st.Outside(root));
  std::string& slot = st.pages[st.Slot(0)];
  LMDBLOADER_RETURN_IF_ERROR(ReadPages(&root, 1, st.meta.page_size, &slot));
  return WalkPage(st, root, 0, slot.data());
}

Status LmdbFile::WalkPage(WalkState& st, uint64_t pgno, int level, const char* page) {
  const uint32_t psize = st.meta.page_size;
  const uint64_t hsize = st.meta.header_size, base = PageBase(st.meta);
  if (++st.pages_visited > st.max_pgno)
    return Damaged(pgno, "the walk reached more pages than the file has (a cycle?)");
  PageHeader h = PageHeader::Parse(page, hsize, base);
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
  if (h.lower < hsize || (h.lower & 1) || (!leaf2 && (h.lower > h.upper || h.upper > psize)))
    return Damaged(pgno, "free-space bounds " + std::to_string(h.lower) + ".." + std::to_string(h.upper) +
                             " do not fit the page");
  if (bottom) return VisitLeaf(st, page, pgno);

  const uint64_t n = (h.lower - hsize) / 2;
  if (n == 0) return Damaged(pgno, "a branch page with no children");
  std::vector<uint64_t> children(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ptr = Load<uint16_t>(page + hsize + 2 * i) + base;
    if (ptr < h.upper || ptr + kNodeSize > psize)
      return Damaged(pgno, "node " + std::to_string(i) + " at offset " + std::to_string(ptr) + " is outside the page");
    uint64_t ksize = Load<uint16_t>(page + ptr + 6);
    if (ptr + kNodeSize + ksize > psize) return Damaged(pgno, "the key of node " + std::to_string(i) + " runs past the page");
    const uint64_t child = Load<uint16_t>(page + ptr) | (uint64_t{Load<uint16_t>(page + ptr + 2)} << 16) |
                           (uint64_t{Load<uint16_t>(page + ptr + 4)} << 32);
    if (child < 2 || child > st.max_pgno)
      return Damaged(pgno, "child " + std::to_string(i) + " points to page " + std::to_string(child) + ", " +
                               st.Outside(child));
    children[i] = child;
  }
  // Without a batch reader, ask the kernel for every child now
  // (POSIX_FADV_WILLNEED: read ahead into the page cache, which no
  // process's RSS counts, many requests in flight): a cold local walk of
  // 200,000 records took 0.21-0.63 s reading one page after another, 0.07-0.11
  // s so. With one, the batches below keep the requests in flight themselves
  // (over FUSE the kernel's readahead went about one request at a time, and
  // a read of a page it was fetching waited for it).
  if (io_ == nullptr) {
    for (uint64_t i = 0; i < n;) {
      uint64_t run = 1;
      while (i + run < n && children[i + run] == children[i] + run) ++run;
      (void)::posix_fadvise(fd_, static_cast<off_t>(children[i] * psize), static_cast<off_t>(run * psize),
                            POSIX_FADV_WILLNEED);
      i += run;
    }
  }
  // The children in batches, each read at once, then walked in key order.
  const bool leaves_below = level + 1 == st.tree.depth - 1;
  const uint64_t per_batch =
      std::max<uint64_t>(1, (leaves_below ? kMaxLeafBatchBytes : kMaxBranchBatchBytes) / psize);
  std::string& batch = st.pages[st.Slot(level + 1)];
  for (uint64_t first = 0; first < n; first += per_batch) {
    const uint64_t count = std::min(per_batch, n - first);
    LMDBLOADER_RETURN_IF_ERROR(ReadPages(children.data() + first, count, psize, &batch));
    for (uint64_t k = 0; k < count; ++k)
      LMDBLOADER_RETURN_IF_ERROR(WalkPage(st, children[first + k], level + 1, batch.data() + k * psize));
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
  const uint64_t hsize = st.meta.header_size, base = PageBase(st.meta);
  const uint64_t page_offset = pgno * psize;
  PageHeader h = PageHeader::Parse(page, hsize, base);
  const uint64_t n = (h.lower - hsize) / 2;
  if (n == 0) return Damaged(pgno, "a leaf page with no entries");
  const bool dupsort = !st.dup_tree && (st.tree.flags & kLmdbDupSort);
  const bool integer = st.dup_tree ? (st.tree.flags & kLmdbIntegerDup) : (st.tree.flags & kLmdbIntegerKey);
  const bool reversed = st.dup_tree ? (st.tree.flags & kLmdbReverseDup) : (st.tree.flags & kLmdbReverseKey);
  // A tree of duplicates below reads into slots of its own (WalkState):
  // this page stays where it is.
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
    if (ks == 0 || ks != st.tree.pad || hsize + n * ks > psize)
      return Damaged(pgno, "fixed-size entries of " + std::to_string(ks) + " bytes do not fit the page");
    for (uint64_t i = 0; i < n; ++i) {
      std::string_view dup(page + hsize + i * ks, ks);
      LMDBLOADER_RETURN_IF_ERROR(ordered(dup, i));
      LMDBLOADER_RETURN_IF_ERROR(
          st.visit(Duplicate(st.outer_key, st.outer_pgno, pgno, st.items++, dup, page_offset + hsize + i * ks)));
    }
    return Status::OK();
  }

  for (uint64_t i = 0; i < n; ++i) {
    uint64_t ptr = Load<uint16_t>(page + hsize + 2 * i) + base;
    if (ptr < h.upper || ptr + kNodeSize > psize)
      return Damaged(pgno, "node " + std::to_string(i) + " at offset " + std::to_string(ptr) + " is outside the page");
    const char* node = page + ptr;
    const uint64_t dsize = Load<uint16_t>(node) | (uint64_t{Load<uint16_t>(node + 2)} << 16);
    const uint16_t flags = Load<uint16_t>(node + 4);
    const uint64_t ksize = Load<uint16_t>(node + 6);
    const uint64_t data_pos = ptr + kNodeSize + KeySpan(ksize, st.meta.format);
    if (data_pos > psize) return Damaged(pgno, "the key of node " + std::to_string(i) + " runs past the page");
    const char* data = page + data_pos;
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
          VisitDuplicates(st, key, data, dsize, page_offset + data_pos, subtree, pgno));
      continue;
    }

    LmdbItem item;
    item.key = key;
    item.value_size = dsize;
    if (flags & kNodeBig) {
      if (flags & kNodeSubData) return Damaged(pgno, "node " + std::to_string(i) + " has contradictory flags");
      const uint64_t ref = st.meta.format == kDataVersion10 ? kBigRef10 : kBigRef;
      if (data_pos + ref > psize) return Damaged(pgno, "the overflow page number of node " + std::to_string(i) + " runs past the page");
      const uint64_t ov = Load<uint64_t>(data);
      const uint64_t pages = OverflowPages(dsize, psize, hsize);
      if (ov < 2 || ov > st.max_pgno || pages > st.max_pgno + 1 - ov)
        return Damaged(pgno, "the value of node " + std::to_string(i) + " (" + std::to_string(dsize) +
                                 " bytes on overflow page " + std::to_string(ov) + ") lies past page " +
                                 std::to_string(st.max_pgno) + ", " + st.Outside(ov + pages - 1));
      item.value_offset = ov * psize + hsize;
      item.on_overflow_pages = true;
    } else {
      if (data_pos + dsize > psize) return Damaged(pgno, "the value of node " + std::to_string(i) + " runs past the page");
      if ((flags & kNodeSubData) && dsize != LmdbTree::kDiskSize)
        return Damaged(pgno, "node " + std::to_string(i) + " claims a named database but holds " +
                                 std::to_string(dsize) + " bytes");
      item.value_offset = page_offset + data_pos;
      item.value = std::string_view(data, dsize);
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
    s = WalkTree(st, sub.root);
    if (s.ok() && st.items != sub.entries)
      s = Damaged(pgno, "a duplicate tree says " + std::to_string(sub.entries) + " entries, its pages hold " +
                            std::to_string(st.items));
  } else {
    // A sub-page inside the node: a page header, then nodes whose keys are the duplicates.
    const uint64_t hsize = st.meta.header_size, base = PageBase(st.meta);
    if (data_size < hsize) return Damaged(pgno, "a duplicate sub-page is shorter than a page header");
    PageHeader h = PageHeader::Parse(data, hsize, base);
    // As on whole pages, mp_upper of a fixed-size (P_LEAF2) sub-page does not
    // bound its entries; the loop below checks they fit the node.
    const bool leaf2 = h.flags & kPageLeaf2;
    if (!(h.flags & kPageLeaf) || !(h.flags & kPageSub) || h.lower < hsize || (h.lower & 1) ||
        (!leaf2 && (h.lower > h.upper || h.upper > data_size)))
      return Damaged(pgno, "a duplicate sub-page has a damaged header");
    if (leaf2 && !(saved_tree.flags & kLmdbDupFixed))
      return Damaged(pgno, "a fixed-size duplicate sub-page in a database without MDB_DUPFIXED");
    const uint64_t n = (h.lower - hsize) / 2;
    if (n == 0) return Damaged(pgno, "a duplicate sub-page with no entries");
    const bool integer = saved_tree.flags & kLmdbIntegerDup, reversed = saved_tree.flags & kLmdbReverseDup;
    std::string prev;
    for (uint64_t i = 0; i < n && s.ok(); ++i) {
      std::string_view dup;
      uint64_t at = 0;
      if (h.flags & kPageLeaf2) {
        if (h.pad == 0 || hsize + n * h.pad > data_size) return Damaged(pgno, "a fixed-size sub-page overflows");
        at = hsize + i * h.pad;
        dup = std::string_view(data + at, h.pad);
      } else {
        uint64_t ptr = Load<uint16_t>(data + hsize + 2 * i) + base;
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
  const uint64_t hsize = meta.header_size;
  if (value_offset < hsize || (value_offset - hsize) % psize != 0)
    return Status::Corruption("verify " + path_ + ": a value at offset " + std::to_string(value_offset) +
                              " does not start an overflow page");
  const uint64_t pgno = (value_offset - hsize) / psize;
  char buf[kHeaderSize10];
  if (::pread(fd_, buf, hsize, static_cast<off_t>(pgno * psize)) != static_cast<ssize_t>(hsize))
    return Status::Corruption("verify " + path_ + ": overflow page " + std::to_string(pgno) + " cannot be read");
  PageHeader h = PageHeader::Parse(buf, hsize, PageBase(meta));
  if (h.pgno != pgno || !(h.flags & kPageOverflow) || h.pages < OverflowPages(value_size, psize, hsize))
    return Damaged(pgno, "not the overflow page run of a " + std::to_string(value_size) + "-byte value");
  return Status::OK();
}

}  // namespace lmdbloader
