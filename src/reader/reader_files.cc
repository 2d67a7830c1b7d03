// Reader: a set of ordinary LMDB files read as one dataset (file_set.h):
// listing them, opening each as it is read, letting go of the least
// recently used, and the reads that span them.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>

#include "corpus/shard_list.h"
#include "io/batch_io.h"
#include "io/residency.h"
#include "lmdbloader/reader.h"
#include "reader/file_set.h"
#include "reader/reader_rep.h"
#include "reader/set_listing.h"

namespace lmdbloader {

Status Reader::Rep::BeginFileSet(const std::string& name, const ReaderOptions& options) {
  path_ = name;
  options_ = options;
  file_set_ = true;
  generation_ = ForkGeneration();
  if (options.mode == AccessMode::kMmap)
    return Status::InvalidArgument("open " + name + ": mode='mmap' reads one database or a shard set; "
                                   "a set of files is read with pread");
  if (options.lock)
    return Status::InvalidArgument("open " + name + ": lock=True holds each database's snapshot while it is "
                                   "open; a set of files opens and closes them as they are read");
  mode_ = AccessMode::kPread;
  // Files open at once: each holds up to two descriptors (data, paged
  // index), and a quarter of the soft limit is left to them, so that a
  // job under `ulimit -n 256` keeps most of its own.
  struct rlimit limit;
  const uint64_t soft = ::getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  max_open_parts_ = static_cast<size_t>(std::clamp<uint64_t>((soft > 64 ? soft - 64 : 0) / 4, 4, 64));
  // The budget's index share (IndexResidence), held by the files read
  // lately; a file whose index needs more than an eighth of it is paged.
  const uint64_t budget = options.rss_budget;
  index_share_ = budget ? budget / 4 : uint64_t{256} << 20;
  resident_index_cap_ = index_share_ / 8;
  index_cache_bytes_ =
      std::max<uint64_t>(std::min<uint64_t>(budget ? budget / 8 : 4u << 20, 4u << 20) / max_open_parts_, 4096);
  budget_ = MemoryBudget(options.rss_budget, 0);
  return Status::OK();
}

Status Reader::Rep::OpenFileSet(const std::string& name, const std::vector<std::string>& files,
                                const ReaderOptions& options, const SetSource& source) {
  LMDBLOADER_RETURN_IF_ERROR(BeginFileSet(name, options));
  // Each file's record count from its meta pages, read on several threads
  // (lmdb_env.h, CountRecords): a record's position needs the counts of the
  // files before it, and len() all of them. A file that cannot be read so is
  // opened as one database is, which says what is wrong with it.
  std::vector<MetaCount> counts;
  CountRecords(files, options_.db_name, std::clamp(std::thread::hardware_concurrency(), 4u, 16u), &counts);
  std::vector<size_t> kept;  // positions in `files` of those read
  uint64_t total = 0, data_bytes = 0;
  for (size_t k = 0; k < files.size(); ++k) {
    MetaCount count = counts[k];
    if (!count.ok) {
      DataLocation location;
      std::unique_ptr<LmdbEnv> env;
      Status s = CheckFileSetMember(files[k]);
      if (s.ok()) s = ResolveDataLocation(files[k], &location);
      if (s.ok()) s = LmdbEnv::Open(location, false, options_.db_name, &env);
      if (!s.ok()) {
        if (!options.skip_bad_files) return s;
        skipped_files_.push_back(s.message());
        continue;
      }
      count = {true, static_cast<uint8_t>(env->meta().format), static_cast<uint16_t>(env->db_flags()),
               env->tree().entries, env->identity().size};
    }
    if (kept.empty()) {
      set_format_ = count.format;
      set_db_flags_ = count.db_flags;
    }
    kept.push_back(k);
    total += count.records;
    data_bytes += count.file_bytes;
    part_ends_.push_back(total);
  }
  if (kept.empty())
    return Status::Corruption("open " + name + ": none of its " + std::to_string(files.size()) +
                              " files opened (the first: " + skipped_files_.front() + ")");
  // No Part yet: each is made when its file is first read (FilePart).
  parts_.resize(kept.size());
  if (kept.size() == files.size()) {
    member_paths_ = MemberPaths(files);
  } else {
    std::vector<std::string> read;
    for (size_t k : kept) read.push_back(files[k]);
    member_paths_ = MemberPaths(read);
  }
  DataLocation first;
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(files[kept.front()], &first));
  first_data_path_ = first.data_path;
  size_ = total;
  index_source_ = "per file, when it is first read; counts from each file's meta pages";
  // The counts saved for the next open (set_listing.h), when every file
  // counted from its meta pages: a set with files left out or opened the
  // long way is counted again each time, so that they are named each time.
  const std::string listing_path = SetListingPath(source, files, options.db_name, options);
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const bool folder_settled = source.folder.empty() || (source.dir_stat_ok && now_ns - source.dir_mtime_ns >= 1000000000);
  if (!listing_path.empty() && kept.size() == files.size() && folder_settled &&
      std::all_of(counts.begin(), counts.end(), [](const MetaCount& c) { return c.ok; })) {
    SetListing listing;
    listing.source = source;
    listing.db_name = options.db_name;
    listing.format = set_format_;
    listing.db_flags = set_db_flags_;
    listing.data_bytes = data_bytes;
    listing.records.reserve(files.size());
    listing.identities.reserve(files.size());
    for (size_t k = 0; k < files.size(); ++k) {
      const MetaCount& c = counts[k];
      listing.records.push_back(c.records);
      listing.identities.push_back({c.device, c.inode, c.file_bytes, c.mtime_ns, c.ctime_ns, c.txnid});
    }
    std::vector<MetaCount>().swap(counts);
    listing.paths = std::move(member_paths_);
    // A cache: where it cannot be written (a full disk, a read-only home)
    // the set is counted again next time, as before.
    if (SaveSetListing(listing_path, listing).ok()) index_source_ += " (saved to " + listing_path + ")";
    member_paths_ = std::move(listing.paths);
  }
  LMDBLOADER_RETURN_IF_ERROR(ChooseReadPath(first_data_path_, data_bytes));
  return Status::OK();
}

