#include "chunk_filler.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14; older headers lack the name
#endif

namespace lmdbloader {

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

void ChunkFiller::Fill(uint64_t offset, uint64_t size) {
  if (size == 0 || offset >= size_ || disabled_.load(std::memory_order_relaxed)) return;
  const uint64_t last = std::min(offset + size, size_) - 1;
  for (uint64_t chunk = offset / kChunk; chunk <= last / kChunk; ++chunk) {
    std::atomic<uint64_t>& word = filled_[chunk / 64];
    const uint64_t bit = 1ull << (chunk % 64);
    if (word.load(std::memory_order_relaxed) & bit) continue;
    char* start = base_ + chunk * kChunk;
    const uint64_t length = std::min(kChunk, size_ - chunk * kChunk);
    if (::madvise(start, length, MADV_POPULATE_READ) != 0) {
      if (errno == EINVAL) disabled_.store(true);  // kernel before 5.14
      continue;
    }
    // Unmapped at once: the folio stays cached, out of this process's RSS.
    ::madvise(start, length, MADV_DONTNEED);
    if (!(word.fetch_or(bit) & bit)) filled_count_.fetch_add(1, std::memory_order_relaxed);
  }
}

void DropFromPageCache(int fd, uint64_t offset, uint64_t size) {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t start = offset / page * page;
  const uint64_t end = (offset + size + page - 1) / page * page;
  (void)::posix_fadvise(fd, static_cast<off_t>(start), static_cast<off_t>(end - start), POSIX_FADV_DONTNEED);
}

}  // namespace lmdbloader
