// Reader: reads, batches, views, keys and stats (reader_open.cc opens,
// reader_corpus.cc reads corpus metadata).
#include "lmdbloader/reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>

#include "base/checksum.h"
#include "io/batch_io.h"
#include "io/open_file.h"
#include "io/read_retry.h"
#include "io/residency.h"
#include "corpus/corpus_format.h"
#include "lmdb/paged_index.h"
#include "reader/reader_rep.h"

namespace lmdbloader {

Status Reader::Rep::LocateSlot(uint64_t index, size_t* slot, uint64_t* local) const {
  if (index >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, index, size_));
  if (parts_.size() == 1) {
    *slot = 0;
    *local = index;
    return Status::OK();
  }
  *slot = static_cast<size_t>(std::upper_bound(part_ends_.begin(), part_ends_.end(), index) - part_ends_.begin());
  *local = index - (*slot == 0 ? 0 : part_ends_[*slot - 1]);
  return Status::OK();
}

Status Reader::Rep::Locate(uint64_t index, Part** part, uint64_t* local) const {
  size_t slot = 0;
  LMDBLOADER_RETURN_IF_ERROR(LocateSlot(index, &slot, local));
  *part = parts_[slot].get();
  return Status::OK();
}

unsigned Reader::db_flags() const {
  return rep_->file_set_ ? rep_->set_db_flags_ : rep_->parts_.front()->index.db_flags();
}

Status Reader::ValueSize(uint64_t index, uint64_t* size) const { return ValueSizes(&index, 1, size); }

Status Reader::ValueSizes(const uint64_t* indices, size_t count, uint64_t* sizes) const {
  size_t first = 0;
  do {
    const size_t n = rep_->FileSetChunk(indices + first, count - first);
    LMDBLOADER_RETURN_IF_ERROR(rep_->ValueSizesOf(indices + first, n, sizes + first));
    first += n;
  } while (first < count);
  return Status::OK();
}

Status Reader::Rep::ValueSizesOf(const uint64_t* indices, size_t count, uint64_t* sizes) const {
  std::vector<Part*> parts(count);
  std::vector<uint64_t> locals(count);
  std::vector<ValueLocation> at(count);
  PartPins pins;
  LMDBLOADER_RETURN_IF_ERROR(LocateAll(indices, count, parts.data(), locals.data(), at.data(), &pins));
  if (file_set_ && !CheckUnchanged(parts.data(), count).ok()) {
    // A file written since it was indexed: indexed again (EnsureOpen), so
    // that the sizes are those the batch's read then finds.
    pins.Release();
    LMDBLOADER_RETURN_IF_ERROR(LocateAll(indices, count, parts.data(), locals.data(), at.data(), &pins));
  }
  for (size_t k = 0; k < count; ++k) sizes[k] = at[k].size;
  return Status::OK();
}

namespace {

// The last batch a thread located through a paged index, by the reader's
// id: callers ask a batch's sizes (to allocate) and then read it, and each
// lookup of a paged index may cost a pread, so the second finds the first's
// answer here. At most kMemoRecords records are kept.
struct LocatedBatch {
  uint64_t reader = 0;  // Reader::Rep::id_; 0: empty
  uint64_t epoch = 0;   // Reader::Rep::index_epoch_ when located
  std::vector<uint64_t> indices;
  std::vector<ValueLocation> at;
  LeafBatch leaves;  // the leaf pages read for it, when some values lie in them
};
constexpr size_t kMemoRecords = 1 << 16;
thread_local LocatedBatch t_located;
std::atomic<uint64_t> g_reader_ids{0};

}  // namespace

Reader::Rep::Rep() : id_(g_reader_ids.fetch_add(1) + 1) {}

