// ScratchBuffer: where the decode loops (decode_loops.cc) hold records
// between the read (GIL released) and decoding them into Python objects.
#ifndef LMDBLOADER_BINDINGS_SCRATCH_BUFFER_H_
#define LMDBLOADER_BINDINGS_SCRATCH_BUFFER_H_

#include <cstdint>
#include <memory>

namespace lmdbloader {

// Holds records between the read (GIL released) and decoding. Each thread
// reuses one buffer: a fresh one per call costs a zero fill and, above
// malloc's mmap threshold, a page fault per 4 KiB on every call, which
// measured slower than the read itself. A buffer above kKeepBytes is freed
// after use, so one huge batch does not pin its memory for the process's life.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(uint64_t size) {
    Slot& slot = ThreadSlot();
    // A transform called from decode_batch may read from a Reader while the
    // batch still needs its buffer: such a nested use gets a private one.
    if (slot.in_use) {
      own_.reset(new char[size ? size : 1]);
      data_ = own_.get();
      return;
    }
    if (size > slot.capacity) {
      slot.data.reset();  // free first: never hold the old and the new buffer together
      slot.data.reset(new char[size]);
      slot.capacity = size;
    }
    slot.in_use = true;
    data_ = slot.data.get();
    shared_ = true;
  }
  ~ScratchBuffer() {
    if (!shared_) return;
    Slot& slot = ThreadSlot();
    slot.in_use = false;
    if (slot.capacity > kKeepBytes) {
      slot.data.reset();
      slot.capacity = 0;
    }
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  char* data() { return data_; }

 private:
  static constexpr uint64_t kKeepBytes = 8ull << 20;
  struct Slot {
    std::unique_ptr<char[]> data;
    uint64_t capacity = 0;
    bool in_use = false;
  };
  static Slot& ThreadSlot() {
    thread_local Slot slot;
    return slot;
  }
  std::unique_ptr<char[]> own_;
  char* data_ = nullptr;
  bool shared_ = false;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_SCRATCH_BUFFER_H_
