#include "lmdb/leaf_table.h"

#include <cstring>

#include "lmdb/lmdb_page_layout.h"

namespace lmdbloader {

using namespace lmdb_layout;  // NOLINT: this file reads leaf pages

void LeafTable::Close() {
  if (!open_) return;
  if (current_pgno_ >= kRegular || current_first_ > UINT32_MAX || current_run_ > UINT32_MAX) too_large_ = true;
  const LeafShape& c = current_shape_;
  bool regular = current_usable_ && current_regular_ && current_nodes_ > 0;
  if (regular) {
    if (shape_.value_top == 0 && shape_.stride == 0) {
      // The table's shape: the first leaf whose nodes show a stride.
      if (current_nodes_ >= 2) shape_ = c;
      else regular = false;
    } else if (c.value_top != shape_.value_top || c.value_size != shape_.value_size || c.key_size != shape_.key_size ||
               (current_nodes_ >= 2 && c.stride != shape_.stride)) {
      regular = false;
    }
  }
  // A leaf of overflow values of one size whose runs follow each other.
  bool overflow = !current_usable_ && current_overflow_ && current_nodes_ > 0 && current_pgno_ >= 2;
  if (overflow) {
    const uint32_t pages = static_cast<uint32_t>(OverflowPages(c.value_size, format_.page_size, format_.header_size));
    if (shape_.value_top == 0 && shape_.stride == 0)
      shape_ = LeafShape{0, pages, c.value_size, 0, format_.header_size};
    else if (!shape_.overflow() || c.value_size != shape_.value_size)
      overflow = false;
  }
  const bool usable = current_usable_ || overflow;
  pgnos_.push_back(usable ? static_cast<uint32_t>(current_pgno_) | (regular || overflow ? kRegular : 0) : 0);
  firsts_.push_back(static_cast<uint32_t>(current_first_));
  if (shape_.overflow()) {
    overflow_.resize(pgnos_.size() - 1, 0);  // leaves before the shape was known
    overflow_.push_back(overflow ? static_cast<uint32_t>(current_run_) : 0);
  }
  usable_ += usable;
  regular_ += regular || overflow;
  open_ = false;
}

void LeafTable::Note(uint64_t leaf_pgno, bool record, bool inline_record, uint64_t value_offset,
                     uint64_t value_size, uint64_t key_size, bool overflow) {
  if (!open_ || leaf_pgno != current_pgno_) {
    Close();
    open_ = true;
    current_pgno_ = leaf_pgno;
    current_first_ = records_;
    current_nodes_ = 0;
    current_usable_ = leaf_pgno >= 2;
    current_regular_ = format_.page_size != 0;
    current_overflow_ = format_.page_size != 0;
  }
  // One item that is not an inline record (metadata among the records, an
  // overflow value) shifts or hides the node of every record after it.
  if (!record || !inline_record) current_usable_ = false;
  if (!record || !overflow) current_overflow_ = false;
  LeafShape& c = current_shape_;
  if (current_overflow_) {
    // value_offset: the run's first page, past its header.
    const uint64_t run = (value_offset - format_.header_size) / format_.page_size;
    const uint64_t pages = OverflowPages(value_size, format_.page_size, format_.header_size);
    if (current_nodes_ == 0) {
      c.value_size = static_cast<uint32_t>(value_size);
      current_run_ = run;
    } else if (value_size != c.value_size || run != last_run_ + pages) {
      current_overflow_ = false;
    }
    last_run_ = run;
  }
  if (current_usable_ && current_regular_) {
    const uint64_t page = leaf_pgno * format_.page_size;
    const uint64_t at = value_offset - page;  // the value's offset in its page
    if (value_offset < page || at >= format_.page_size) {
      current_regular_ = false;
    } else if (current_nodes_ == 0) {
      const uint64_t key_span = format_.header_size == kHeaderSize10 ? (key_size + 1) & ~1ull : key_size;
      c = LeafShape{static_cast<uint32_t>(at), 0, static_cast<uint32_t>(value_size), static_cast<uint32_t>(key_size),
                    static_cast<uint32_t>(kNodeSize + key_span)};
    } else if (value_size != c.value_size || key_size != c.key_size || at >= last_value_at_) {
      current_regular_ = false;
    } else if (current_nodes_ == 1) {
      c.stride = static_cast<uint32_t>(last_value_at_ - at);
    } else if (last_value_at_ - at != c.stride) {
      current_regular_ = false;
    }
    last_value_at_ = at;
  }
  ++current_nodes_;
  records_ += record;
}

void LeafTable::Finish() {
  Close();
  // A leaf that holds no record at all (only metadata) stays: it keeps the
  // first records of the next leaves apart. Nothing usable: nothing held.
  if (too_large_ || records_ > UINT32_MAX || usable_ == 0) {
    pgnos_ = {};
    firsts_ = {};
    overflow_ = {};
    usable_ = regular_ = 0;
  } else {
    pgnos_.shrink_to_fit();
    firsts_.shrink_to_fit();
    overflow_.shrink_to_fit();
  }
}

bool LeafTable::Fits(uint64_t nodes) const {
  const LeafShape& s = shape_;
  if (s.overflow()) return s.stride == OverflowPages(s.value_size, format_.page_size, format_.header_size);
  const uint64_t bottom = uint64_t{s.stride} * (nodes - 1) + s.node_head;  // below node 0's value
  return s.value_top + uint64_t{s.value_size} <= format_.page_size && s.stride >= s.node_head + s.value_size &&
         s.value_top >= bottom && s.value_top - bottom >= format_.header_size + 2 * nodes;
}

std::string LeafTable::Encode() const {
  if (pgnos_.empty()) return "";
  const uint64_t entry = shape_.overflow() ? kOverflowLeafEntryBytes : kLeafEntryBytes;
  std::string out(kLeafShapeBytes + pgnos_.size() * entry, '\0');
  const uint32_t shape[4] = {shape_.value_top, shape_.stride, shape_.value_size, shape_.key_size};
  std::memcpy(&out[0], shape, sizeof(shape));
  for (size_t k = 0; k < pgnos_.size(); ++k) {
    std::memcpy(&out[kLeafShapeBytes + k * entry], &pgnos_[k], 4);
    std::memcpy(&out[kLeafShapeBytes + k * entry + 4], &firsts_[k], 4);
    if (shape_.overflow()) std::memcpy(&out[kLeafShapeBytes + k * entry + 8], &overflow_[k], 4);
  }
  return out;
}

Status LeafTable::Decode(std::string_view bytes, uint64_t records, const LeafPageFormat& format,
                         const std::string& path, LeafTable* table) {
  auto damaged = [&](const std::string& what) {
    return Status::Corruption("index file " + path + ": its table of leaf pages " + what);
  };
  LeafTable t;
  t.format_ = format;
  if (bytes.empty()) {
    *table = std::move(t);
    return Status::OK();
  }
  if (format.page_size < 512 || format.page_size > 65536 ||
      (format.header_size != kHeaderSize && format.header_size != kHeaderSize10))
    return damaged("is of pages of " + std::to_string(format.page_size) + " bytes with headers of " +
                   std::to_string(format.header_size));
  if (bytes.size() < kLeafShapeBytes) return damaged("is not a whole number of entries");
  uint32_t shape[4];
  std::memcpy(shape, bytes.data(), sizeof(shape));
  const bool overflow = shape[0] == 0 && shape[1] != 0;
  const uint64_t key_span = format.header_size == kHeaderSize10 ? (uint64_t{shape[3]} + 1) & ~1ull : shape[3];
  if (shape[3] > format.page_size) return damaged("gives keys larger than a page");
  t.shape_ = LeafShape{shape[0], shape[1], shape[2], shape[3],
                       overflow ? format.header_size : static_cast<uint32_t>(kNodeSize + key_span)};
  bytes.remove_prefix(kLeafShapeBytes);
  const uint64_t entry = overflow ? kOverflowLeafEntryBytes : kLeafEntryBytes;
  if (bytes.size() % entry != 0) return damaged("is not a whole number of entries");
  const size_t n = bytes.size() / entry;
  t.pgnos_.resize(n);
  t.firsts_.resize(n);
  if (overflow) t.overflow_.resize(n);
  t.records_ = records;
  for (size_t k = 0; k < n; ++k) {
    std::memcpy(&t.pgnos_[k], bytes.data() + k * entry, 4);
    std::memcpy(&t.firsts_[k], bytes.data() + k * entry + 4, 4);
    if (overflow) std::memcpy(&t.overflow_[k], bytes.data() + k * entry + 8, 4);
  }
  for (size_t k = 0; k < n; ++k) {
    const uint64_t end = k + 1 < n ? t.firsts_[k + 1] : records;
    const uint32_t pgno = t.pgnos_[k] & ~kRegular;
    if (pgno == 1 || (pgno == 0 && t.pgnos_[k] != 0)) return damaged("names a meta page as a leaf");
    if ((k == 0 && t.firsts_[k] != 0) || end < t.firsts_[k] || end > records)
      return damaged("is out of order at leaf " + std::to_string(k));
    // A usable leaf holds at least one record.
    if (pgno != 0 && end == t.firsts_[k]) return damaged("holds an empty leaf at " + std::to_string(k));
    if ((t.pgnos_[k] & kRegular) && !t.Fits(end - t.firsts_[k]))
      return damaged("gives leaf " + std::to_string(k) + " more nodes than its page holds");
    if (overflow && (t.pgnos_[k] & kRegular) && t.overflow_[k] < 2)
      return damaged("puts the values of leaf " + std::to_string(k) + " on a meta page");
    t.usable_ += pgno != 0;
    t.regular_ += (t.pgnos_[k] & kRegular) != 0;
  }
  *table = std::move(t);
  return Status::OK();
}

Status LeafNodeCheck(const char* node, const LeafSpot& spot, const LeafShape& shape, const LeafPageFormat& format,
                     const std::string* key, const std::string& path) {
  if (shape.overflow()) {  // `node` is the value's overflow page header
    const uint64_t base = format.header_size == kHeaderSize10 ? format.header_size : 0;
    const PageHeader h = PageHeader::Parse(node, format.header_size, base);
    if (h.pgno != spot.overflow_pgno ||
        (h.flags & (kPageBranch | kPageLeaf | kPageOverflow | kPageMeta)) != kPageOverflow || h.pages < shape.stride)
      return Status::Corruption(path + ": page " + std::to_string(spot.overflow_pgno) + " is not the overflow page of node " +
                                std::to_string(spot.node) + " of leaf " + std::to_string(spot.pgno) +
                                " (its header says page " + std::to_string(h.pgno) + ", flags " +
                                std::to_string(h.flags) + "): the file changed or is damaged");
    return Status::OK();
  }
  const uint64_t dsize = Load<uint16_t>(node) | (uint64_t{Load<uint16_t>(node + 2)} << 16);
  const uint16_t flags = Load<uint16_t>(node + 4);
  const uint64_t ksize = Load<uint16_t>(node + 6);
  auto damaged = [&](const std::string& what) {
    return Status::Corruption(path + ": node " + std::to_string(spot.node) + " of page " + std::to_string(spot.pgno) +
                              " is not the record the index found (" + what + "): the file changed or is damaged");
  };
  if (dsize != shape.value_size || flags != 0 || ksize != shape.key_size)
    return damaged("a value of " + std::to_string(dsize) + " bytes, flags " + std::to_string(flags) + ", a key of " +
                   std::to_string(ksize) + " bytes");
  if (key != nullptr && (key->size() != ksize || std::memcmp(node + kNodeSize, key->data(), ksize) != 0))
    return damaged("another key");
  return Status::OK();
}

Status LeafValue(const char* page, const LeafSpot& spot, const LeafPageFormat& format, const std::string* key,
                 const std::string& path, uint32_t* at, uint32_t* size) {
  const uint64_t psize = format.page_size, hsize = format.header_size;
  const uint64_t base = hsize == kHeaderSize10 ? hsize : 0;  // format 3 counts from the header's end
  const uint32_t data_format = hsize == kHeaderSize10 ? kDataVersion10 : kDataVersion;
  auto damaged = [&](const std::string& what) {
    return Status::Corruption(path + ": page " + std::to_string(spot.pgno) + " is not the leaf page the index found (" +
                              what + "): the file changed or is damaged");
  };
  const PageHeader h = PageHeader::Parse(page, hsize, base);
  if (h.pgno != spot.pgno) return damaged("its header says page " + std::to_string(h.pgno));
  if ((h.flags & (kPageBranch | kPageLeaf | kPageOverflow | kPageMeta | kPageLeaf2 | kPageSub)) != kPageLeaf)
    return damaged("flags " + std::to_string(h.flags));
  if (h.lower < hsize || (h.lower & 1) || h.lower > h.upper || h.upper > psize)
    return damaged("free-space bounds " + std::to_string(h.lower) + ".." + std::to_string(h.upper));
  const uint64_t nodes = (h.lower - hsize) / 2;
  if (nodes != spot.nodes || spot.node >= nodes)
    return damaged(std::to_string(nodes) + " nodes, not " + std::to_string(spot.nodes));
  const uint64_t ptr = Load<uint16_t>(page + hsize + 2 * uint64_t{spot.node}) + base;
  if (ptr < h.upper || ptr + kNodeSize > psize) return damaged("node " + std::to_string(spot.node) + " lies outside it");
  const char* node = page + ptr;
  const uint64_t dsize = Load<uint16_t>(node) | (uint64_t{Load<uint16_t>(node + 2)} << 16);
  const uint16_t flags = Load<uint16_t>(node + 4);
  const uint64_t ksize = Load<uint16_t>(node + 6);
  const uint64_t data_pos = ptr + kNodeSize + KeySpan(ksize, data_format);
  if (flags != 0) return damaged("node " + std::to_string(spot.node) + " has flags " + std::to_string(flags));
  if (data_pos > psize || dsize > psize - data_pos)
    return damaged("node " + std::to_string(spot.node) + " runs past the page");
  if (key != nullptr && (ksize != key->size() || std::memcmp(node + kNodeSize, key->data(), ksize) != 0))
    return damaged("node " + std::to_string(spot.node) + " holds another key");
  *at = static_cast<uint32_t>(data_pos);
  *size = static_cast<uint32_t>(dsize);
  return Status::OK();
}

}  // namespace lmdbloader