Status Reader::Rep::LocateAll(const uint64_t* indices, size_t count, Part** parts, uint64_t* locals,
                              ValueLocation* locations, PartPins* pins, const LeafBatch** leaves) const {
  std::vector<size_t> slots(count);
  for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(LocateSlot(indices[k], &slots[k], &locals[k]));
  LMDBLOADER_RETURN_IF_ERROR(PinSlots(slots.data(), count, parts, pins));
  if (!any_paged_) {
    if (parts_.size() == 1) return parts_[0]->index.Locate(locals, count, locations);
  } else {
    LocatedBatch& memo = t_located;
    const uint64_t epoch = index_epoch_.load(std::memory_order_acquire);
    if (memo.reader == id_ && memo.epoch == epoch && memo.indices.size() == count &&
        std::equal(indices, indices + count, memo.indices.begin())) {
      std::copy(memo.at.begin(), memo.at.end(), locations);
      if (leaves && memo.leaves.any) *leaves = &memo.leaves;
      return Status::OK();
    }
    memo.reader = 0;
    memo.leaves.Clear();
    // The leaves' pages are kept for the batch's read: batches up to
    // kLeafBatchBytes of them (a page a record at most).
    const bool by_leaves = count > 0 && count * parts[0]->index.identity.page_size <= kLeafBatchBytes;
    if (parts_.size() == 1 && by_leaves && parts[0]->index.leaves()) {
      memo.leaves.value_at.resize(count);
      LMDBLOADER_RETURN_IF_ERROR(
          LocateInLeaves(*parts[0], locals, count, locations, &memo.leaves, memo.leaves.value_at.data()));
    } else if (parts_.size() == 1) {
      LMDBLOADER_RETURN_IF_ERROR(parts_[0]->index.Locate(locals, count, locations, io_.get()));
    } else {
      LMDBLOADER_RETURN_IF_ERROR(LocateParts(parts, locals, count, locations, by_leaves ? &memo.leaves : nullptr));
    }
    if (leaves && memo.leaves.any) *leaves = &memo.leaves;
    if (count <= kMemoRecords) {
      memo.indices.assign(indices, indices + count);
      memo.at.assign(locations, locations + count);
      memo.reader = id_;
      memo.epoch = epoch;
    }
    return Status::OK();
  }
  return LocateParts(parts, locals, count, locations);
}

Status Reader::Rep::PreadAt(Part& part, uint64_t offset, uint64_t size, char* dst) {
  ReadRequest r;
  r.fd = part.fd;
  r.offset = offset;
  r.size = size;
  r.dst = dst;
  r.path = &part.location.data_path;
  const Part* parts[1] = {&part};
  return ReadRequests(&r, parts, 1);
}

Status Reader::Rep::ReadRequests(const ReadRequest* requests, const Part* const* parts, size_t count) const {
  if (cache_policy_ == CachePolicy::kFill) {
    // Only what is left to fill: a warm read allocates nothing here.
    std::vector<ChunkFiller::Range> ranges;
    for (size_t k = 0; k < count; ++k) {
      ChunkFiller* filler = parts[k]->filler.get();
      if (filler && filler->NeedsFill(requests[k].offset, requests[k].size))
        ranges.push_back({filler, requests[k].offset, requests[k].size});
    }
    if (!ranges.empty()) ChunkFiller::FillTogether(ranges, FillParallel());
  } else if (read_around_) {
    // Asks the kernel for each small record's window without waiting: the
    // record's own read below then waits for the one request that brings it.
    for (size_t k = 0; k < count; ++k) {
      if (!ReadsAround(requests[k].size)) continue;
      const uint64_t start = requests[k].offset & ~(kReadAroundWindow - 1);
      (void)::posix_fadvise(requests[k].fd, static_cast<off_t>(start), static_cast<off_t>(kReadAroundWindow),
                            POSIX_FADV_WILLNEED);
    }
  }
  Status s = WithReadRetries([&] { return count == 1 ? PreadFully(requests[0]) : io_->ReadAll(requests, count); });
  if (cache_policy_ == CachePolicy::kDrop)
    for (size_t k = 0; k < count; ++k) DropFromPageCache(requests[k].fd, requests[k].offset, requests[k].size);
  return s;
}

