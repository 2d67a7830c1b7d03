// Reader: where the records of several parts lie (LocateParts), and reads
// that take small values out of their LMDB leaf pages (the table of leaves,
// lmdb/leaf_table.h, held beside a paged index): a batch's lookup reads each
// record's leaf page once, all of the batch's together through the reader's
// I/O engine, checks it, and keeps the pages for the batch's read to copy the
// values from (LeafBatch).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "io/batch_io.h"
#include "lmdb/leaf_table.h"
#include "lmdb/paged_index.h"
#include "lmdb/record_key.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Rep::HoldLeaves(Part* part) {
  const PagedIndex* paged = part->index.paged_index();
  const uint64_t bytes = paged ? paged->leaf_table_bytes() : 0;
  const IndexResidence rule = options_.index_residence;
  // Views and mapped reads take values from the map, not from reads.
  if (mode_ != AccessMode::kPread) return Status::OK();
  // kAuto: only when the table fits the index's share of the budget, as a
  // resident index must.
  if (bytes == 0 || !(rule == IndexResidence::kLeaves || (rule == IndexResidence::kAuto && bytes <= resident_index_cap_)))
    return Status::OK();
  auto leaves = std::make_shared<LeafTable>();
  LMDBLOADER_RETURN_IF_ERROR(paged->ReadLeaves(leaves.get()));
  if (!leaves->empty()) part->index.UseLeaves(std::move(leaves));
  return Status::OK();
}

Status Reader::Rep::LocateParts(Part* const* parts, const uint64_t* locals, size_t count,
                                ValueLocation* locations, LeafBatch* leaves) const {
  // A part at a time, so that a paged index sees every record of its part together.
  std::vector<uint64_t> mine;
  std::vector<ValueLocation> found;
  std::vector<size_t> at;
  std::vector<uint64_t> value_at;
  if (leaves) leaves->value_at.assign(count, LeafBatch::kNone);
  for (size_t first = 0; first < count; ++first) {
    if (first > 0 && std::find(parts, parts + first, parts[first]) != parts + first) continue;
    mine.clear();
    at.clear();
    for (size_t k = first; k < count; ++k)
      if (parts[k] == parts[first]) {
        mine.push_back(locals[k]);
        at.push_back(k);
      }
    found.resize(mine.size());
    if (leaves && parts[first]->index.leaves()) {
      value_at.resize(mine.size());
      LMDBLOADER_RETURN_IF_ERROR(
          LocateInLeaves(*parts[first], mine.data(), mine.size(), found.data(), leaves, value_at.data()));
      for (size_t j = 0; j < at.size(); ++j) leaves->value_at[at[j]] = value_at[j];
    } else {
      LMDBLOADER_RETURN_IF_ERROR(parts[first]->index.Locate(mine.data(), mine.size(), found.data(), io_.get()));
    }
    for (size_t j = 0; j < at.size(); ++j) locations[at[j]] = found[j];
  }
  return Status::OK();
}

