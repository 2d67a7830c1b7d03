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
#include "io/chunk_filler.h"
#include "io/read_retry.h"
#include "lmdb/leaf_table.h"
#include "lmdb/paged_index.h"
#include "lmdb/record_key.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Rep::HoldLeaves(Part* part) {
  const PagedIndex* paged = part->index.paged_index();
  const uint64_t bytes = paged ? paged->leaf_table_bytes() : 0;
  const IndexResidence rule = options_.index_residence;
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
  const FileIdentity& id = part.index.identity;
  const LeafPageFormat format{id.page_size, id.page_header};
  const std::string& path = part.location.data_path;
  // Each record's leaf; the batch's distinct leaves, each read once.
  std::vector<LeafSpot> spots(count);
  std::vector<std::pair<uint64_t, size_t>> by_page;  // (leaf page, record k)
  std::vector<size_t> elsewhere;                     // records on no usable leaf
  by_page.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    value_at[k] = LeafBatch::kNone;
    if (table.Find(locals[k], &spots[k])) by_page.emplace_back(spots[k].pgno, k);
    else elsewhere.push_back(k);
  }
  std::sort(by_page.begin(), by_page.end());
  std::vector<uint64_t> page_of(count);  // offset of record k's page in leaves->pages
  std::vector<ReadRequest> reads;
  const uint64_t first_page = leaves->pages.size();
  uint64_t pages = 0;
  for (size_t j = 0; j < by_page.size(); ++j)
    if (j == 0 || by_page[j].first != by_page[j - 1].first) ++pages;
  leaves->pages.resize(first_page + pages * id.page_size);
  reads.reserve(pages);
  for (size_t j = 0; j < by_page.size(); ++j) {
    const uint64_t pgno = by_page[j].first;
    if (j == 0 || pgno != by_page[j - 1].first) {
      // The table came from a checked walk of this very file (its identity
      // matched), so a page past its end means the file shrank since.
      if ((pgno + 1) * id.page_size > id.size)
        return Status::Corruption(path + ": leaf page " + std::to_string(pgno) +
                                  " lies past the end of the file: the file changed since it was indexed");
      ReadRequest r;
      r.fd = part.fd;
      r.offset = pgno * id.page_size;
      r.size = id.page_size;
      r.dst = leaves->pages.data() + first_page + reads.size() * id.page_size;
      r.path = &path;
      reads.push_back(r);
    }
    page_of[by_page[j].second] = first_page + (reads.size() - 1) * id.page_size;
  }
  if (!reads.empty()) {
    auto read_all = [&]() -> Status {
      if (reads.size() > 1 && io_) return io_->ReadAll(reads.data(), reads.size());
      for (const ReadRequest& r : reads) LMDBLOADER_RETURN_IF_ERROR(PreadFully(r));
      return Status::OK();
    };
    LMDBLOADER_RETURN_IF_ERROR(WithReadRetries(read_all));
    if (cache_policy_ == CachePolicy::kDrop)
      for (const ReadRequest& r : reads) DropFromPageCache(r.fd, r.offset, r.size);
    leaf_page_reads_.fetch_add(reads.size(), std::memory_order_relaxed);
  }
  std::string key;
  for (const auto& [pgno, k] : by_page) {
    uint32_t at = 0, size = 0;
    // A database keyed by record numbers (a corpus) has its key checked too.
    if (part.index.sequential_keys()) key = RecordKey(locals[k]);
    LMDBLOADER_RETURN_IF_ERROR(LeafValue(leaves->pages.data() + page_of[k], spots[k], format,
                                         part.index.sequential_keys() ? &key : nullptr, path, &at, &size));
    locations[k] = ValueLocation{pgno * id.page_size + at, size};
    value_at[k] = page_of[k] + at;
  }
  leaf_values_.fetch_add(by_page.size(), std::memory_order_relaxed);
  leaves->any = leaves->any || !by_page.empty();
  if (elsewhere.empty()) return Status::OK();
  std::vector<uint64_t> rest(elsewhere.size());
  std::vector<ValueLocation> found(elsewhere.size());
  for (size_t j = 0; j < elsewhere.size(); ++j) rest[j] = locals[elsewhere[j]];
  LMDBLOADER_RETURN_IF_ERROR(part.index.Locate(rest.data(), rest.size(), found.data(), io_.get()));
  for (size_t j = 0; j < elsewhere.size(); ++j) locations[elsewhere[j]] = found[j];
  return Status::OK();
}

}  // namespace lmdbloader