Status Reader::Rep::CopyOut(Part& part, uint64_t local, const ValueLocation& at, char* dst, const LeafBatch* leaves) {
  const uint64_t offset = at.offset;
  const uint64_t size = at.size;
  if (mode_ == AccessMode::kPread && leaves && leaves->Copy(0, size, dst)) {
    t_located.reader = 0;  // read once, as a batch's are
  } else if (mode_ == AccessMode::kPread) {
    LMDBLOADER_RETURN_IF_ERROR(PreadAt(part, offset, size, dst));
  } else {
    LMDBLOADER_RETURN_IF_ERROR(CopyMapped(part, offset, size, dst));
    LMDBLOADER_RETURN_IF_ERROR(NoteMapped(part, offset, size));
  }
  LMDBLOADER_RETURN_IF_ERROR(CheckSnapshot());
  Part* self[1] = {&part};
  LMDBLOADER_RETURN_IF_ERROR(CheckUnchanged(self, 1));
  LMDBLOADER_RETURN_IF_ERROR(VerifyRecord(part, local, dst, size));
  records_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(size, std::memory_order_relaxed);
  return Status::OK();
}

Status Reader::Rep::NoteMapped(Part& part, uint64_t offset, uint64_t size) {
  LMDBLOADER_RETURN_IF_ERROR(governor_->Touched(part.slot, offset, size));
  if (options_.remap_every && bytes_since_remap_.fetch_add(size) + size >= options_.remap_every)
    return Remap();
  return Status::OK();
}

Status Reader::Rep::LocateOne(uint64_t index, Part** part, uint64_t* local, ValueLocation* at, PartPins* pins,
                              const LeafBatch** leaves) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  return LocateAll(&index, 1, part, local, at, pins, leaves);
}

Status Reader::Rep::ReadOne(uint64_t index, const std::function<Status(uint64_t size, char** dst)>& place) {
  return RereadChanged([&] {
    Part* part = nullptr;
    uint64_t local = 0;
    ValueLocation at;
    PartPins pins;
    const LeafBatch* leaves = nullptr;
    LMDBLOADER_RETURN_IF_ERROR(LocateOne(index, &part, &local, &at, &pins, &leaves));
    char* dst = nullptr;
    LMDBLOADER_RETURN_IF_ERROR(place(at.size, &dst));
    return CopyOut(*part, local, at, dst, leaves);
  });
}

Status Reader::ReadInto(uint64_t index, char* dst, uint64_t capacity) {
  return rep_->ReadOne(index, [&](uint64_t size, char** out) {
    if (capacity < size)
      return Status::InvalidArgument("buffer of " + std::to_string(capacity) + " bytes is too small for record " +
                                     std::to_string(index) + " (" + std::to_string(size) + " bytes)");
    *out = dst;
    return Status::OK();
  });
}

Status Reader::Read(uint64_t index, std::string* value) {
  return rep_->ReadOne(index, [&](uint64_t size, char** out) {
    value->resize(size);
    *out = value->data();
    return Status::OK();
  });
}

Status Reader::ReadBatch(const uint64_t* indices, size_t count, char* const* dsts) {
  LMDBLOADER_RETURN_IF_ERROR(rep_->EnsureProcess());
  for (size_t k = 0; k < count; ++k)
    if (indices[k] >= rep_->size_) return Status::OutOfRange(OutOfRangeMessage(rep_->path_, indices[k], rep_->size_));
  for (size_t first = 0; first < count;) {
    const size_t n = rep_->FileSetChunk(indices + first, count - first);
    // The caller sized dsts by ValueSizes: a retry after a file was indexed
    // again reads into them only while the sizes stay (ReadBatchOf).
    std::vector<uint64_t> sizes;
    LMDBLOADER_RETURN_IF_ERROR(
        rep_->RereadChanged([&] { return rep_->ReadBatchOf(indices + first, n, dsts + first, &sizes); }));
    first += n;
  }
  return Status::OK();
}

