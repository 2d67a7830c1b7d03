#include "lmdbloader/reader.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "batch_io.h"
#include "checksum.h"
#include "chunk_filler.h"
#include "corpus_format.h"
#include "corpus_manifest.h"
#include "index_builder.h"
#include "index_file.h"
#include "lmdb_env.h"
#include "lmdb_pages.h"
#include "lmdbloader/memory.h"
#include "mapping.h"
#include "open_file.h"
#include "record_index.h"
#include "residency.h"
#include "shard_list.h"

namespace lmdbloader {

namespace {

// Incremented in every child process by a pthread_atfork handler. A Reader
// whose handles belong to an older generation reopens them before use, which
// costs one relaxed atomic load per read instead of a getpid() system call.
std::atomic<uint64_t> g_fork_generation{0};

void RegisterForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, [] { g_fork_generation.fetch_add(1); });
  });
}

std::string OutOfRangeMessage(const std::string& path, uint64_t index, uint64_t size) {
  return "index " + std::to_string(index) + " out of range for " + path + " (" +
         std::to_string(size) + " records)";
}

Status OpenDataFile(const std::string& path, const FileIdentity& identity, int* fd) {
  int f = -1;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(path, &f));
  struct stat st;
  if (::fstat(f, &st) != 0) {
    int err = errno;
    ::close(f);
    return Status::FromErrno(err, "fstat", path);
  }
  if (st.st_dev != identity.device || st.st_ino != identity.inode ||
      static_cast<uint64_t>(st.st_size) < identity.size) {
    ::close(f);
    return Status::Corruption("open " + path + ": the file was replaced or truncated since it was indexed");
  }
  *fd = f;
  return Status::OK();
}

}  // namespace

