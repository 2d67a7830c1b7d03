#include "lmdbloader/batch_ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "base/enum_names.h"

namespace lmdbloader {

namespace {

constexpr uint64_t kMagic = 0x474e4952'4c444d4cull;  // "LMDLRING" little-endian
constexpr uint64_t kPage = BatchRing::kHeaderBytes;  // the header is one page; slots are whole pages
constexpr uint64_t kRetiredAt = 24;  // header: magic, slots, slot bytes, retired flag
constexpr uint64_t kStatesAt = 64;   // then the state words
// A held slot's state word: the batch's generation, with this bit set once a
// receiver has claimed the batch (Lease::Take). Generations count up from 1
// in one producer and never reach it.
constexpr uint64_t kClaimed = uint64_t{1} << 63;

constexpr EnumName<RingBacking> kBackings[] = {
    {RingBacking::kAuto, "auto"}, {RingBacking::kMemfd, "memfd"}, {RingBacking::kShm, "shm"}};

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// A segment nobody can open by name: memfd, or a POSIX shm file unlinked at once.
Status NewSegment(RingBacking backing, int* fd, const char** name) {
  if (backing != RingBacking::kShm) {
    *fd = ::memfd_create("lmdbloader-batch-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    *name = "memfd";
    if (*fd >= 0) return Status::OK();
    if (backing == RingBacking::kMemfd || (errno != ENOSYS && errno != EPERM && errno != EACCES))
      return Status::FromErrno(errno, "memfd_create", "the batch ring");
  }
  *name = "/dev/shm";
  static std::atomic<uint64_t> counter{0};
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::string shm_name = "/lmdbloader-ring-" + std::to_string(::getpid()) + "-" +
                                 std::to_string(counter.fetch_add(1)) + "-" + std::to_string(attempt);
    *fd = ::shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (*fd >= 0) {
      ::shm_unlink(shm_name.c_str());  // nothing left behind, whoever dies
      return Status::OK();
    }
    if (errno != EEXIST) return Status::FromErrno(errno, "shm_open", "/dev/shm" + shm_name);
  }
  return Status::IOError("shm_open /dev/shm: no free name for the batch ring");
}

std::string FreeBytes(const char* backing) {
  struct statvfs fs;
  if (std::strcmp(backing, "/dev/shm") != 0 || ::statvfs("/dev/shm", &fs) != 0) return "";
  return ", " + std::to_string(uint64_t{fs.f_bavail} * fs.f_frsize) + " bytes free there";
}

// fallocate(2) of [offset, offset + len): 0 or the errno. Retried when a
// signal interrupts it (tmpfs undoes the interrupted call's pages first).
int Fallocate(int fd, uint64_t offset, uint64_t len) {
  while (::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

}  // namespace

Status BatchRing::Create(uint32_t slots, uint64_t slot_bytes, RingBacking backing, std::unique_ptr<BatchRing>* out) {
  if (slots == 0 || slots > kMaxSlots)
    return Status::InvalidArgument("a batch ring holds 1 to " + std::to_string(kMaxSlots) + " slots, not " +
                                   std::to_string(slots));
  if (slot_bytes == 0 || slot_bytes > (uint64_t{1} << 40))
    return Status::InvalidArgument("a batch ring's slot holds 1 byte to 1 TiB, not " + std::to_string(slot_bytes));
  std::unique_ptr<BatchRing> r(new BatchRing());
  r->slots_ = slots;
  r->slot_bytes_ = RoundUp(slot_bytes, kPage);
  r->map_bytes_ = BytesFor(slots, r->slot_bytes_);
  r->reserved_.assign(slots, 0);
  LMDBLOADER_RETURN_IF_ERROR(NewSegment(backing, &r->fd_, &r->backing_));
  // The segment's size is address space only (tmpfs files are sparse); the
  // header page is reserved now, each slot's pages by Reserve.
  int err = ::ftruncate(r->fd_, static_cast<off_t>(r->map_bytes_)) == 0 ? 0 : errno;
  if (err == 0) err = Fallocate(r->fd_, 0, kPage);
  if (err != 0)
    return Status::IOError("make a batch ring of " + std::to_string(slots) + " slots of " +
                               std::to_string(r->slot_bytes_) + " bytes in " + r->backing_ + ": " +
                               std::strerror(err) + FreeBytes(r->backing_),
                           err);
  // A memfd's size is then sealed: no process it reaches can shrink it under
  // another's mapping (which would turn reads of a slot into SIGBUS).
  // Punching holes stays allowed (only a write seal forbids it).
  if (std::strcmp(r->backing_, "memfd") == 0)
    (void)::fcntl(r->fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  void* p = ::mmap(nullptr, r->map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd_, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap", std::string("the batch ring in ") + r->backing_);
  r->map_ = static_cast<char*>(p);
  r->data_ = r->map_ + kHeaderBytes;
  std::memcpy(r->map_, &kMagic, 8);
  std::memcpy(r->map_ + 8, &r->slots_, 4);
  std::memcpy(r->map_ + 16, &r->slot_bytes_, 8);
  // The header page is zero: not retired, every state word says free.
  *out = std::move(r);
  return Status::OK();
}

Status BatchRing::Attach(int fd, std::unique_ptr<BatchRing>* out) {
  std::unique_ptr<BatchRing> r(new BatchRing());
  r->fd_ = fd;  // closed with r on every path
  r->backing_ = "received";
  struct stat st;
  if (::fstat(fd, &st) != 0) return Status::FromErrno(errno, "fstat", "a received batch ring");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < kPage) return Status::Corruption("a received batch ring has " + std::to_string(size) + " bytes");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap", "a received batch ring");
  r->map_ = static_cast<char*>(p);
  r->map_bytes_ = size;
  uint64_t magic = 0;
  std::memcpy(&magic, r->map_, 8);
  std::memcpy(&r->slots_, r->map_ + 8, 4);
  std::memcpy(&r->slot_bytes_, r->map_ + 16, 8);
  // slot_bytes no larger than the segment first: the product below cannot wrap.
  if (magic != kMagic || r->slots_ == 0 || r->slots_ > kMaxSlots || r->slot_bytes_ == 0 ||
      r->slot_bytes_ > size || r->slot_bytes_ % kPage != 0 || BytesFor(r->slots_, r->slot_bytes_) != size)
    return Status::Corruption("a received batch ring has a damaged header");
  r->data_ = r->map_ + kHeaderBytes;
  // Kept to count the ring's memory (fstat); a process this one starts with
  // exec must not keep the segment alive.
  (void)::fcntl(r->fd_, F_SETFD, FD_CLOEXEC);
  *out = std::move(r);
  return Status::OK();
}

uint64_t BatchRing::BytesFor(uint32_t slots, uint64_t slot_bytes) {
  return kHeaderBytes + uint64_t{slots} * RoundUp(slot_bytes, kPage);
}

BatchRing::~BatchRing() {
  if (map_) ::munmap(map_, map_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

uint64_t* BatchRing::state(uint32_t slot) const {
  return reinterpret_cast<uint64_t*>(map_ + kStatesAt) + slot;  // 8-byte aligned in a page-aligned map
}

bool BatchRing::Acquire(uint32_t* slot, uint64_t* generation) {
  for (uint32_t i = 0; i < slots_; ++i) {
    uint64_t expected = 0;
    if (__atomic_load_n(state(i), __ATOMIC_ACQUIRE) != 0) continue;
    const uint64_t gen = ++next_generation_;
    // Acquire ordering: the holder's last reads of the slot happen before
    // its release, and so before this producer writes the slot again.
    if (__atomic_compare_exchange_n(state(i), &expected, gen, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      *slot = i;
      *generation = gen;
      return true;
    }
  }
  return false;
}

uint64_t* BatchRing::retired_word() const { return reinterpret_cast<uint64_t*>(map_ + kRetiredAt); }

Status BatchRing::Reserve(uint32_t slot, uint64_t bytes) {
  if (reserved_.empty())
    return Status::InvalidArgument("only the process that created a batch ring reserves its memory");
  if (slot >= slots_ || bytes > slot_bytes_)
    return Status::InvalidArgument("a batch ring of " + std::to_string(slots_) + " slots of " +
                                   std::to_string(slot_bytes_) + " bytes has no " + std::to_string(bytes) +
                                   " bytes in slot " + std::to_string(slot));
  const uint64_t want = RoundUp(bytes, kPage);
  const uint64_t have = reserved_[slot];
  if (want <= have) return Status::OK();
  const uint64_t at = static_cast<uint64_t>(slot_data(slot) - map_) + have;
  const int err = Fallocate(fd_, at, want - have);
  if (err != 0)
    return Status::IOError("reserve " + std::to_string(want - have) + " bytes of shared memory (slot " +
                               std::to_string(slot) + " of " + std::to_string(slots_) + ", " +
                               std::to_string(want) + " bytes in all) for the batch ring in " + backing_ + ": " +
                               std::strerror(err) + FreeBytes(backing_),
                           err);
  reserved_[slot] = want;
  return Status::OK();
}

bool BatchRing::Release(uint32_t slot, uint64_t generation) {
  if (slot >= slots_ || generation == 0 || (generation & kClaimed) != 0) return false;
  uint64_t expected = __atomic_load_n(state(slot), __ATOMIC_SEQ_CST);
  // Sequentially consistent with Retire: either this sees the ring retired
  // and gives the slot back, or Retire sees the slot free and does. A failed
  // exchange reloads `expected`: a claim that lands meanwhile is retried.
  do {
    if ((expected & ~kClaimed) != generation) return false;
  } while (!__atomic_compare_exchange_n(state(slot), &expected, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
  if (__atomic_load_n(retired_word(), __ATOMIC_SEQ_CST) != 0) GiveBack(slot);
  return true;
}

bool BatchRing::Claim(uint32_t slot, uint64_t generation) {
  if (slot >= slots_ || generation == 0 || (generation & kClaimed) != 0) return false;
  uint64_t expected = generation;
  // Against Retire's exchange of an unclaimed slot: one of the two wins.
  return __atomic_compare_exchange_n(state(slot), &expected, generation | kClaimed, false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST);
}

uint64_t BatchRing::GiveBack(uint32_t slot) {
  uint64_t bytes = reserved_.empty() ? slot_bytes_ : reserved_[slot];
  if (bytes == 0) return 0;
  // MADV_REMOVE punches a hole in the segment under the mapping: the pages
  // leave every process's mapping and the memory is free, while the segment
  // keeps its size. Failing that (a backing without hole punching), the
  // pages stay until the last mapping goes.
  if (::madvise(slot_data(slot), bytes, MADV_REMOVE) != 0) return 0;
  if (!reserved_.empty()) reserved_[slot] = 0;
  return bytes;
}

uint64_t BatchRing::ReturnFreeSlots() {
  uint64_t bytes = 0;
  for (uint32_t i = 0; i < slots_ && !reserved_.empty(); ++i)
    if (reserved_[i] != 0 && __atomic_load_n(state(i), __ATOMIC_ACQUIRE) == 0) bytes += GiveBack(i);
  return bytes;
}

void BatchRing::Retire() {
  __atomic_store_n(retired_word(), 1, __ATOMIC_SEQ_CST);
  for (uint32_t i = 0; i < slots_; ++i) {
    uint64_t expected = __atomic_load_n(state(i), __ATOMIC_SEQ_CST);
    // A batch sent and never claimed (left in a queue nobody reads) is freed
    // here: no receiver will release it. A claimed one is its holder's.
    while (expected != 0 && (expected & kClaimed) == 0 &&
           !__atomic_compare_exchange_n(state(i), &expected, 0, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    if ((expected & kClaimed) == 0) GiveBack(i);
  }
}

bool BatchRing::retired() const { return __atomic_load_n(retired_word(), __ATOMIC_ACQUIRE) != 0; }

uint64_t BatchRing::generation(uint32_t slot) const {
  return slot < slots_ ? __atomic_load_n(state(slot), __ATOMIC_ACQUIRE) & ~kClaimed : 0;
}

bool BatchRing::claimed(uint32_t slot) const {
  return slot < slots_ && (__atomic_load_n(state(slot), __ATOMIC_ACQUIRE) & kClaimed) != 0;
}

uint64_t BatchRing::reserved_bytes() const {
  struct stat st;
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

uint32_t BatchRing::held() const {
  uint32_t n = 0;
  for (uint32_t i = 0; i < slots_; ++i) n += __atomic_load_n(state(i), __ATOMIC_ACQUIRE) != 0;
  return n;
}

Status BatchRing::Lease::Take(std::shared_ptr<BatchRing> ring, uint32_t slot, uint64_t generation,
                              std::unique_ptr<Lease>* out) {
  if (!ring || slot >= ring->slots()) return Status::InvalidArgument("no slot " + std::to_string(slot) + " in this ring");
  if (!ring->Claim(slot, generation))
    return Status::InvalidArgument("slot " + std::to_string(slot) + " of the batch ring no longer holds batch " +
                                   std::to_string(generation) + " (freed by its producer, or claimed already)");
  out->reset(new Lease(std::move(ring), slot, generation, ::getpid()));
  return Status::OK();
}

BatchRing::Lease::~Lease() {
  if (::getpid() == holder_) ring_->Release(slot_, generation_);
}

Status ParseRingBacking(std::string_view text, RingBacking* backing) {
  return ParseName(kBackings, "backing", text, backing);
}

}  // namespace lmdbloader