Status Reader::Rep::ReadBatchOf(const uint64_t* indices, size_t count, char* const* dsts,
                                std::vector<uint64_t>* sizes) {
  std::vector<Part*> parts(count);
  std::vector<uint64_t> locals(count);
  std::vector<ValueLocation> at(count);
  PartPins pins;
  const LeafBatch* leaves = nullptr;
  LMDBLOADER_RETURN_IF_ERROR(LocateAll(indices, count, parts.data(), locals.data(), at.data(), &pins, &leaves));
  if (sizes->empty()) {
    for (size_t k = 0; k < count; ++k) sizes->push_back(at[k].size);
  } else {
    for (size_t k = 0; k < count; ++k)
      if (at[k].size != (*sizes)[k])
        return Status::Corruption(parts[k]->location.data_path + ": the file changed since it was indexed, and record " +
                                  std::to_string(indices[k]) + " is " + std::to_string(at[k].size) + " bytes now, not " +
                                  std::to_string((*sizes)[k]) + ": read the batch again");
  }
  if (mode_ == AccessMode::kMmap || (count == 1 && leaves == nullptr)) {
    Prefetch(indices, count);
    for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(CopyOut(*parts[k], locals[k], at[k], dsts[k]));
    return Status::OK();
  }
  // Values the batch's leaf pages hold are copied out of them; the rest read.
  std::vector<ReadRequest> requests;
  std::vector<const Part*> reading;
  requests.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    if (leaves && leaves->Copy(k, at[k].size, dsts[k])) continue;
    ReadRequest r;
    r.fd = parts[k]->fd;
    r.offset = at[k].offset;
    r.size = at[k].size;
    r.dst = dsts[k];
    r.path = &parts[k]->location.data_path;
    requests.push_back(r);
    reading.push_back(parts[k]);
  }
  if (!requests.empty()) LMDBLOADER_RETURN_IF_ERROR(ReadRequests(requests.data(), reading.data(), requests.size()));
  LMDBLOADER_RETURN_IF_ERROR(CheckSnapshot());
  LMDBLOADER_RETURN_IF_ERROR(CheckUnchanged(parts.data(), count));
  // Checksums a corpus keeps in its file (a paged index) come in one batch too.
  std::vector<uint64_t> sums;
  if (options_.verify_checksums != ChecksumPolicy::kOff)
    for (size_t k = 0; k < count && sums.empty(); ++k)
      if (parts[k]->checksum_column.size != 0) {
        sums.resize(count);
        LMDBLOADER_RETURN_IF_ERROR(ReadChecksums(parts.data(), locals.data(), count, sums.data()));
      }
  uint64_t bytes = 0;
  for (size_t k = 0; k < count; ++k) {
    LMDBLOADER_RETURN_IF_ERROR(
        VerifyRecord(*parts[k], locals[k], dsts[k], at[k].size, sums.empty() ? nullptr : &sums[k]));
    bytes += at[k].size;
  }
  // The values taken from leaf pages are read once: a later lookup of the
  // same batch reads its leaves again.
  if (leaves) t_located.reader = 0;
  records_read_.fetch_add(count, std::memory_order_relaxed);
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

Status Reader::View(uint64_t index, RecordView* view) {
  if (rep_->mode_ != AccessMode::kMmap)
    return Status::InvalidArgument("views need mode=mmap; " + rep_->path_ + " was opened in pread mode");
  Rep::Part* part = nullptr;
  uint64_t local = 0;
  ValueLocation at;
  Rep::PartPins pins;
  LMDBLOADER_RETURN_IF_ERROR(rep_->LocateOne(index, &part, &local, &at, &pins));
  const uint64_t offset = at.offset;
  const uint64_t size = at.size;
  // The governor reads the kernel's count, which shows the pages touched
  // through earlier views: a caller's touches are bounded one read late.
  LMDBLOADER_RETURN_IF_ERROR(rep_->NoteMapped(*part, offset, size));
  std::shared_ptr<Mapping> map = std::atomic_load(&part->map);
  Status verified = rep_->VerifyRecord(*part, local, map->data() + offset, size);
  if (map->shrank()) {
    // The view would point at zeros: a mapping of its own, read again.
    LMDBLOADER_RETURN_IF_ERROR(rep_->RemapAfterFailedRead(*part, map));
    map = std::atomic_load(&part->map);
    verified = rep_->VerifyRecord(*part, local, map->data() + offset, size);
    if (map->shrank()) return rep_->MappedReadFailed(*part, /*lasting=*/true);
  }
  LMDBLOADER_RETURN_IF_ERROR(rep_->CheckSnapshot());
  Rep::Part* self[1] = {part};
  LMDBLOADER_RETURN_IF_ERROR(rep_->CheckUnchanged(self, 1));
  LMDBLOADER_RETURN_IF_ERROR(verified);
  *view = RecordView(map->data() + offset, size, map);
  rep_->records_read_.fetch_add(1, std::memory_order_relaxed);
  rep_->bytes_read_.fetch_add(size, std::memory_order_relaxed);
  return Status::OK();
}