// Records whose checksum has matched (ChecksumPolicy::kFirstRead):
// one bit each, in anonymous memory shared with processes forked later, so
// workers forked from the reader's process check each record once between
// them. Setting a bit twice is harmless, so relaxed atomics suffice.
class VerifiedRecords {
 public:
  static Status Create(uint64_t count, std::unique_ptr<VerifiedRecords>* out) {
    const size_t bytes = static_cast<size_t>((count + 63) / 64 * 8);
    void* p = bytes == 0 ? nullptr : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap", "the record of verified checksums");
    out->reset(new VerifiedRecords(static_cast<uint64_t*>(p), bytes));
    return Status::OK();
  }
  ~VerifiedRecords() {
    if (words_ != nullptr) ::munmap(words_, bytes_);
  }
  bool Has(uint64_t i) const { return (__atomic_load_n(&words_[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1; }
  void Add(uint64_t i) { __atomic_fetch_or(&words_[i / 64], uint64_t{1} << (i % 64), __ATOMIC_RELAXED); }
  size_t bytes() const { return bytes_; }

 private:
  VerifiedRecords(uint64_t* words, size_t bytes) : words_(words), bytes_(bytes) {}
  uint64_t* words_;
  size_t bytes_;
};

struct Reader::Part {
  size_t slot = 0;  // position in parts_, the governor's slot
  DataLocation location;
  RecordIndex index;
  int fd = -1;
  std::shared_ptr<Mapping> map;  // mmap mode; read and swapped with std::atomic_load/store
  std::unique_ptr<LmdbEnv> env;  // lock mode: holds the snapshot the index describes
  std::string index_file;        // "loaded from PATH" when the index came from a saved file
  std::atomic<bool> names_checked{false};  // corpora: names and their offsets matched their checksums
  std::string manifest;          // corpora: the manifest's JSON, checked
  std::vector<uint64_t> checksums;            // corpora: XXH3-64 of each record
  std::unique_ptr<VerifiedRecords> verified;  // ChecksumPolicy::kFirstRead: records already checked
  std::map<std::string, uint64_t> meta_sums;  // corpora: of each metadata value, by key
  std::unique_ptr<ChunkFiller> filler;        // cache policy kFill
  // A plain LMDB opened without the lock file is watched for a writer's
  // commit (CheckSnapshot): its two meta pages, mapped where the file system
  // maps files, else read with pread.
  bool watched = false;
  std::shared_ptr<Mapping> meta_pages;
  ~Part() {
    if (fd >= 0) ::close(fd);
  }
};

Reader::Reader() = default;

Reader::~Reader() = default;

Status Reader::OpenPart(const std::string& path, Part* part, std::string* index_source) {
  LMDBLOADER_RETURN_IF_ERROR(ResolveLocation(path, &part->location));
  std::unique_ptr<LmdbEnv> env;
  LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(part->location, options_.lock, options_.db_name, &env));
  const IndexPaths paths = IndexFilePaths(part->location, options_, env->identity());
  const std::string& index_path = paths.save;
  Status loaded = Status::NotFound("");
  for (const std::string& candidate : paths.load) {
    part->index = RecordIndex();
    loaded = LoadIndex(candidate, env->identity(), options_.db_name, &part->index);
    if (loaded.ok()) {
      *index_source = "loaded from " + candidate;
      break;
    }
  }
  if (!loaded.ok()) {
    // A damaged or stale saved index is rebuilt, never trusted.
    part->index = RecordIndex();
    LMDBLOADER_RETURN_IF_ERROR(BuildIndex(*env, part->location, options_.db_name, true, &part->index));
    *index_source = "built";
    if (!index_path.empty()) {
      Status saved = SaveIndex(index_path, part->index);
      *index_source += saved.ok() ? " (saved to " + index_path + ")"
                                  : " (not saved: " + saved.message() + ")";
    }
  }
  if (loaded.ok()) part->index_file = *index_source;
  LMDBLOADER_RETURN_IF_ERROR(OpenDataFile(part->location.data_path, part->index.identity, &part->fd));
  bool corpus = false;
  Status meta = LoadCorpusMeta(*part, &corpus);
  if (!meta.ok() && loaded.ok()) {
    // A saved index that passes its own checks (checksum, identity, bounds)
    // can still point at the wrong bytes (forged, or written by a buggy
    // tool): the data decides. Walk the data file; if its own metadata then
    // reads, the index was wrong, and is not used.
    const std::string wrong = "the saved index " + part->index_file.substr(std::string("loaded from ").size()) +
                              " disagrees with the data (" + meta.message() + "), not used";
    part->index = RecordIndex();
    part->index_file.clear();
    LMDBLOADER_RETURN_IF_ERROR(BuildIndex(*env, part->location, options_.db_name, true, &part->index));
    *index_source = "built: " + wrong;
    meta = LoadCorpusMeta(*part, &corpus);
  }
  LMDBLOADER_RETURN_IF_ERROR(meta);
  if (!corpus && !part->index.meta().empty()) {
    // Keys that merely start with the metadata prefix in a plain LMDB are
    // records like any other: walk again, keeping them.
    part->index = RecordIndex();
    LMDBLOADER_RETURN_IF_ERROR(BuildIndex(*env, part->location, options_.db_name, false, &part->index));
    if (!index_path.empty()) {
      Status saved = SaveIndex(index_path, part->index);
      *index_source = "built" + (saved.ok() ? " (saved to " + index_path + ")" : " (not saved: " + saved.message() + ")");
    }
  }
  if (options_.lock) {
    part->env = std::move(env);
  } else if (!corpus) {
    // Corpora are written whole and renamed into place, never changed: only
    // a plain LMDB can have a writer. 2 pages, read by two loads a check.
    part->watched = true;
    if (!Mapping::Map(part->fd, 2ull * part->index.identity.page_size, part->location.data_path, &part->meta_pages)
             .ok())
      part->meta_pages.reset();
  }
  return Status::OK();
}

Status Reader::CheckSnapshot() const {
  // Only a plain LMDB, always a single part, is watched.
  const Part& p = *parts_.front();
  if (!p.watched) return Status::OK();
  // After the reads it vouches for: a page of the snapshot opened at
  // transaction T is freed by a commit of T+1 at the earliest and reused by
  // a writer of T+2, which starts after T+1 is committed. So an unchanged id
  // read after the records means they were the snapshot's.
  std::atomic_thread_fence(std::memory_order_acquire);  // the records' loads before the id's
  uint64_t now = 0;
  LMDBLOADER_RETURN_IF_ERROR(ReadCommittedTxnid(p.fd, p.meta_pages ? p.meta_pages->data() : nullptr,
                                                p.index.identity.page_size, p.location.data_path, &now));
  if (p.meta_pages && p.meta_pages->shrank()) return ShrankUnderMapping(p);
  if (now == p.index.identity.txnid) return Status::OK();
  return Status::IOError(p.location.data_path + ": a writer committed to it since it was opened (transaction " +
                         std::to_string(p.index.identity.txnid) + ", now " + std::to_string(now) +
                         "), and without the lock file nothing keeps the pages read from being reused: "
                         "open it with lock=True (--lock) while a writer may change it, or reopen it");
}

Status Reader::LoadCorpusMeta(Part& part, bool* corpus) {
  *corpus = false;
  const auto& meta = part.index.meta();
  auto manifest = meta.find(std::string(kManifestKey));
  const std::string& where = part.location.data_path;
  if (!options_.db_name.empty()) return Status::OK();
  // Keys only a corpus writer puts there: their presence makes this a corpus,
  // whatever else is damaged.
  const bool corpus_like = meta.count(std::string(kManifestChecksumKey)) || meta.count(std::string(kChecksumsKey)) ||
                           (meta.count(std::string(kNamesBlobKey)) && meta.count(std::string(kNamesOffsetsKey)));
  if (manifest == meta.end()) {
    if (corpus_like) return Status::Corruption("corpus " + where + ": the manifest is missing");
    return Status::OK();
  }
  if (!part.index.sequential_keys()) {
    if (corpus_like)
      return Status::Corruption("corpus " + where + ": the record keys are not the record numbers 0.." +
                                std::to_string(part.index.size()) + " (damaged keys)");
    return Status::OK();
  }
  std::string bytes;
  LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, manifest->first, &bytes));
  auto damaged = [&](const std::string& what) { return Status::Corruption("corpus " + where + ": " + what); };
  auto stored_sum = meta.find(std::string(kManifestChecksumKey));
  if (stored_sum != meta.end()) {
    std::string sum;
    LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, stored_sum->first, &sum));
    uint64_t expected = 0;
    if (sum.size() != 8) return damaged("the manifest's checksum is not 8 bytes");
    std::memcpy(&expected, sum.data(), 8);
    if (Checksum(bytes) != expected) return damaged("the manifest is damaged (checksum mismatch)");
  }
  CorpusManifest m;
  Status parsed = ParseCorpusManifest(bytes, where, &m);
  if (parsed.IsNotFound()) {
    // With the rest of a corpus's metadata beside it, this is a corpus whose
    // manifest is damaged; alone, a plain LMDB that happens to hold the key.
    return corpus_like ? Status::Corruption(parsed.message()) : Status::OK();
  }
  LMDBLOADER_RETURN_IF_ERROR(parsed);
  *corpus = true;
  if (m.records != part.index.size())
    return damaged("the manifest says " + std::to_string(m.records) + " records, the database holds " +
                   std::to_string(part.index.size()));
  for (const auto& [name, dtype] : m.column_dtypes) {
    auto c = meta.find(std::string(kColumnPrefix) + name);
    if (c == meta.end()) return damaged("column '" + name + "' is listed but absent");
    if (c->second.size != part.index.size() * 8)
      return damaged("column '" + name + "' holds " + std::to_string(c->second.size) + " bytes for " +
                     std::to_string(part.index.size()) + " records");
  }
  if (m.has_checksums) {
    part.meta_sums = m.meta_sums;
    auto records = meta.find(std::string(kChecksumsKey));
    if (records == meta.end() || records->second.size != part.index.size() * 8)
      return damaged("the record checksums are missing or do not match the record count");
    std::string blob;
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(part, records->first, &blob));
    part.checksums.resize(part.index.size());
    if (!blob.empty()) std::memcpy(part.checksums.data(), blob.data(), blob.size());
    if (options_.verify_checksums == ChecksumPolicy::kFirstRead)
      LMDBLOADER_RETURN_IF_ERROR(VerifiedRecords::Create(part.index.size(), &part.verified));
  }
  part.manifest = std::move(bytes);
  return Status::OK();
}

