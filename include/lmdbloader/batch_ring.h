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
// Layout: one header page (magic, slot count, slot size, the retired flag,
// then one 64-bit state word per slot), then the slots, each page-aligned. A
// slot's state is 0 when free and the generation of the batch in it when
// held, marked claimed once a receiver has taken the batch. The producer
// takes a free slot (Acquire), fills it and hands (slot, generation) on; the
// receiver claims it (Lease::Take) and frees it (Release) when nothing refers
// to the batch any more. Release names the generation, so a late or repeated
// release never frees a slot's next batch. State words are lock-free atomics
// in the shared mapping: any process that maps the segment may claim and
// release.
//
// Backing: a memfd (Linux 3.17; no name, nothing in /dev/shm, freed when the
// last descriptor and mapping are gone, whoever dies first), else a POSIX
// shared-memory file unlinked at once.
//
// Memory: a ring spans address space for every slot but holds memory only for
// what batches have used. The producer reserves a slot's pages (fallocate)
// before it writes them (Reserve), up to the largest batch the slot has held,
// so a file system or cgroup too small for a batch fails that Reserve with a
// clear error, never a SIGBUS when the page is first written. Pages go back
// to the system (a hole punched in the segment) when the producer gives up a
// free slot (ReturnFreeSlots), and once the producer is gone (Retire): its
// free slots and those whose batch no receiver claimed at once (a batch sent
// into a queue that is never read again: a DataLoader epoch cut short), each
// claimed one when its batch is released.
//
// Thread-safety: Acquire, Reserve and ReturnFreeSlots are for one producer
// thread of the ring's creator; Claim, Release, Retire and the accessors may be
// called from any thread of any process mapping the ring.
// Fork: a forked child inherits the mapping and the slots its parent holds;
// it must not release those (that would free them under the parent) nor
// Acquire on its parent's ring. A BatchRing::Lease (below) holds a batch's
// slot for the process that took it and releases it only there, so a child
// that inherits a Lease frees nothing of its parent's.
#ifndef LMDBLOADER_BATCH_RING_H_
#define LMDBLOADER_BATCH_RING_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/status.h"

namespace lmdbloader {

enum class RingBacking {
  kAuto,    // memfd, else POSIX shared memory where memfd is refused
  kMemfd,   // memfd only
  kShm,     // POSIX shared memory (/dev/shm) only, unlinked at once
};

// Parses "auto", "memfd" or "shm" (the names Python's Collate(backing=...)
// takes). InvalidArgument naming them otherwise.
Status ParseRingBacking(std::string_view text, RingBacking* backing);

class BatchRing {
 public:
  // At most this many slots (the header page holds their state words).
  static constexpr uint32_t kMaxSlots = 500;
  // Bytes of the header page that precedes the slots; a ring whose slots
  // hold no memory yet holds this much.
  static constexpr uint64_t kHeaderBytes = 4096;

  class Lease;

  // Bytes of address space a ring of `slots` slots of `slot_bytes` spans
  // (what total_bytes() of the ring Create makes returns): the header page
  // and each slot rounded up to whole pages.
  static uint64_t BytesFor(uint32_t slots, uint64_t slot_bytes);

  // Creates a ring of `slots` slots of at least `slot_bytes` bytes (rounded up
  // to whole pages). Only the header page is reserved: slots take memory when
  // Reserve gives it to them. InvalidArgument for 0 or too many slots or a
  // zero size; IOError naming the backing when the segment cannot be made.
  static Status Create(uint32_t slots, uint64_t slot_bytes, RingBacking backing, std::unique_ptr<BatchRing>* out);

  // Maps the ring behind `fd` (a descriptor received from its creator), which
  // this takes over and keeps (close-on-exec) to count the ring's memory.
  // Corruption when the segment is not a ring.
  static Status Attach(int fd, std::unique_ptr<BatchRing>* out);

  ~BatchRing();
  BatchRing(const BatchRing&) = delete;
  BatchRing& operator=(const BatchRing&) = delete;

