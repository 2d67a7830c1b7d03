// BatchRing: a fixed set of equal-size slots in one shared-memory segment,
// reused batch after batch between one producing process and the processes
// it hands batches to.
//
// Why: moving a batch from a DataLoader worker to the main process through
// torch's default path costs a fresh shared-memory segment per tensor per
// batch (shm_open, ftruncate, mmap, a page fault and a zero fill per 4 KiB,
// a Unix-socket connection for the descriptor, munmap and page release when
// the batch dies): measured 19 ms per 8 MiB batch against under 1 ms to refill
// a mapped buffer. A ring is created once per worker, its descriptor crosses
// once, and later batches name only (slot, generation).
//
// Layout: one header page (magic, slot count, slot size, then one 64-bit
// state word per slot), then the slots, each page-aligned. A slot's state is
// 0 when free and the generation of the batch in it when held. The producer
// takes a free slot (Acquire), fills it and hands (slot, generation) on; the
// holder frees it (Release) when nothing refers to the batch any more.
// Release names the generation, so a late or repeated release never frees a
// slot's next batch. State words are lock-free atomics in the shared mapping:
// any process that maps the segment may release.
//
// Backing: a memfd (Linux 3.17; no name, nothing in /dev/shm, freed when the
// last descriptor and mapping are gone, whoever dies first), else a POSIX
// shared-memory file unlinked at once. Either way every page is reserved at
// creation (fallocate), so a file system or cgroup too small for the ring
// fails Create with a clear error, never a SIGBUS when a slot is first
// written.
//
// Thread-safety: Acquire is for one producer thread; Release and the
// accessors may be called from any thread of any process mapping the ring.
// Not fork-aware: a forked child inherits the mapping and the slots its
// parent holds; it must not release those (that would free them under the
// parent) nor Acquire on its parent's ring. Python's RingLease releases
// only in the process that took it.
#ifndef LMDBLOADER_BATCH_RING_H_
#define LMDBLOADER_BATCH_RING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

enum class RingBacking {
  kAuto,    // memfd, else POSIX shared memory where memfd is refused
  kMemfd,   // memfd only
  kShm,     // POSIX shared memory (/dev/shm) only, unlinked at once
};

class BatchRing {
 public:
  // At most this many slots (the header page holds their state words).
  static constexpr uint32_t kMaxSlots = 500;

  // Creates a ring of `slots` slots of at least `slot_bytes` bytes (rounded up
  // to whole pages). InvalidArgument for 0 or too many slots or a zero size;
  // IOError naming the backing and the size when the memory cannot be
  // reserved (ENOSPC, ENOMEM).
  static Status Create(uint32_t slots, uint64_t slot_bytes, RingBacking backing, std::unique_ptr<BatchRing>* out);

  // Maps the ring behind `fd` (a descriptor received from its creator), which
  // this takes over and closes. Corruption when the segment is not a ring.
  static Status Attach(int fd, std::unique_ptr<BatchRing>* out);

  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  // The descriptor to hand to another process (owned by the ring; -1 after Attach).
  int fd() const { return fd_; }
  uint32_t slots() const { return slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  // Bytes of shared memory the ring holds (header and slots).
  uint64_t total_bytes() const { return map_bytes_; }
  const char* backing_name() const { return backing_; }

  // Start of slot `slot`'s bytes (slot < slots()).
  char* slot_data(uint32_t slot) const { return data_ + uint64_t{slot} * slot_bytes_; }

  // Takes a free slot for a new batch: true with the slot and the batch's
  // generation (never 0), false when every slot is held.
  bool Acquire(uint32_t* slot, uint64_t* generation);
  // Frees `slot` if it still holds `generation`; false otherwise (already
  // freed, or out of range).
  bool Release(uint32_t slot, uint64_t generation);
  // Slots held now.
  uint32_t held() const;

 private:
  BatchRing() = default;
  uint64_t* state(uint32_t slot) const;

  int fd_ = -1;
  char* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  char* data_ = nullptr;
  uint32_t slots_ = 0;
  uint64_t slot_bytes_ = 0;
  uint64_t next_generation_ = 0;
  const char* backing_ = "memfd";
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_BATCH_RING_H_