Status Reader::ReadCheckedMeta(Part& part, const std::string& key, std::string* bytes) {
  LMDBLOADER_RETURN_IF_ERROR(ReadMeta(part, key, bytes));
  auto sum = part.meta_sums.find(key);
  if (sum != part.meta_sums.end() && Checksum(*bytes) != sum->second)
    return Status::Corruption("corpus " + part.location.data_path + ": " + key.substr(kMetaPrefix.size()) +
                              " is damaged (checksum mismatch)");
  return Status::OK();
}

Status Reader::Open(const std::string& path, const ReaderOptions& options,
                    std::unique_ptr<Reader>* out) {
  LMDBLOADER_RETURN_IF_ERROR(ValidateOptions(options));
  RegisterForkHandler();
  std::unique_ptr<Reader> r(new Reader());
  r->path_ = path;
  r->options_ = options;
  r->mode_ = options.mode == AccessMode::kMmap ? AccessMode::kMmap : AccessMode::kPread;
  r->generation_ = g_fork_generation.load();

  // A shard set is a directory with a shard list; anything else is one LMDB.
  bool shard_set = false;
  std::vector<ShardEntry> part_paths;
  LMDBLOADER_RETURN_IF_ERROR(ReadShardList(path, &shard_set, &part_paths));
  const std::string shard_list = path + "/" + kShardListFile;
  if (!shard_set) part_paths.push_back({path, -1});

  uint64_t total = 0, index_bytes = 0;
  for (const auto& [part_path, expected] : part_paths) {
    auto part = std::make_unique<Part>();
    part->slot = r->parts_.size();
    std::string source;
    LMDBLOADER_RETURN_IF_ERROR(r->OpenPart(part_path, part.get(), &source));
    if (expected >= 0 && part->index.size() != static_cast<uint64_t>(expected))
      return Status::Corruption("open " + part_path + ": shard list says " + std::to_string(expected) +
                                " records, the shard holds " + std::to_string(part->index.size()));
    if (shard_set) {
      if (part->manifest.empty())
        return Status::Corruption("open " + part_path + ": a part listed in " + shard_list +
                                  " is not an lmdbloader corpus");
    }
    if (r->index_source_.empty()) r->index_source_ = source;
    total += part->index.size();
    index_bytes += part->index.MemoryBytes() + part->checksums.size() * 8 +
                   (part->verified ? part->verified->bytes() : 0);
    r->part_ends_.push_back(total);
    r->parts_.push_back(std::move(part));
  }
  r->size_ = total;
  if (options.rss_budget != 0 && index_bytes >= options.rss_budget)
    return Status::InvalidArgument(
        "rss_budget of " + std::to_string(options.rss_budget) + " bytes is smaller than the record index of " +
        path + " (" + std::to_string(index_bytes) + " bytes for " + std::to_string(total) + " records)");

  r->manifest_ = r->parts_.front()->manifest;

  if (r->mode_ == AccessMode::kPread)
    LMDBLOADER_RETURN_IF_ERROR(BatchIo::Create(options.io_engine, options.queue_depth, &r->io_, &r->io_fallback_));
  {
    r->cache_policy_ = options.cache_policy;
    if (r->cache_policy_ == CachePolicy::kAuto) {
      // Fill only what the page cache can keep: a corpus bigger than RAM
      // would evict each chunk before its other records are read.
      uint64_t data_bytes = 0;
      for (const auto& p : r->parts_) data_bytes += p->index.identity.size;
      const uint64_t room = PageCacheRoom();
      const bool budget_room = options.rss_budget == 0 || options.rss_budget - index_bytes >= (16ull << 20);
      r->cache_policy_ = budget_room && data_bytes <= room / 2 ? CachePolicy::kFill : CachePolicy::kExact;
    }
    if (r->cache_policy_ == CachePolicy::kFill)
      for (auto& p : r->parts_)
        LMDBLOADER_RETURN_IF_ERROR(
            ChunkFiller::Create(p->fd, p->index.identity.size, p->location.data_path, &p->filler));
  }

  if (r->mode_ == AccessMode::kMmap) {
    uint64_t allowance = options.rss_budget ? options.rss_budget - index_bytes : 0;
    r->governor_ = std::make_unique<ResidencyGovernor>(allowance, options.mmap_window);
    LMDBLOADER_RETURN_IF_ERROR(r->governor_->Start());
    for (size_t i = 0; i < r->parts_.size(); ++i) {
      Part& p = *r->parts_[i];
      LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(p.fd, p.index.identity.size, p.location.data_path, &p.map));
      r->governor_->Attach(i, p.map->data(), p.map->size());
    }
  }
  *out = std::move(r);
  return Status::OK();
}