unsigned Reader::Rep::FillParallel() const {
  // 4 at once: on a virtio disk, 8 were no faster than 4 (docs/NOTES.md, "Cold reads
  // and the page cache"). Each chunk being filled is mapped (2 MiB of RSS)
  // until its read ends: the budget keeps those to an eighth of itself.
  return budget_.ChunkFillsInFlight(ChunkFiller::kChunk, 4);
}

void Reader::Rep::Prefetch(const uint64_t* indices, size_t count) {
  // Dropping pages behind the reads is for corpora bigger than RAM: nothing
  // read ahead of them.
  if ((mode_ == AccessMode::kPread && cache_policy_ == CachePolicy::kDrop) || !EnsureProcess().ok()) return;
  std::vector<ChunkFiller::Range> ranges;
  std::vector<Part*> parts(count);
  std::vector<uint64_t> locals(count);
  std::vector<ValueLocation> at(count);
  // The reads that follow report what is wrong; a hint has nothing to say.
  PartPins pins;
  if (!LocateAll(indices, count, parts.data(), locals.data(), at.data(), &pins).ok()) return;
  for (size_t k = 0; k < count; ++k) {
    Part* part = parts[k];
    const uint64_t offset = at[k].offset, size = at[k].size;
    if (part->filler) {
      if (part->filler->NeedsFill(offset, size)) ranges.push_back({part->filler.get(), offset, size});
    } else if (size > 0) {
      // Through the descriptor, not the mapping: no mmap lock, and on a warm
      // cache (nothing to read) 0.2 us a record against madvise's 0.35.
      (void)::posix_fadvise(part->fd, static_cast<off_t>(offset), static_cast<off_t>(size), POSIX_FADV_WILLNEED);
    }
  }
  if (!ranges.empty()) ChunkFiller::FillTogether(ranges, FillParallel());
}

Status Reader::ViewBatch(const uint64_t* indices, size_t count, RecordView* views) {
  if (rep_->mode_ != AccessMode::kMmap)
    return Status::InvalidArgument("views need mode=mmap; " + rep_->path_ + " was opened in pread mode");
  LMDBLOADER_RETURN_IF_ERROR(rep_->EnsureProcess());
  for (size_t k = 0; k < count; ++k)
    if (indices[k] >= rep_->size_) return Status::OutOfRange(OutOfRangeMessage(rep_->path_, indices[k], rep_->size_));
  rep_->Prefetch(indices, count);
  for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(View(indices[k], &views[k]));
  return Status::OK();
}

Status Reader::CheckMappings() const {
  if (rep_->mode_ != AccessMode::kMmap) return rep_->CheckSnapshot();
  for (const auto& p : rep_->parts_) {
    std::shared_ptr<Mapping> map = std::atomic_load(&p->map);
    if (map && map->shrank()) return rep_->MappedReadFailed(*p, /*lasting=*/true);
  }
  return rep_->CheckSnapshot();
}

Status Reader::Rep::Remap() {
  if (mode_ != AccessMode::kMmap) return Status::InvalidArgument("Remap needs mode=mmap");
  std::lock_guard<std::mutex> lock(reopen_mu_);
  for (size_t i = 0; i < parts_.size(); ++i) {
    Part& p = *parts_[i];
    std::shared_ptr<Mapping> fresh;
    LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(p.fd, p.index.identity.size, p.location.data_path, &fresh));
    std::shared_ptr<Mapping> old = std::atomic_exchange(&p.map, fresh);
    governor_->Attach(i, fresh->data(), fresh->size());
    // Live views keep `old` mapped; release its pages now (they refault from
    // the page cache if a view reads them again).
    if (old && old->size()) ::madvise(const_cast<char*>(old->data()), old->size(), MADV_DONTNEED);
  }
  bytes_since_remap_.store(0);
  remaps_.fetch_add(1);
  return Status::OK();
}