Status Reader::Rep::LocateInLeaves(const Part& part, const uint64_t* locals, size_t count, ValueLocation* locations,
                                   LeafBatch* leaves, uint64_t* value_at) const {
  const LeafTable& table = *part.index.leaves();
  const LeafShape& shape = table.shape();
  const FileIdentity& id = part.index.identity;
  const LeafPageFormat format{id.page_size, id.page_header};
  const std::string& path = part.location.data_path;
  // Each record's leaf: a regular leaf's record is read alone (its node),
  // another leaf's page once for the records of the batch it holds.
  std::vector<LeafSpot> spots(count);
  std::vector<std::pair<uint64_t, size_t>> by_page;  // (leaf page, record k), irregular leaves
  std::vector<size_t> regular, elsewhere;             // records on regular leaves; on no usable leaf
  for (size_t k = 0; k < count; ++k) {
    value_at[k] = LeafBatch::kNone;
    if (!table.Find(locals[k], &spots[k])) elsewhere.push_back(k);
    else if (spots[k].regular) regular.push_back(k);
    else by_page.emplace_back(spots[k].pgno, k);
  }
  std::sort(by_page.begin(), by_page.end());
  uint64_t pages = 0;
  for (size_t j = 0; j < by_page.size(); ++j)
    if (j == 0 || by_page[j].first != by_page[j - 1].first) ++pages;
  const uint64_t node_bytes = uint64_t{shape.node_head} + shape.value_size;
  const uint64_t first = leaves->size();
  char* const buf = leaves->Grow(pages * id.page_size + regular.size() * node_bytes);
  std::vector<ReadRequest> reads;
  reads.reserve(pages + regular.size());
  std::vector<uint64_t> read_at(count);  // where in the buffer record k's page or node was read
  auto request = [&](uint64_t offset, uint64_t size, uint64_t at) -> Status {
    // The table came from a checked walk of this very file (its identity
    // matched), so a page past its end means the file shrank since.
    if (offset + size > id.size)
      return Status::Corruption(path + ": a leaf page at offset " + std::to_string(offset) +
                                " lies past the end of the file: the file changed since it was indexed");
    ReadRequest r;
    r.fd = part.fd;
    r.offset = offset;
    r.size = size;
    r.dst = buf + at;
    r.path = &path;
    reads.push_back(r);
    return Status::OK();
  };
  uint64_t at = 0;
  for (size_t j = 0; j < by_page.size(); ++j) {
    if (j == 0 || by_page[j].first != by_page[j - 1].first) {
      LMDBLOADER_RETURN_IF_ERROR(request(by_page[j].first * id.page_size, id.page_size, at));
      at += id.page_size;
    }
    read_at[by_page[j].second] = at - id.page_size;
  }
  for (size_t k : regular) {
    LMDBLOADER_RETURN_IF_ERROR(request(spots[k].node_offset, node_bytes, at));
    read_at[k] = at;
    at += node_bytes;
  }
  if (!reads.empty()) {
    // As the values' own reads go: the cache policy (read-around windows,
    // chunk fills, drops), retries, many in flight through the engine.
    const std::vector<const Part*> reading(reads.size(), &part);
    LMDBLOADER_RETURN_IF_ERROR(ReadRequests(reads.data(), reading.data(), reads.size()));
    leaf_page_reads_.fetch_add(pages, std::memory_order_relaxed);
  }
  // A database keyed by record numbers (a corpus) has its keys checked too.
  const bool numbered = part.index.sequential_keys();
  std::string key;
  for (const auto& [pgno, k] : by_page) {
    uint32_t in_page = 0, size = 0;
    if (numbered) key = RecordKey(locals[k]);
    LMDBLOADER_RETURN_IF_ERROR(
        LeafValue(buf + read_at[k], spots[k], format, numbered ? &key : nullptr, path, &in_page, &size));
    locations[k] = ValueLocation{pgno * id.page_size + in_page, size};
    value_at[k] = first + read_at[k] + in_page;
  }
  for (size_t k : regular) {
    if (numbered) key = RecordKey(locals[k]);
    LMDBLOADER_RETURN_IF_ERROR(
        LeafNodeCheck(buf + read_at[k], spots[k], shape, format, numbered ? &key : nullptr, path));
    locations[k] = ValueLocation{spots[k].value_offset, shape.value_size};
    value_at[k] = first + read_at[k] + shape.node_head;
  }
  leaf_values_.fetch_add(by_page.size() + regular.size(), std::memory_order_relaxed);
  leaf_nodes_.fetch_add(regular.size(), std::memory_order_relaxed);
  leaves->any = leaves->any || by_page.size() + regular.size() > 0;
  if (elsewhere.empty()) return Status::OK();
  std::vector<uint64_t> rest(elsewhere.size());
  std::vector<ValueLocation> found(elsewhere.size());
  for (size_t j = 0; j < elsewhere.size(); ++j) rest[j] = locals[elsewhere[j]];
  LMDBLOADER_RETURN_IF_ERROR(part.index.Locate(rest.data(), rest.size(), found.data(), io_.get()));
  for (size_t j = 0; j < elsewhere.size(); ++j) locations[elsewhere[j]] = found[j];
  return Status::OK();
}

}  // namespace lmdbloader