Status Reader::EnsureProcess() {
  if (generation_ == g_fork_generation.load(std::memory_order_relaxed)) return Status::OK();
  std::lock_guard<std::mutex> lock(reopen_mu_);
  if (generation_ == g_fork_generation.load()) return Status::OK();
  LMDBLOADER_RETURN_IF_ERROR(ReopenHandles());
  generation_ = g_fork_generation.load();
  return Status::OK();
}

Status Reader::ReopenHandles() {
  for (size_t i = 0; i < parts_.size(); ++i) {
    Part& p = *parts_[i];
    if (p.env) {
      // The parent's environment must not be touched here, not even closed
      // (mdb_env_close would act on the parent's lock-file state): let go of
      // it without closing, and open this process's own snapshot.
      (void)p.env.release();
      LMDBLOADER_RETURN_IF_ERROR(LmdbEnv::Open(p.location, true, options_.db_name, &p.env));
      if (!(p.env->identity() == p.index.identity)) {
        RecordIndex fresh;
        LMDBLOADER_RETURN_IF_ERROR(BuildIndex(*p.env, p.location, options_.db_name, true, &fresh));
        if (fresh.size() != p.index.size())
          return Status::Corruption("reopen " + p.location.data_path +
                                    " after fork: the database changed its record count");
        p.index = std::move(fresh);
        // A writer changed the database: what was checked before may not
        // be what this process reads. Start a record of its own (unmapping
        // the shared one here leaves the parent's as it is).
        if (p.verified) LMDBLOADER_RETURN_IF_ERROR(VerifiedRecords::Create(p.index.size(), &p.verified));
      }
    }
    // The filler's mapping stays valid in the child; it needs no handle.
    int fd = -1;
    LMDBLOADER_RETURN_IF_ERROR(OpenDataFile(p.location.data_path, p.index.identity, &fd));
    ::close(p.fd);
    p.fd = fd;
    if (mode_ == AccessMode::kMmap) {
      std::shared_ptr<Mapping> map;
      LMDBLOADER_RETURN_IF_ERROR(Mapping::Map(p.fd, p.index.identity.size, p.location.data_path, &map));
      std::atomic_store(&p.map, map);
      governor_->Attach(i, map->data(), map->size());
    }
  }
  if (governor_) LMDBLOADER_RETURN_IF_ERROR(governor_->Start());
  if (io_) {
    // The parent's rings and threads are not this process's: abandon them
    // (destroying would join threads that do not exist here).
    (void)io_.release();
    LMDBLOADER_RETURN_IF_ERROR(BatchIo::Create(options_.io_engine, options_.queue_depth, &io_, &io_fallback_));
  }
  return Status::OK();
}