ReaderStats Reader::stats() {
  ReaderStats s;
  s.rss_budget = rep_->options_.rss_budget;
  s.mode = AccessModeName(rep_->mode_);
  s.lmdb_format = rep_->file_set_ ? rep_->set_format_ : (rep_->parts_.front()->index.identity.page_header == 24 ? 3 : 1);
  s.records = rep_->size_;
  StatmProbe statm;
  // stats() reports what it can: an unreadable statm leaves the two at 0.
  if (statm.Open().ok() && !statm.Read(&s.process_rss, &s.process_file_rss).ok()) s.process_rss = s.process_file_rss = 0;
  s.files = rep_->parts_.size();
  // A file set's parts come and go as other threads read (Forget).
  std::unique_lock<std::mutex> parts_lock(rep_->parts_mu_, std::defer_lock);
  if (rep_->file_set_) parts_lock.lock();
  s.files_open = rep_->file_set_ ? rep_->open_parts_.size() : rep_->parts_.size();
  s.files_skipped = rep_->skipped_files_.size();
  for (const auto& p : rep_->parts_) {
    if (!p) continue;
    uint64_t rss = 0;
    // A file set maps nothing (pread only), and reading smaps once per file
    // of thousands would cost seconds.
    if (!rep_->file_set_ && MappedFileRss(0, p->location.data_path, &rss).ok()) s.mapped_rss += rss;
    s.index_bytes += p->index.MemoryBytes();
    s.checksum_bytes += p->checksums.size() * 8 + (p->verified ? p->verified->bytes() : 0);
    const char* residence = p->index.leaves() ? "leaves" : p->index.paged() ? "paged" : "resident";
    if (s.index_residence.empty()) s.index_residence = residence;
    else if (("+" + s.index_residence + "+").find(std::string("+") + residence + "+") == std::string::npos)
      s.index_residence += std::string("+") + residence;
    if (const PagedIndex* paged = p->index.paged_index()) {
      s.index_cache_held += paged->cache_held();
      s.index_page_reads += paged->page_reads();
      s.index_entry_reads += paged->entry_reads();
      s.index_cache_hits += paged->cache_hits();
    }
  }
  s.leaf_page_reads = rep_->leaf_page_reads_.load();
  s.leaf_values_read = rep_->leaf_values_.load();
  s.leaf_node_reads = rep_->leaf_nodes_.load();
  s.drops = rep_->governor_ ? rep_->governor_->drops() : 0;
  s.remaps = rep_->remaps_.load();
  s.records_read = rep_->records_read_.load();
  s.bytes_read = rep_->bytes_read_.load();
  s.index_source = rep_->index_source_;
  if (rep_->io_) {
    s.io_engine = IoEngineName(rep_->io_->kind());
    s.io_fallback = rep_->io_fallback_;
    s.queue_depth = rep_->io_->kind() == IoEngine::kSync ? 1 : rep_->options_.queue_depth;
  } else {
    s.io_engine = "mmap";
    s.queue_depth = 1;
  }
  s.cache_policy = CachePolicyName(rep_->cache_policy_);
  s.file_system = rep_->file_system_;
  s.read_around = rep_->read_around_ ? kReadAroundWindow : 0;
  s.link_requests_us = static_cast<uint64_t>(rep_->link_.requests_s * 1e6);
  s.link_bytes_per_s = static_cast<uint64_t>(rep_->link_.bytes_per_s);
  for (const auto& p : rep_->parts_)
    if (p && p->filler) s.chunks_filled += p->filler->chunks_filled();
  return s;
}

// The accessors, and the two public methods whose work the Rep also does
// for itself (Prefetch before a batch's reads, Remap every remap_every
// bytes): defined in this file so that the compiler can inline them.
uint64_t Reader::size() const { return rep_->size_; }
const std::string& Reader::path() const { return rep_->path_; }
const ReaderOptions& Reader::options() const { return rep_->options_; }
const MemoryBudget& Reader::budget() const { return rep_->budget_; }
AccessMode Reader::mode() const { return rep_->mode_; }
CachePolicy Reader::cache_policy() const { return rep_->cache_policy_; }
bool Reader::is_corpus() const { return !rep_->manifest_.empty(); }
const std::string& Reader::manifest() const { return rep_->manifest_; }
void Reader::Prefetch(const uint64_t* indices, size_t count) { rep_->Prefetch(indices, count); }
Status Reader::Remap() { return rep_->Remap(); }

}  // namespace lmdbloader
