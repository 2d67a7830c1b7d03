// BatchRing: slots taken and freed by generation, shared with another
// process through the descriptor, memory reserved a slot at a time as
// batches use it and given back when the producer no longer needs it.
#include "lmdbloader/batch_ring.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "test_util.h"

namespace lmdbloader {
namespace {

TEST(BatchRingTest, SlotsAreTakenUntilFullAndFreedOnlyByTheirGeneration) {
  std::unique_ptr<BatchRing> ring;
  ASSERT_OK(BatchRing::Create(3, 5000, RingBacking::kAuto, &ring));
  EXPECT_EQ(ring->slot_bytes(), 8192u);  // whole pages
  EXPECT_EQ(ring->total_bytes(), 4096u + 3 * 8192u);
  uint32_t slot[3];
  uint64_t gen[3];
  std::set<uint32_t> seen;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ring->Acquire(&slot[i], &gen[i]));
    EXPECT_NE(gen[i], 0u);
    seen.insert(slot[i]);
  }
  EXPECT_EQ(seen.size(), 3u);
  uint32_t s;
  uint64_t g;
  EXPECT_FALSE(ring->Acquire(&s, &g)) << "a full ring must say so, not block";
  EXPECT_EQ(ring->held(), 3u);
  EXPECT_FALSE(ring->Release(slot[1], gen[1] + 100)) << "another generation must not free the slot";
  EXPECT_TRUE(ring->Release(slot[1], gen[1]));
  EXPECT_FALSE(ring->Release(slot[1], gen[1])) << "a second release of one batch";
  ASSERT_TRUE(ring->Acquire(&s, &g));
  EXPECT_EQ(s, slot[1]);
  EXPECT_NE(g, gen[1]);
  EXPECT_FALSE(ring->Release(slot[1], gen[1])) << "a late release of the slot's previous batch";
  EXPECT_FALSE(ring->Release(99, g));
  EXPECT_EQ(ring->held(), 3u);
}