  // The ring's descriptor, owned by the ring (the creator's is the one to
  // hand to another process).
  int fd() const { return fd_; }
  uint32_t slots() const { return slots_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  // Bytes of address space the ring spans (header and every slot).
  uint64_t total_bytes() const { return map_bytes_; }
  // Bytes of memory the ring's pages hold now, as the kernel counts them
  // (the segment's allocated blocks), whoever reserved them; 0 if that
  // cannot be read.
  uint64_t reserved_bytes() const;
  const char* backing_name() const { return backing_; }

  // Where slot `slot` starts, counted from the first slot's first byte
  // (slot_data(0)): the slots lie one after another, slot_bytes() apart.
  uint64_t SlotOffset(uint32_t slot) const { return uint64_t{slot} * slot_bytes_; }
  // Start of slot `slot`'s bytes (slot < slots()). Only the first bytes
  // Reserve gave the slot may be written.
  char* slot_data(uint32_t slot) const { return data_ + SlotOffset(slot); }

  // Takes a free slot for a new batch: true with the slot and the batch's
  // generation (never 0), false when every slot is held. The lowest free
  // slot is taken, so a ring uses no more slots than it has held at once.
  bool Acquire(uint32_t* slot, uint64_t* generation);
  // Backs the first `bytes` of `slot` (rounded up to pages) with memory if
  // they are not yet; a no-op when they are. Only the ring's creator reserves
  // (InvalidArgument otherwise, or for a slot out of range or more bytes than
  // a slot holds). IOError naming the backing, the size and the reason
  // (ENOSPC, ENOMEM) when the memory cannot be had; nothing of this call is
  // left reserved then.
  Status Reserve(uint32_t slot, uint64_t bytes);
  // Frees `slot` if it still holds `generation`, claimed or not; false
  // otherwise (already freed, or out of range). On a retired ring the slot's
  // memory goes back to the system too.
  bool Release(uint32_t slot, uint64_t generation);
  // Marks the batch of `generation` in `slot` as received, so that Retire
  // leaves it to its receiver: true if it was held and unclaimed, false when
  // the slot no longer holds it (Retire freed it, or a release did) or it is
  // claimed already. Lease::Take claims; a receiver claims once per batch.
  bool Claim(uint32_t slot, uint64_t generation);
  // Gives the memory of every free slot back to the system (creator only;
  // a slot taken later is reserved again). Returns the bytes given back.
  uint64_t ReturnFreeSlots();
  // The producer is gone, or about to be: marks the ring retired (in the
  // shared header, for every process mapping it), frees every slot whose
  // batch no receiver has claimed (nobody will receive it now: a later Claim
  // of it fails, so its zeroed bytes are never taken for the batch), and
  // gives back the memory of every free slot; a claimed slot's goes back when
  // its batch is released. The creator must not Acquire after this. Call it
  // from the creator as it exits, once nothing it sent will be received, or
  // from a process that knows the creator has exited.
  void Retire();
  bool retired() const;
  // The generation of the batch in `slot`, 0 when free (or out of range).
  uint64_t generation(uint32_t slot) const;
  // Whether a receiver has claimed the batch in `slot`.
  bool claimed(uint32_t slot) const;
  // Slots held now.
  uint32_t held() const;

 private:
  BatchRing() = default;
  uint64_t* state(uint32_t slot) const;
  uint64_t* retired_word() const;
  // Punches out `slot`'s pages (the creator: those it reserved; any other
  // process: the whole slot). The slot must be free and stay free meanwhile.
  uint64_t GiveBack(uint32_t slot);

  int fd_ = -1;
  char* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  char* data_ = nullptr;
  uint32_t slots_ = 0;
  uint64_t slot_bytes_ = 0;
  uint64_t next_generation_ = 0;
  const char* backing_ = "memfd";
  // The creator's count of each slot's reserved bytes (whole pages); empty
  // in a process that attached the ring.
  std::vector<uint64_t> reserved_;
};

// A batch's hold on one slot of a ring, in a process that received the
// batch: keeps the ring mapped, exposes the slot's bytes, and releases
// (slot, generation) when destroyed, so the slot is reused only once nothing
// holds its batch. Only the process that took the lease releases it: a child
// forked while a Lease lives inherits a copy whose destruction frees nothing
// (its release would free the slot under the parent's batch); the slot stays
// the parent's until the parent's Lease goes.
//
// Thread-safety: a Lease is immutable after Take; destroy it once.
class BatchRing::Lease {
 public:
  // Claims the batch of `generation` in `slot` of `ring` and holds it for the
  // calling process. InvalidArgument when the ring has no such slot, or the
  // slot no longer holds that batch unclaimed (its producer retired the ring
  // before the batch was received, or the batch was leased already): its
  // bytes are not the batch's.
  static Status Take(std::shared_ptr<BatchRing> ring, uint32_t slot, uint64_t generation,
                     std::unique_ptr<Lease>* out);

  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

  // The slot's bytes (slot_bytes() of them), valid while the Lease lives.
  char* data() const { return ring_->slot_data(slot_); }
  uint64_t size() const { return ring_->slot_bytes(); }
  uint32_t slot() const { return slot_; }
  uint64_t generation() const { return generation_; }
  // The process that took the lease, the only one whose destruction releases.
  pid_t holder() const { return holder_; }

 private:
  Lease(std::shared_ptr<BatchRing> ring, uint32_t slot, uint64_t generation, pid_t holder)
      : ring_(std::move(ring)), slot_(slot), generation_(generation), holder_(holder) {}

  const std::shared_ptr<BatchRing> ring_;
  const uint32_t slot_;
  const uint64_t generation_;
  const pid_t holder_;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_BATCH_RING_H_