Status Reader::Rep::OpenListedSet(const std::string& name, SetListing* listing, const std::string& listing_path,
                                  const ReaderOptions& options) {
  LMDBLOADER_RETURN_IF_ERROR(BeginFileSet(name, options));
  const size_t n = listing->records.size();
  part_ends_.reserve(n);
  listed_sums_.reserve(n);
  uint64_t total = 0;
  for (size_t k = 0; k < n; ++k) {
    total += listing->records[k];
    part_ends_.push_back(total);
    listed_sums_.push_back(listing->identities[k].Sum());
  }
  // What the listing held beyond the columns kept goes now (10^6 files: 56 MB).
  std::vector<uint64_t>().swap(listing->records);
  std::vector<MemberIdentity>().swap(listing->identities);
  member_paths_ = std::move(listing->paths);
  parts_.resize(n);
  set_format_ = listing->format;
  set_db_flags_ = listing->db_flags;
  listing_path_ = listing_path;
  DataLocation first;
  LMDBLOADER_RETURN_IF_ERROR(ResolveDataLocation(member_paths_[0], &first));
  first_data_path_ = first.data_path;
  size_ = total;
  index_source_ = "per file, when it is first read; counts from the saved listing " + listing_path;
  return ChooseReadPath(first_data_path_, listing->data_bytes);
}

Status Reader::Rep::OpenSameListed(const std::string& name, const std::vector<std::string>& files,
                                   const SetSource& source, const ReaderOptions& options, bool* opened) {
  *opened = false;
  const std::string listing_path = SetListingPath(source, files, options.db_name, options);
  SetListing listing;
  if (listing_path.empty() || !LoadSetListing(listing_path, &listing).ok() || !SameSetSource(listing.source, source) ||
      listing.db_name != options.db_name || (source.folder.empty() && listing.paths.size() != files.size()))
    return Status::OK();
  const std::string& prefix = listing.paths.prefix();
  for (size_t k = 0; source.folder.empty() && k < files.size(); ++k) {
    const std::string_view f = files[k];
    if (f.size() != prefix.size() + listing.paths.rest(k).size() || f.substr(0, prefix.size()) != prefix ||
        f.substr(prefix.size()) != listing.paths.rest(k))
      return Status::OK();
  }
  *opened = true;
  return OpenListedSet(name, &listing, listing_path, options);
}

std::string Reader::Rep::DropListing(size_t slot) {
  if (listing_path_.empty()) return "";
  // Every process reading the set may find it out; one removes the file.
  if (!listing_dropped_.exchange(true)) ::unlink(listing_path_.c_str());
  return "; the set was opened from its saved listing " + listing_path_ + ", written before " + member_paths_[slot] +
         " changed: the listing is deleted, and opening the set again counts every file anew";
}

std::vector<FileSetMember> Reader::FileSetMembers() const {
  std::vector<FileSetMember> members;
  if (!rep_->file_set_) return members;
  members.reserve(rep_->parts_.size());
  for (size_t p = 0; p < rep_->parts_.size(); ++p) {
    const uint64_t first = p == 0 ? 0 : rep_->part_ends_[p - 1];
    members.push_back({rep_->member_paths_[p], first, rep_->part_ends_[p] - first});
  }
  return members;
}

std::string Reader::Rep::FirstDataPath() const {
  return file_set_ ? first_data_path_ : parts_.front()->location.data_path;
}