TEST(BatchRingTest, AnotherProcessSeesTheBytesAndReleasesThroughTheDescriptor) {
  for (RingBacking backing : {RingBacking::kMemfd, RingBacking::kShm}) {
    std::unique_ptr<BatchRing> ring;
    ASSERT_OK(BatchRing::Create(2, 4096, backing, &ring));
    uint32_t slot;
    uint64_t gen;
    ASSERT_TRUE(ring->Acquire(&slot, &gen));
    std::memset(ring->slot_data(slot), 0x5a, 4096);
    pid_t pid = ::fork();
    if (pid == 0) {
      // The consumer's side: attach a copy of the descriptor, check, release.
      std::unique_ptr<BatchRing> other;
      if (!BatchRing::Attach(::dup(ring->fd()), &other).ok()) ::_exit(2);
      for (int i = 0; i < 4096; ++i)
        if (other->slot_data(slot)[i] != 0x5a) ::_exit(3);
      ::_exit(other->Release(slot, gen) ? 0 : 4);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(ring->held(), 0u) << "the other process's release frees the slot here";
  }
}

TEST(BatchRingTest, BadSizesAndForeignSegmentsAreClearErrors) {
  std::unique_ptr<BatchRing> ring;
  EXPECT_EQ(BatchRing::Create(0, 4096, RingBacking::kAuto, &ring).code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(BatchRing::Create(BatchRing::kMaxSlots + 1, 4096, RingBacking::kAuto, &ring).code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(BatchRing::Create(2, 0, RingBacking::kAuto, &ring).code(), Status::Code::kInvalidArgument);
  int fd = ::memfd_create("not-a-ring", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  Status s = BatchRing::Attach(fd, &ring);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
  // A header whose slots times slot size wraps around to the segment's size.
  fd = ::memfd_create("forged-ring", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 8192), 0);
  const uint64_t magic = 0x474e49524c444d4cull;
  const uint32_t slots = 256;
  const uint64_t slot_bytes = (uint64_t{1} << 56) + 16;  // 256 x this = 2^64 + 4096: wraps to 4096
  ASSERT_EQ(::pwrite(fd, &magic, 8, 0), 8);
  ASSERT_EQ(::pwrite(fd, &slots, 4, 8), 4);
  ASSERT_EQ(::pwrite(fd, &slot_bytes, 8, 16), 8);
  s = BatchRing::Attach(fd, &ring);
  EXPECT_EQ(s.code(), Status::Code::kCorruption) << s.ToString();
}

TEST(BatchRingTest, AMemfdRingCannotBeResizedUnderItsMappings) {
  std::unique_ptr<BatchRing> ring;
  ASSERT_OK(BatchRing::Create(2, 8192, RingBacking::kMemfd, &ring));
  EXPECT_NE(::ftruncate(ring->fd(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(::ftruncate(ring->fd(), 1 << 20), 0);
  std::memset(ring->slot_data(1), 7, 8192);  // every slot still there
}

TEST(BatchRingTest, MemoryTheBackingCannotHoldFailsWhenReservedNamingIt) {
  std::unique_ptr<BatchRing> ring;
  // More than any test machine's /dev/shm holds: the ring is address space
  // only until a slot is reserved, and that is refused up front, not SIGBUS later.
  ASSERT_OK(BatchRing::Create(4, uint64_t{1} << 40, RingBacking::kShm, &ring));
  EXPECT_EQ(ring->reserved_bytes(), 4096u) << "only the header page is reserved at creation";
  uint32_t slot;
  uint64_t gen;
  ASSERT_TRUE(ring->Acquire(&slot, &gen));
  Status s = ring->Reserve(slot, uint64_t{1} << 40);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kIOError);
  EXPECT_EQ(s.sys_errno(), ENOSPC) << s.message();
  EXPECT_NE(s.message().find("for the batch ring in /dev/shm"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bytes free there"), std::string::npos) << s.message();
  EXPECT_EQ(ring->reserved_bytes(), 4096u) << "a refused reservation leaves nothing behind";
  ASSERT_OK(ring->Reserve(slot, 8192));  // what fits is still reserved
  EXPECT_EQ(ring->reserved_bytes(), 4096u + 8192u);
}

// A ring's memory as the kernel counts it: the header page and, per slot, the
// pages reserved for the largest batch it has held.
TEST(BatchRingTest, ASlotTakesMemoryOnlyForWhatItsBatchesUse) {
  for (RingBacking backing : {RingBacking::kMemfd, RingBacking::kShm}) {
    std::unique_ptr<BatchRing> ring;
    ASSERT_OK(BatchRing::Create(4, 1 << 20, backing, &ring));
    EXPECT_EQ(ring->total_bytes(), 4096u + 4 * (1u << 20));
    EXPECT_EQ(ring->reserved_bytes(), 4096u);
    uint32_t slot;
    uint64_t gen;
    ASSERT_TRUE(ring->Acquire(&slot, &gen));
    EXPECT_EQ(slot, 0u) << "the lowest free slot is taken";
    ASSERT_OK(ring->Reserve(slot, 5000));  // two pages
    EXPECT_EQ(ring->reserved_bytes(), 4096u + 8192u);
    ASSERT_OK(ring->Reserve(slot, 3000));  // already there
    ASSERT_OK(ring->Reserve(slot, 12288));  // grows by one page
    EXPECT_EQ(ring->reserved_bytes(), 4096u + 12288u);
    std::memset(ring->slot_data(slot), 1, 12288);
    EXPECT_EQ(ring->reserved_bytes(), 4096u + 12288u) << "writing reserved pages takes nothing more";
    EXPECT_EQ(ring->Reserve(slot, (1 << 20) + 1).code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(ring->Reserve(4, 1).code(), Status::Code::kInvalidArgument);
    // Released and taken again: the same slot, its pages still reserved.
    ASSERT_TRUE(ring->Release(slot, gen));
    ASSERT_TRUE(ring->Acquire(&slot, &gen));
    EXPECT_EQ(slot, 0u);
    EXPECT_EQ(ring->reserved_bytes(), 4096u + 12288u);
    // Only the creator reserves: another process's view has no bookkeeping.
    std::unique_ptr<BatchRing> other;
    ASSERT_OK(BatchRing::Attach(::dup(ring->fd()), &other));
    EXPECT_EQ(other->Reserve(1, 4096).code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(other->reserved_bytes(), 4096u + 12288u) << "counted from the segment, in any process";
  }
}

TEST(BatchRingTest, FreeSlotsGiveTheirMemoryBackAndAreReservedAgainWhenTaken) {
  std::unique_ptr<BatchRing> ring;
  ASSERT_OK(BatchRing::Create(3, 64 << 10, RingBacking::kMemfd, &ring));
  uint32_t slot[3];
  uint64_t gen[3];
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(ring->Acquire(&slot[i], &gen[i]));
    ASSERT_OK(ring->Reserve(slot[i], 64 << 10));
    std::memset(ring->slot_data(slot[i]), 0x40 + i, 64 << 10);
  }
  ASSERT_TRUE(ring->Release(slot[0], gen[0]));
  ASSERT_TRUE(ring->Release(slot[2], gen[2]));
  EXPECT_EQ(ring->ReturnFreeSlots(), 2u * (64 << 10));
  EXPECT_EQ(ring->reserved_bytes(), 4096u + (64u << 10)) << "the held slot keeps its pages";
  for (int i = 0; i < (64 << 10); ++i) ASSERT_EQ(ring->slot_data(slot[1])[i], 0x41) << "the held batch at " << i;
  EXPECT_EQ(ring->ReturnFreeSlots(), 0u);
  uint32_t s;
  uint64_t g;
  ASSERT_TRUE(ring->Acquire(&s, &g));
  EXPECT_EQ(ring->slot_data(s)[0], 0) << "a given-back slot reads as zeros";
  ASSERT_OK(ring->Reserve(s, 4096));
  EXPECT_EQ(ring->reserved_bytes(), 4096u + (64u << 10) + 4096u);
}

// The producer exits (a DataLoader worker at the end of an epoch) while the
// consumer still holds one batch: the free slots' memory goes back at once,
// the held batch stays intact, and its memory goes back when it is released.
TEST(BatchRingTest, ARetiredRingGivesBackFreeSlotsAtOnceAndHeldOnesAtRelease) {
  std::unique_ptr<BatchRing> consumer;
  uint32_t held_slot = 0;
  uint64_t held_gen = 0;
  {
    std::unique_ptr<BatchRing> producer;
    ASSERT_OK(BatchRing::Create(3, 64 << 10, RingBacking::kMemfd, &producer));
    uint32_t slot[2];
    uint64_t gen[2];
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(producer->Acquire(&slot[i], &gen[i]));
      ASSERT_OK(producer->Reserve(slot[i], 64 << 10));
      std::memset(producer->slot_data(slot[i]), 0x70 + i, 64 << 10);
    }
    ASSERT_OK(BatchRing::Attach(::dup(producer->fd()), &consumer));
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(consumer->Claim(slot[i], gen[i]));  // both received
    ASSERT_TRUE(consumer->Release(slot[0], gen[0]));  // the consumer is done with batch 0
    EXPECT_EQ(consumer->reserved_bytes(), 4096u + 2 * (64u << 10)) << "a live producer's slots stay reserved";
    held_slot = slot[1];
    held_gen = gen[1];
    EXPECT_FALSE(consumer->retired());
    producer->Retire();
    EXPECT_TRUE(consumer->retired()) << "the flag is in the shared header";
  }  // the producer's descriptor and mapping are gone
  EXPECT_EQ(consumer->reserved_bytes(), 4096u + (64u << 10));
  for (int i = 0; i < (64 << 10); ++i) ASSERT_EQ(consumer->slot_data(held_slot)[i], 0x71) << "held batch at " << i;
  EXPECT_EQ(consumer->generation(held_slot), held_gen);
  ASSERT_TRUE(consumer->Release(held_slot, held_gen));
  EXPECT_EQ(consumer->reserved_bytes(), 4096u) << "released on a retired ring: given back";
  EXPECT_EQ(consumer->generation(held_slot), 0u);
}

TEST(BatchRingTest, AConsumerRetiresTheRingOfAProducerThatDiedWithoutDoingSo) {
  std::unique_ptr<BatchRing> consumer;
  uint32_t slot[2];
  uint64_t gen[2];
  {
    std::unique_ptr<BatchRing> producer;
    ASSERT_OK(BatchRing::Create(2, 64 << 10, RingBacking::kShm, &producer));
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(producer->Acquire(&slot[i], &gen[i]));
      ASSERT_OK(producer->Reserve(slot[i], 64 << 10));
    }
    ASSERT_TRUE(producer->Release(slot[0], gen[0]));
    ASSERT_OK(BatchRing::Attach(::dup(producer->fd()), &consumer));
    ASSERT_TRUE(consumer->Claim(slot[1], gen[1]));
  }
  EXPECT_EQ(consumer->reserved_bytes(), 4096u + 2 * (64u << 10));
  consumer->Retire();  // the free slot, whole: this process never knew how much of it was used
  EXPECT_EQ(consumer->reserved_bytes(), 4096u + (64u << 10));
  EXPECT_FALSE(consumer->Release(slot[1], gen[1] + 1)) << "another batch's release frees nothing";
  EXPECT_EQ(consumer->reserved_bytes(), 4096u + (64u << 10));
  ASSERT_TRUE(consumer->Release(slot[1], gen[1]));
  EXPECT_EQ(consumer->reserved_bytes(), 4096u);
}

// A DataLoader epoch cut short: the producer sent batches into a queue that
// is never read again, then exits. Retiring frees them and gives their
// memory back at once; the batch the consumer did receive stays intact
// until released, and a late claim of a freed batch is refused rather than
// taken for its (now zeroed) bytes.
TEST(BatchRingTest, RetiringFreesTheBatchesNoReceiverClaimed) {
  std::unique_ptr<BatchRing> consumer;
  uint32_t slot[3];
  uint64_t gen[3];
  {
    std::unique_ptr<BatchRing> producer;
    ASSERT_OK(BatchRing::Create(4, 64 << 10, RingBacking::kMemfd, &producer));
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(producer->Acquire(&slot[i], &gen[i]));
      ASSERT_OK(producer->Reserve(slot[i], 64 << 10));
      std::memset(producer->slot_data(slot[i]), 0x40 + i, 64 << 10);
    }
    ASSERT_OK(BatchRing::Attach(::dup(producer->fd()), &consumer));
    ASSERT_TRUE(consumer->Claim(slot[0], gen[0]));
    EXPECT_FALSE(consumer->Claim(slot[0], gen[0])) << "a batch is claimed once";
    EXPECT_TRUE(consumer->claimed(slot[0]));
    EXPECT_FALSE(consumer->claimed(slot[1]));
    EXPECT_EQ(consumer->generation(slot[0]), gen[0]) << "the claim mark is not part of the generation";
    EXPECT_EQ(producer->held(), 3u);
    producer->Retire();
    EXPECT_EQ(producer->held(), 1u) << "the two batches nobody received are freed";
  }
  EXPECT_EQ(consumer->reserved_bytes(), 4096u + (64u << 10)) << "only the received batch keeps memory";
  for (int i = 0; i < (64 << 10); ++i) ASSERT_EQ(consumer->slot_data(slot[0])[i], 0x40) << "received batch at " << i;
  EXPECT_FALSE(consumer->Claim(slot[1], gen[1])) << "a batch freed by Retire must not be claimed";
  EXPECT_EQ(consumer->generation(slot[1]), 0u);
  ASSERT_TRUE(consumer->Release(slot[0], gen[0]));
  EXPECT_EQ(consumer->reserved_bytes(), 4096u);
}

TEST(BatchRingTest, AClaimedOrUnclaimedBatchIsReleasedByItsGenerationOnly) {
  std::unique_ptr<BatchRing> ring;
  ASSERT_OK(BatchRing::Create(2, 4096, RingBacking::kAuto, &ring));
  uint32_t a, b;
  uint64_t ga, gb;
  ASSERT_TRUE(ring->Acquire(&a, &ga));
  ASSERT_TRUE(ring->Acquire(&b, &gb));
  ASSERT_TRUE(ring->Claim(b, gb));
  EXPECT_FALSE(ring->Claim(b, gb + 1)) << "another generation's claim";
  EXPECT_FALSE(ring->Release(b, gb | (uint64_t{1} << 63))) << "the claim mark names no batch";
  EXPECT_FALSE(ring->Release(b, gb + 1));
  EXPECT_TRUE(ring->Release(a, ga)) << "an unclaimed batch (a producer abandoning it)";
  EXPECT_TRUE(ring->Release(b, gb)) << "a claimed batch (its receiver done with it)";
  EXPECT_EQ(ring->held(), 0u);
  EXPECT_FALSE(ring->claimed(b));
}

}  // namespace
}  // namespace lmdbloader