Status Reader::Locate(uint64_t index, Part** part, uint64_t* local) {
  if (index >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, index, size_));
  if (parts_.size() == 1) {
    *part = parts_[0].get();
    *local = index;
    return Status::OK();
  }
  size_t k = std::upper_bound(part_ends_.begin(), part_ends_.end(), index) - part_ends_.begin();
  *part = parts_[k].get();
  *local = index - (k == 0 ? 0 : part_ends_[k - 1]);
  return Status::OK();
}

unsigned Reader::db_flags() const { return parts_.front()->index.db_flags(); }

Status Reader::ValueSize(uint64_t index, uint64_t* size) const {
  if (index >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, index, size_));
  size_t k = parts_.size() == 1
                 ? 0 : std::upper_bound(part_ends_.begin(), part_ends_.end(), index) - part_ends_.begin();
  *size = parts_[k]->index.value_size(index - (k == 0 ? 0 : part_ends_[k - 1]));
  return Status::OK();
}

Status Reader::PreadAt(Part& part, uint64_t offset, uint64_t size, char* dst) {
  ReadRequest r;
  r.fd = part.fd;
  r.offset = offset;
  r.size = size;
  r.dst = dst;
  r.path = &part.location.data_path;
  Part* parts[1] = {&part};
  return ReadRequests(&r, parts, 1);
}

Status Reader::ReadRequests(const ReadRequest* requests, Part* const* parts, size_t count) {
  if (cache_policy_ == CachePolicy::kFill) {
    // Only what is left to fill: a warm read allocates nothing here.
    std::vector<ChunkFiller::Range> ranges;
    for (size_t k = 0; k < count; ++k) {
      ChunkFiller* filler = parts[k]->filler.get();
      if (filler && filler->NeedsFill(requests[k].offset, requests[k].size))
        ranges.push_back({filler, requests[k].offset, requests[k].size});
    }
    if (!ranges.empty()) ChunkFiller::FillTogether(ranges, FillParallel());
  }
  Status s = count == 1 ? PreadFully(requests[0]) : io_->ReadAll(requests, count);
  if (cache_policy_ == CachePolicy::kDrop)
    for (size_t k = 0; k < count; ++k) DropFromPageCache(requests[k].fd, requests[k].offset, requests[k].size);
  return s;
}

Status Reader::VerifyRecord(const Part& part, uint64_t local, const char* data, uint64_t size) const {
  if (part.checksums.empty() || options_.verify_checksums == ChecksumPolicy::kOff) return Status::OK();
  if (part.verified && part.verified->Has(local)) return Status::OK();
  if (Checksum(data, size) == part.checksums[local]) {
    if (part.verified) part.verified->Add(local);
    return Status::OK();
  }
  // With a saved index, the record's location came from that file: say so,
  // since a wrong index reads as a damaged record (`lmdbloader verify` walks
  // the data itself and tells which).
  return Status::Corruption("record " + std::to_string(local) + " of " + part.location.data_path +
                            " is damaged: its checksum does not match (" + std::to_string(size) + " bytes)" +
                            (part.index_file.empty() ? std::string()
                                                     : "; its location was " + part.index_file +
                                                           ", which is wrong if the data file verifies"));
}

Status Reader::CopyOut(Part& part, uint64_t local, char* dst) {
  const uint64_t offset = part.index.offset(local);
  const uint64_t size = part.index.value_size(local);
  if (mode_ == AccessMode::kPread) {
    LMDBLOADER_RETURN_IF_ERROR(PreadAt(part, offset, size, dst));
  } else {
    std::shared_ptr<Mapping> map = std::atomic_load(&part.map);
    std::memcpy(dst, map->data() + offset, size);
    if (map->shrank()) return ShrankUnderMapping(part);
    LMDBLOADER_RETURN_IF_ERROR(NoteMapped(part, offset, size));
  }
  LMDBLOADER_RETURN_IF_ERROR(CheckSnapshot());
  LMDBLOADER_RETURN_IF_ERROR(VerifyRecord(part, local, dst, size));
  records_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(size, std::memory_order_relaxed);
  return Status::OK();
}

