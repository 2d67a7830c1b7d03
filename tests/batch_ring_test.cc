// BatchRing: slots taken and freed by generation, shared with another
// process through the descriptor, memory reserved up front.
#include "lmdbloader/batch_ring.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(BatchRingTest, MemoryTheBackingCannotHoldFailsAtCreationNamingIt) {
  std::unique_ptr<BatchRing> ring;
  // More than any test machine's /dev/shm holds: refused up front, not SIGBUS later.
  Status s = BatchRing::Create(4, uint64_t{1} << 40, RingBacking::kShm, &ring);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("for the batch ring in /dev/shm"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