Reader::Rep::Part* Reader::Rep::FilePart(size_t slot) {
  std::unique_ptr<Part>& held = parts_[slot];
  if (!held) {
    held = std::make_unique<Part>();
    held->slot = slot;
    held->indexed = false;
    held->records = part_ends_[slot] - (slot == 0 ? 0 : part_ends_[slot - 1]);
    held->location.path = member_paths_[slot];
  }
  return held.get();
}

void Reader::Rep::Forget(Part* part) {
  if (file_set_ && part->fd < 0 && !part->indexed && part->pins.load() == 0) parts_[part->slot].reset();
}

Status Reader::Rep::EnsureOpen(Part* part) {
  part->last_use = ++use_clock_;
  // Written since it was indexed (a read saw it, CheckUnchanged): its index
  // goes, and the file is indexed again below, once no read holds it.
  if (part->changed.load() && part->pins.load() == 0) {
    ClosePart(part);
    part->changed.store(false);
  }
  if (part->indexed) indexed_parts_.splice(indexed_parts_.end(), indexed_parts_, part->in_indexed);
  if (part->fd >= 0) return Status::OK();
  // Least recently used first among those no read holds (a batch's own
  // files are pinned as they open): all held means one over for a moment.
  // (Descriptors: at most max_open_parts_ to look through. Indexes: a list
  // in the order of use, where the first unpinned one is the oldest.)
  auto oldest_open = [&]() -> Part* {
    Part* found = nullptr;
    for (Part* p : open_parts_)
      if (p != part && p->pins.load() == 0 && (found == nullptr || p->last_use < found->last_use)) found = p;
    return found;
  };
  auto oldest_indexed = [&]() -> Part* {
    for (Part* p : indexed_parts_)
      if (p != part && p->pins.load() == 0) return p;
    return nullptr;
  };
  // A descriptor: the data file's, at most max_open_parts_ at once. The
  // chunk filler's mapping goes with it (a mapping each of 10^5 held
  // indexes would pass the kernel's vm.max_map_count).
  while (open_parts_.size() >= max_open_parts_) {
    Part* p = oldest_open();
    if (p == nullptr) break;
    ::close(p->fd);
    p->fd = -1;
    p->filler.reset();
    open_parts_.erase(std::find(open_parts_.begin(), open_parts_.end(), p));
    Forget(p);
  }
  if (part->indexed) {
    // Its index is still held: only the descriptor is opened again, if the
    // file is the one indexed; one written since is indexed again.
    Status same = OpenDataFile(part->location.data_path, part->index.identity, true, &part->fd);
    if (same.ok() && cache_policy_ == CachePolicy::kFill)
      same = ChunkFiller::Create(part->fd, part->index.identity.size, part->location.data_path, &part->filler);
    if (same.ok()) {
      AdviseReads(part->fd);
      open_parts_.push_back(part);
      return Status::OK();
    }
    if (same.code() != Status::Code::kCorruption) return same;
    ClosePart(part);
  }
  // An index: what every file's together hold stays within the index's
  // share of the budget, and a paged one (it holds a descriptor of its
  // own) among at most max_open_parts_.
  auto over = [&] {
    return held_index_bytes_ + resident_index_cap_ > index_share_ || paged_parts_ >= max_open_parts_;
  };
  while (!indexed_parts_.empty() && over()) {
    Part* p = oldest_indexed();
    if (p == nullptr) break;
    ClosePart(p);
    Forget(p);
  }
  const uint64_t counted = part->records;
  std::string source;
  Status s = OpenPart(part->location.path, part, &source);
  // Opened from a saved listing: the file must be the one it counted. One
  // replaced since with the same count reads as a fresh count would (its
  // positions are the same), but the listing goes, so the next open counts.
  std::string dropped;
  if (!listed_sums_.empty()) {
    if (!s.ok()) {
      dropped = DropListing(part->slot);
    } else {
      const FileIdentity& id = part->index.identity;
      const MemberIdentity now{id.device, id.inode, id.size, id.mtime_ns, id.ctime_ns, id.txnid};
      if (now.Sum() != listed_sums_[part->slot]) dropped = DropListing(part->slot);
    }
  }
  if (s.ok() && part->index.size() != counted)
    s = Status::Corruption("open " + part->location.data_path + ": its meta page counted " + std::to_string(counted) +
                           " records when the set was opened, its tree holds " + std::to_string(part->index.size()) +
                           (dropped.empty() ? " (damaged, or written in place since with another count: reopen the set)"
                                            : dropped));
  else if (!s.ok() && !dropped.empty())
    s = s.WithSuffix(dropped);
  if (s.ok() && !part->manifest.empty())
    s = Status::InvalidArgument("open " + part->location.path +
                                ": an lmdbloader corpus is read alone or in a shard set, not in a set of files");
  if (s.ok() && cache_policy_ == CachePolicy::kFill)
    s = ChunkFiller::Create(part->fd, part->index.identity.size, part->location.data_path, &part->filler);
  if (!s.ok()) {
    if (part->fd >= 0) ::close(part->fd);
    part->fd = -1;
    part->index.Clear();
    part->filler.reset();
    return s;
  }
  part->indexed = true;
  // Its index may differ from the one read before it was dropped (the file
  // replaced since): no thread may reuse locations it remembers.
  index_epoch_.fetch_add(1);
  AdviseReads(part->fd);
  if (part->index.paged()) any_paged_ = true;
  open_parts_.push_back(part);
  part->in_indexed = indexed_parts_.insert(indexed_parts_.end(), part);
  // What it holds, counted once (a paged index's cache counts at its
  // capacity); the Part counts too: with one-record files it outweighs its index.
  part->held_bytes = sizeof(Part) + 2 * part->location.path.capacity() + part->index.MemoryBytes();
  held_index_bytes_ += part->held_bytes;
  paged_parts_ += part->index.paged();
  return Status::OK();
}