Status Reader::NoteMapped(Part& part, uint64_t offset, uint64_t size) {
  LMDBLOADER_RETURN_IF_ERROR(governor_->Touched(part.slot, offset, size));
  if (options_.remap_every && bytes_since_remap_.fetch_add(size) + size >= options_.remap_every)
    return Remap();
  return Status::OK();
}

Status Reader::ReadInto(uint64_t index, char* dst, uint64_t capacity) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  Part* part = nullptr;
  uint64_t local = 0;
  LMDBLOADER_RETURN_IF_ERROR(Locate(index, &part, &local));
  if (capacity < part->index.value_size(local))
    return Status::InvalidArgument("buffer of " + std::to_string(capacity) + " bytes is too small for record " +
                                   std::to_string(index) + " (" + std::to_string(part->index.value_size(local)) +
                                   " bytes)");
  return CopyOut(*part, local, dst);
}

Status Reader::Read(uint64_t index, std::string* value) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  Part* part = nullptr;
  uint64_t local = 0;
  LMDBLOADER_RETURN_IF_ERROR(Locate(index, &part, &local));
  value->resize(part->index.value_size(local));
  return CopyOut(*part, local, value->data());
}

Status Reader::ReadBatch(const uint64_t* indices, size_t count, char* const* dsts) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  for (size_t k = 0; k < count; ++k)
    if (indices[k] >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, indices[k], size_));
  if (mode_ == AccessMode::kMmap || count == 1) {
    Prefetch(indices, count);
    for (size_t k = 0; k < count; ++k) {
      Part* part = nullptr;
      uint64_t local = 0;
      LMDBLOADER_RETURN_IF_ERROR(Locate(indices[k], &part, &local));
      LMDBLOADER_RETURN_IF_ERROR(CopyOut(*part, local, dsts[k]));
    }
    return Status::OK();
  }
  std::vector<ReadRequest> requests(count);
  std::vector<Part*> parts(count);
  std::vector<uint64_t> locals(count);
  for (size_t k = 0; k < count; ++k) {
    LMDBLOADER_RETURN_IF_ERROR(Locate(indices[k], &parts[k], &locals[k]));
    ReadRequest& r = requests[k];
    r.fd = parts[k]->fd;
    r.offset = parts[k]->index.offset(locals[k]);
    r.size = parts[k]->index.value_size(locals[k]);
    r.dst = dsts[k];
    r.path = &parts[k]->location.data_path;
  }
  LMDBLOADER_RETURN_IF_ERROR(ReadRequests(requests.data(), parts.data(), count));
  LMDBLOADER_RETURN_IF_ERROR(CheckSnapshot());
  uint64_t bytes = 0;
  for (size_t k = 0; k < count; ++k) {
    LMDBLOADER_RETURN_IF_ERROR(VerifyRecord(*parts[k], locals[k], dsts[k], requests[k].size));
    bytes += requests[k].size;
  }
  records_read_.fetch_add(count, std::memory_order_relaxed);
  bytes_read_.fetch_add(bytes, std::memory_order_relaxed);
  return Status::OK();
}

Status Reader::View(uint64_t index, RecordView* view) {
  if (mode_ != AccessMode::kMmap)
    return Status::InvalidArgument("views need mode=mmap; " + path_ + " was opened in pread mode");
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  Part* part = nullptr;
  uint64_t local = 0;
  LMDBLOADER_RETURN_IF_ERROR(Locate(index, &part, &local));
  const uint64_t offset = part->index.offset(local);
  const uint64_t size = part->index.value_size(local);
  // The governor reads the kernel's count, which shows the pages touched
  // through earlier views: a caller's touches are bounded one read late.
  LMDBLOADER_RETURN_IF_ERROR(NoteMapped(*part, offset, size));
  std::shared_ptr<Mapping> map = std::atomic_load(&part->map);
  Status verified = VerifyRecord(*part, local, map->data() + offset, size);
  if (map->shrank()) return ShrankUnderMapping(*part);
  LMDBLOADER_RETURN_IF_ERROR(CheckSnapshot());
  LMDBLOADER_RETURN_IF_ERROR(verified);
  *view = RecordView(map->data() + offset, size, map);
  records_read_.fetch_add(1, std::memory_order_relaxed);
  bytes_read_.fetch_add(size, std::memory_order_relaxed);
  return Status::OK();
}

