#include "lmdb/leaf_table.h"

#include <cstring>

#include "lmdb/lmdb_page_layout.h"

namespace lmdbloader {

using namespace lmdb_layout;  // NOLINT: this file reads leaf pages

void LeafTable::Close() {
  if (!open_) return;
  if (current_pgno_ > UINT32_MAX || current_first_ > UINT32_MAX) too_large_ = true;
  pgnos_.push_back(current_usable_ ? static_cast<uint32_t>(current_pgno_) : 0);
  firsts_.push_back(static_cast<uint32_t>(current_first_));
  usable_ += current_usable_;
  open_ = false;
}

void LeafTable::Note(uint64_t leaf_pgno, bool record, bool inline_record) {
  if (!open_ || leaf_pgno != current_pgno_) {
    Close();
    open_ = true;
    current_pgno_ = leaf_pgno;
    current_first_ = records_;
    current_usable_ = leaf_pgno >= 2;
  }
  // One item that is not an inline record (metadata among the records, an
  // overflow value) shifts or hides the node of every record after it.
  if (!record || !inline_record) current_usable_ = false;
  records_ += record;
}

void LeafTable::Finish() {
  Close();
  // A leaf that holds no record at all (only metadata) stays: it keeps the
  // first records of the next leaves apart. Nothing usable: nothing held.
  if (too_large_ || records_ > UINT32_MAX || usable_ == 0) {
    pgnos_ = {};
    firsts_ = {};
    usable_ = 0;
  } else {
    pgnos_.shrink_to_fit();
    firsts_.shrink_to_fit();
  }
}

std::string LeafTable::Encode() const {
  std::string out(pgnos_.size() * kLeafEntryBytes, '\0');
  for (size_t k = 0; k < pgnos_.size(); ++k) {
    std::memcpy(&out[k * kLeafEntryBytes], &pgnos_[k], 4);
    std::memcpy(&out[k * kLeafEntryBytes + 4], &firsts_[k], 4);
  }
  return out;
}

Status LeafTable::Decode(std::string_view bytes, uint64_t records, const std::string& path, LeafTable* table) {
  auto damaged = [&](const std::string& what) {
    return Status::Corruption("index file " + path + ": its table of leaf pages " + what);
  };
  if (bytes.size() % kLeafEntryBytes != 0) return damaged("is not a whole number of entries");
  const size_t n = bytes.size() / kLeafEntryBytes;
  LeafTable t;
  t.pgnos_.resize(n);
  t.firsts_.resize(n);
  t.records_ = records;
  for (size_t k = 0; k < n; ++k) {
    std::memcpy(&t.pgnos_[k], bytes.data() + k * kLeafEntryBytes, 4);
    std::memcpy(&t.firsts_[k], bytes.data() + k * kLeafEntryBytes + 4, 4);
  }
  for (size_t k = 0; k < n; ++k) {
    const uint64_t end = k + 1 < n ? t.firsts_[k + 1] : records;
    if (t.pgnos_[k] == 1) return damaged("names meta page 1 as a leaf");
    if ((k == 0 && t.firsts_[k] != 0) || end < t.firsts_[k] || end > records)
      return damaged("is out of order at leaf " + std::to_string(k));
    // A usable leaf holds at least one record.
    if (t.pgnos_[k] != 0 && end == t.firsts_[k]) return damaged("holds an empty leaf at " + std::to_string(k));
    t.usable_ += t.pgnos_[k] != 0;
  }
  *table = std::move(t);
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