void Reader::Rep::ClosePart(Part* part) {
  if (part->fd >= 0) {
    ::close(part->fd);
    open_parts_.erase(std::find(open_parts_.begin(), open_parts_.end(), part));
  }
  part->fd = -1;
  if (part->indexed) {
    indexed_parts_.erase(part->in_indexed);
    held_index_bytes_ -= part->held_bytes;
    paged_parts_ -= part->index.paged();
  }
  part->index.Clear();
  part->index_file.clear();
  part->filler.reset();
  part->meta_pages.reset();
  part->indexed = false;
}

Status Reader::Rep::ReopenFileSet() {
  // Only this thread runs in the child: locks and pins that threads of the
  // parent held at fork() are not held here.
  new (&parts_mu_) std::mutex();
  for (auto& p : parts_)
    if (p) p->pins.store(0);
  // The files the parent had open are opened again when this process
  // reads them; the inherited descriptors are closed only while they are
  // still the data files (a caller may have closed and reused the numbers).
  for (Part* p : open_parts_) {
    struct stat st;
    if (::fstat(p->fd, &st) == 0 && static_cast<uint64_t>(st.st_dev) == p->index.identity.device &&
        static_cast<uint64_t>(st.st_ino) == p->index.identity.inode)
      ::close(p->fd);
    p->fd = -1;
    p->filler.reset();  // it goes with the descriptor
  }
  std::vector<Part*> closed;
  closed.swap(open_parts_);
  // A paged index reads on through the descriptor it inherited.
  for (Part* p : std::vector<Part*>(indexed_parts_.begin(), indexed_parts_.end())) {
    LMDBLOADER_RETURN_IF_ERROR(ReopenIndex(p));
    if (!p->indexed) closed.push_back(p);
  }
  std::sort(closed.begin(), closed.end());
  closed.erase(std::unique(closed.begin(), closed.end()), closed.end());
  for (Part* p : closed) Forget(p);
  (void)io_.release();
  return BatchIo::Create(io_engine_, options_.queue_depth, &io_, &io_fallback_);
}

Status Reader::Rep::PinSlots(const size_t* slots, size_t count, Part** parts, PartPins* pins) const {
  if (!file_set_) {
    for (size_t k = 0; k < count; ++k) parts[k] = parts_[slots[k]].get();
    return Status::OK();
  }
  Rep* self = const_cast<Rep*>(this);
  std::lock_guard<std::mutex> lock(parts_mu_);
  for (size_t k = 0; k < count; ++k) {
    if (k > 0 && slots[k] == slots[k - 1]) {
      parts[k] = parts[k - 1];
      continue;
    }
    Part* p = self->FilePart(slots[k]);
    parts[k] = p;
    if (std::find(pins->held.begin(), pins->held.end(), p) != pins->held.end()) continue;
    Status opened = self->EnsureOpen(p);
    if (!opened.ok()) {
      self->Forget(p);
      return opened;
    }
    p->pins.fetch_add(1);
    pins->held.push_back(p);
  }
  return Status::OK();
}

size_t Reader::Rep::FileSetChunk(const uint64_t* indices, size_t count) const {
  if (!file_set_) return count;
  // At most half the files that may be open at once, so that a batch of
  // records from thousands of files never holds more descriptors than that.
  const size_t most = std::max<size_t>(1, max_open_parts_ / 2);
  std::vector<size_t> seen;
  for (size_t k = 0; k < count; ++k) {
    const size_t p = static_cast<size_t>(std::upper_bound(part_ends_.begin(), part_ends_.end(), indices[k]) -
                                         part_ends_.begin());
    if (std::find(seen.begin(), seen.end(), p) != seen.end()) continue;
    if (seen.size() == most) return k;
    seen.push_back(p);
  }
  return count;
}

}  // namespace lmdbloader