unsigned Reader::FillParallel() const {
  // 4 at once: on a virtio disk, 8 were no faster than 4 (README, "Cold reads
  // and the page cache"). Each
  // chunk being filled is mapped (2 MiB of RSS) until its read ends: a budget
  // keeps those to an eighth of itself.
  constexpr unsigned kMost = 4;
  const uint64_t budget = options_.rss_budget;
  const uint64_t n = budget ? budget / (8 * ChunkFiller::kChunk) : kMost;
  return static_cast<unsigned>(std::clamp<uint64_t>(n, 1, kMost));
}

void Reader::Prefetch(const uint64_t* indices, size_t count) {
  // Dropping pages behind the reads is for corpora bigger than RAM: nothing
  // read ahead of them.
  if ((mode_ == AccessMode::kPread && cache_policy_ == CachePolicy::kDrop) || !EnsureProcess().ok()) return;
  std::vector<ChunkFiller::Range> ranges;
  for (size_t k = 0; k < count; ++k) {
    Part* part = nullptr;
    uint64_t local = 0;
    if (!Locate(indices[k], &part, &local).ok()) continue;
    const uint64_t offset = part->index.offset(local), size = part->index.value_size(local);
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
  if (mode_ != AccessMode::kMmap)
    return Status::InvalidArgument("views need mode=mmap; " + path_ + " was opened in pread mode");
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  for (size_t k = 0; k < count; ++k)
    if (indices[k] >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, indices[k], size_));
  Prefetch(indices, count);
  for (size_t k = 0; k < count; ++k) LMDBLOADER_RETURN_IF_ERROR(View(indices[k], &views[k]));
  return Status::OK();
}

Status Reader::ShrankUnderMapping(const Part& part) const {
  struct stat st;
  std::string now = ::fstat(part.fd, &st) == 0 ? std::to_string(st.st_size) + " bytes now" : "size unknown now";
  return Status::IOError(part.location.data_path + ": the file shrank under its mapping (" +
                         std::to_string(part.index.identity.size) + " bytes when opened, " + now +
                         "): a read reached past its end (it is being rewritten or was truncated); reopen it");
}

Status Reader::CheckMappings() const {
  if (mode_ != AccessMode::kMmap) return CheckSnapshot();
  for (const auto& p : parts_) {
    std::shared_ptr<Mapping> map = std::atomic_load(&p->map);
    if (map && map->shrank()) return ShrankUnderMapping(*p);
  }
  return CheckSnapshot();
}

Status Reader::Remap() {
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

Status Reader::Key(uint64_t index, std::string* key) const {
  if (index >= size_) return Status::OutOfRange(OutOfRangeMessage(path_, index, size_));
  if (parts_.size() == 1) {
    *key = parts_[0]->index.Key(index);
    return Status::OK();
  }
  // Shard sets are corpora: keys are global record numbers.
  *key = RecordKey(index);
  return Status::OK();
}

void Reader::RecordPositions(std::vector<uint64_t>* positions) const {
  positions->clear();
  positions->reserve(size_);
  uint64_t base = 0;
  for (const auto& p : parts_) {
    for (uint64_t i = 0; i < p->index.size(); ++i) positions->push_back(base + p->index.offset(i));
    base += p->index.identity.size;
  }
}

Status Reader::Find(std::string_view key, uint64_t* index) const {
  bool found = parts_.size() == 1 ? parts_[0]->index.Find(key, index)
                                  : (ParseRecordKey(key, index) && *index < size_);
  // An expected outcome for most callers (compat's misses): no key in the
  // message, whose hex form would cost more than the lookup.
  if (!found) return Status::NotFound("key not found in " + path_);
  return Status::OK();
}

uint64_t Reader::LowerBound(std::string_view key) const {
  if (parts_.size() == 1) return parts_[0]->index.LowerBound(key);
  uint64_t lo = 0, hi = size_;
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (std::string_view(RecordKey(mid)) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

Status Reader::Get(std::string_view key, std::string* value) {
  uint64_t index = 0;
  LMDBLOADER_RETURN_IF_ERROR(Find(key, &index));
  return Read(index, value);
}

Status Reader::ReadMeta(Part& part, const std::string& key, std::string* bytes) {
  auto it = part.index.meta().find(key);
  if (it == part.index.meta().end()) return Status::NotFound(key + " not in " + part.location.data_path);
  if (it->second.offset > part.index.identity.size || it->second.size > part.index.identity.size - it->second.offset)
    return Status::Corruption("read " + part.location.data_path + ": " + key + " lies past the end of the file");
  bytes->resize(it->second.size);
  return PreadAt(part, it->second.offset, it->second.size, bytes->data());
}

Status Reader::Name(uint64_t index, std::string* name) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  Part* part = nullptr;
  uint64_t local = 0;
  LMDBLOADER_RETURN_IF_ERROR(Locate(index, &part, &local));
  const auto& meta = part->index.meta();
  auto offsets = meta.find(std::string(kNamesOffsetsKey));
  auto blob = meta.find(std::string(kNamesBlobKey));
  if (offsets == meta.end() || blob == meta.end())
    return Status::NotFound(path_ + " has no record names (not an lmdbloader corpus)");
  if (!part->names_checked.load(std::memory_order_acquire)) {
    // Names are checked against the manifest's checksums the first time one
    // is read in this part (both values read whole once, then dropped), as
    // `verify` checks them: a changed byte is an error, never another name.
    std::string bytes;
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(*part, offsets->first, &bytes));
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(*part, blob->first, &bytes));
    part->names_checked.store(true, std::memory_order_release);
  }
  if (offsets->second.size < (local + 2) * 8)
    return Status::Corruption("read " + part->location.data_path + ": name offsets too short");
  uint64_t range[2];
  LMDBLOADER_RETURN_IF_ERROR(PreadAt(*part, offsets->second.offset + local * 8, 16,
                                     reinterpret_cast<char*>(range)));
  if (range[1] < range[0] || range[1] > blob->second.size)
    return Status::Corruption("read " + part->location.data_path + ": bad name offsets");
  name->resize(range[1] - range[0]);
  return PreadAt(*part, blob->second.offset + range[0], range[1] - range[0], name->data());
}

