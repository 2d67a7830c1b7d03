#include "io/chunk_filler.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>
#include <utility>

#include "io/quiet_thread.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack the name
#endif

namespace lmdbloader {

namespace {

// Major faults the calling thread has taken: MADV_POPULATE_READ counts one
// for each fault that had to read from the device (the kernel's own answer
// to "did this fill wait on the device", where a cached chunk takes only
// minor faults). 0 if the kernel will not say.
long MajorFaultsOfThisThread() {
  struct rusage usage;
  return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_majflt : 0;
}

}  // namespace

Status ChunkFiller::Create(int fd, uint64_t size, const std::string& path, std::unique_ptr<ChunkFiller>* out) {
  char* base = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap (page cache fill)", path);
    base = static_cast<char*>(p);
    // Without THP support for files this fails, and faults read small
    // folios: filling still reads large requests, which is what cold reads
    // need most.
    (void)::madvise(p, size, MADV_HUGEPAGE);
  }
  out->reset(new ChunkFiller(base, size));
  return Status::OK();
}

ChunkFiller::ChunkFiller(char* base, uint64_t size)
    : base_(base), size_(size), filled_(new std::atomic<uint64_t>[(size / kChunk + 64) / 64]()) {}

ChunkFiller::~ChunkFiller() {
  if (base_) ::munmap(base_, size_);
}

bool ChunkFiller::NeedsFill(uint64_t offset, uint64_t size) const {
  if (size == 0 || offset >= size_ || disabled_.load(std::memory_order_relaxed)) return false;
  const uint64_t last = std::min(offset + size, size_) - 1;
  for (uint64_t chunk = offset / kChunk; chunk <= last / kChunk; ++chunk)
    if (!Filled(chunk)) return true;
  return false;
}

bool ChunkFiller::Filled(uint64_t chunk) const {
  return filled_[chunk / 64].load(std::memory_order_relaxed) & (1ull << (chunk % 64));
}

void ChunkFiller::FillChunk(uint64_t chunk) {
  if (Filled(chunk) || disabled_.load(std::memory_order_relaxed)) return;
  char* start = base_ + chunk * kChunk;
  const uint64_t length = std::min(kChunk, size_ - chunk * kChunk);
  if (::madvise(start, length, MADV_POPULATE_READ) != 0) {
    if (errno == EINVAL) disabled_.store(true);  // kernel before 5.14
    return;
  }
  // Unmapped at once: the folio stays cached, out of this process's RSS.
  ::madvise(start, length, MADV_DONTNEED);
  if (!(filled_[chunk / 64].fetch_or(1ull << (chunk % 64)) & (1ull << (chunk % 64))))
    filled_count_.fetch_add(1, std::memory_order_relaxed);
}

void ChunkFiller::Fill(uint64_t offset, uint64_t size) {
  if (size == 0 || offset >= size_ || disabled_.load(std::memory_order_relaxed)) return;
  const uint64_t last = std::min(offset + size, size_) - 1;
  for (uint64_t chunk = offset / kChunk; chunk <= last / kChunk; ++chunk) FillChunk(chunk);
}

size_t ChunkFiller::FillTogether(const std::vector<Range>& ranges, unsigned parallel) {
  std::vector<std::pair<ChunkFiller*, uint64_t>> todo;  // (filler, chunk) not filled yet
  for (const Range& r : ranges) {
    ChunkFiller* f = r.filler;
    if (!f || !f->NeedsFill(r.offset, r.size)) continue;
    const uint64_t last = std::min(r.offset + r.size, f->size_) - 1;
    for (uint64_t chunk = r.offset / kChunk; chunk <= last / kChunk; ++chunk)
      if (!f->Filled(chunk)) todo.emplace_back(f, chunk);
  }
  std::sort(todo.begin(), todo.end());
  todo.erase(std::unique(todo.begin(), todo.end()), todo.end());
  std::atomic<size_t> next{0};
  auto work = [&todo, &next] {
    for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < todo.size();)
      todo[i].first->FillChunk(todo[i].second);
  };
  // The caller fills chunks alone until one waits on the device. A chunk this
  // process never filled may be cached already (filled by another DataLoader
  // worker, or read by another job): mapping and unmapping it takes tens of
  // microseconds, less than starting a thread.
  for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < todo.size();) {
    const long before = MajorFaultsOfThisThread();
    todo[i].first->FillChunk(todo[i].second);
    if (MajorFaultsOfThisThread() != before) break;
  }
  const size_t consumed = std::min(next.load(std::memory_order_relaxed), todo.size());
  if (consumed == todo.size()) return 0;
  std::vector<std::thread> helpers;
  const size_t wanted = std::min<size_t>(parallel, todo.size() - consumed);
  for (size_t t = 1; t < wanted; ++t) {
    try {
      helpers.push_back(StartQuietThread(work));
    } catch (const std::system_error&) {
      break;  // no thread to be had: the caller fills the rest itself
    }
  }
  work();
  for (std::thread& t : helpers) t.join();
  return helpers.size();
}

void DropFromPageCache(int fd, uint64_t offset, uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = (offset + size + page - 1) / page * page;
  (void)::posix_fadvise(fd, static_cast<off_t>(start), static_cast<off_t>(end - start), POSIX_FADV_DONTNEED);
}

}  // namespace lmdbloader