Status Reader::Column(const std::string& name, std::vector<ColumnChunk>* chunks) const {
  chunks->clear();
  const std::string key = std::string(kColumnPrefix) + name;
  for (const auto& part : parts_) {
    auto it = part->index.meta().find(key);
    if (it == part->index.meta().end())
      return Status::NotFound("no column '" + name + "' in " + part->location.data_path);
    chunks->push_back(ColumnChunk{part->location.data_path, it->second.offset, it->second.size});
  }
  return Status::OK();
}

Status Reader::ReadColumn(const std::string& name, std::string* bytes) {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  std::vector<ColumnChunk> chunks;
  LMDBLOADER_RETURN_IF_ERROR(Column(name, &chunks));
  uint64_t total = 0;
  for (const auto& c : chunks) total += c.size;
  bytes->resize(total);
  uint64_t at = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    std::string chunk;
    LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(*parts_[i], std::string(kColumnPrefix) + name, &chunk));
    std::memcpy(bytes->data() + at, chunk.data(), chunk.size());
    at += chunks[i].size;
  }
  return Status::OK();
}

Status Reader::SaveIndexBeside() {
  for (const auto& part : parts_)
    LMDBLOADER_RETURN_IF_ERROR(SaveIndex(IndexFileBeside(part->location, options_.db_name), part->index));
  return Status::OK();
}

Status Reader::CheckMetadata() {
  LMDBLOADER_RETURN_IF_ERROR(EnsureProcess());
  for (const auto& part : parts_) {
    for (const auto& [key, sum] : part->meta_sums) {
      if (part->index.meta().find(key) == part->index.meta().end())
        return Status::Corruption("corpus " + part->location.data_path + ": " + key.substr(kMetaPrefix.size()) +
                                  " is listed in the manifest but absent");
      std::string bytes;
      LMDBLOADER_RETURN_IF_ERROR(ReadCheckedMeta(*part, key, &bytes));
    }
  }
  return Status::OK();
}

ReaderStats Reader::stats() {
  ReaderStats s;
  s.rss_budget = options_.rss_budget;
  s.mode = AccessModeName(mode_);
  s.records = size_;
  StatmProbe statm;
  // stats() reports what it can: an unreadable statm leaves the two at 0.
  if (statm.Open().ok() && !statm.Read(&s.process_rss, &s.process_file_rss).ok()) s.process_rss = s.process_file_rss = 0;
  for (const auto& p : parts_) {
    uint64_t rss = 0;
    if (MappedFileRss(0, p->location.data_path, &rss).ok()) s.mapped_rss += rss;
    s.index_bytes += p->index.MemoryBytes();
  }
  s.drops = governor_ ? governor_->drops() : 0;
  s.remaps = remaps_.load();
  s.records_read = records_read_.load();
  s.bytes_read = bytes_read_.load();
  s.index_source = index_source_;
  if (io_) {
    s.io_engine = IoEngineName(io_->kind());
    s.io_fallback = io_fallback_;
    s.queue_depth = io_->kind() == IoEngine::kSync ? 1 : options_.queue_depth;
  } else {
    s.io_engine = "mmap";
    s.queue_depth = 1;
  }
  s.cache_policy = CachePolicyName(cache_policy_);
  for (const auto& p : parts_)
    if (p->filler) s.chunks_filled += p->filler->chunks_filled();
  return s;
}

}  // namespace lmdbloader
