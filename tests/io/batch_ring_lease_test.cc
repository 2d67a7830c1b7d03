// BatchRing::Lease: a batch's hold on its slot releases the slot when it
// goes, only in the process that took it, and the ring's layout accessors
// agree with the ring Create makes.
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "lmdbloader/batch_ring.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

std::shared_ptr<BatchRing> MakeRing(uint32_t slots, uint64_t slot_bytes) {
  std::unique_ptr<BatchRing> ring;
  Status s = BatchRing::Create(slots, slot_bytes, RingBacking::kAuto, &ring);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::shared_ptr<BatchRing>(std::move(ring));
}

// A ring of `slots` slots, one new batch's slot of it leased by this
// process (lease null when the ring is full).
struct Leased {
  std::shared_ptr<BatchRing> ring;
  uint32_t slot = 0;
  uint64_t generation = 0;
  std::unique_ptr<BatchRing::Lease> lease;
};

Leased LeaseNewBatch(uint32_t slots) {
  Leased l;
  l.ring = MakeRing(slots, 4096);
  if (l.ring->Acquire(&l.slot, &l.generation)) {
    Status s = BatchRing::Lease::Take(l.ring, l.slot, l.generation, &l.lease);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  return l;
}

TEST(BatchRingLeaseTest, ReleasesItsSlotWhenDestroyed) {
  auto [ring, slot, generation, lease] = LeaseNewBatch(2);
  ASSERT_NE(lease, nullptr);
  EXPECT_EQ(lease->data(), ring->slot_data(slot));
  EXPECT_EQ(lease->size(), ring->slot_bytes());
  EXPECT_EQ(lease->holder(), ::getpid());
  EXPECT_EQ(ring->generation(slot), generation) << "a lease must not free its slot while it lives";
  lease.reset();
  EXPECT_EQ(ring->generation(slot), 0u) << "the slot should be free once its lease is gone";
}

TEST(BatchRingLeaseTest, KeepsTheRingAliveAfterItsLastOtherOwner) {
  auto [ring, slot, generation, lease] = LeaseNewBatch(1);
  ASSERT_NE(lease, nullptr);
  std::weak_ptr<BatchRing> weak = ring;
  ring.reset();
  ASSERT_FALSE(weak.expired()) << "the lease must keep the ring mapped";
  lease->data()[0] = 1;  // still mapped
  lease.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(BatchRingLeaseTest, ALeaseDestroyedInAForkedChildFreesNothing) {
  auto [ring, slot, generation, lease] = LeaseNewBatch(2);
  ASSERT_NE(lease, nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    lease.reset();  // the child's copy: must leave the parent's slot held
    ::_exit(ring->generation(slot) == generation ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's release freed the slot under the parent";
  EXPECT_EQ(ring->generation(slot), generation) << "the parent's slot must stay held after the child";
  lease.reset();
  EXPECT_EQ(ring->generation(slot), 0u) << "the parent's own lease should free the slot";
}

TEST(BatchRingLeaseTest, ALeaseOnASlotTheRingLacksIsInvalidArgument) {
  std::shared_ptr<BatchRing> ring = MakeRing(2, 4096);
  std::unique_ptr<BatchRing::Lease> lease;
  Status s = BatchRing::Lease::Take(ring, 2, 1, &lease);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_EQ(lease, nullptr);
}

TEST(BatchRingLeaseTest, ALateLeaseIsRefusedAndFreesNotTheSlotsNextBatch) {
  std::shared_ptr<BatchRing> ring = MakeRing(1, 4096);
  uint32_t slot = 0;
  uint64_t first = 0, second = 0;
  ASSERT_TRUE(ring->Acquire(&slot, &first));
  ASSERT_TRUE(ring->Release(slot, first));
  ASSERT_TRUE(ring->Acquire(&slot, &second));
  std::unique_ptr<BatchRing::Lease> stale;
  Status s = BatchRing::Lease::Take(ring, slot, first, &stale);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("no longer holds batch"), std::string::npos) << s.ToString();
  EXPECT_EQ(stale, nullptr);
  EXPECT_EQ(ring->generation(slot), second) << "a lease of an old generation touched the next batch";
  EXPECT_FALSE(ring->claimed(slot)) << "a refused lease must not claim the next batch";
}

TEST(BatchRingLeaseTest, TakingALeaseClaimsTheBatchOnce) {
  auto [ring, slot, generation, lease] = LeaseNewBatch(1);
  ASSERT_NE(lease, nullptr);
  EXPECT_TRUE(ring->claimed(slot));
  std::unique_ptr<BatchRing::Lease> second;
  EXPECT_EQ(BatchRing::Lease::Take(ring, slot, generation, &second).code(), Status::Code::kInvalidArgument)
      << "two leases of one batch would free it under each other";
  ring->Retire();
  EXPECT_EQ(ring->generation(slot), generation) << "retiring must leave a received batch to its lease";
  lease.reset();
  EXPECT_EQ(ring->held(), 0u);
}

TEST(BatchRingLayoutTest, OffsetsAndSizeAgreeWithTheRing) {
  std::shared_ptr<BatchRing> ring = MakeRing(3, 5000);
  EXPECT_EQ(BatchRing::BytesFor(3, 5000), ring->total_bytes());
  EXPECT_EQ(BatchRing::BytesFor(3, 8192), ring->total_bytes()) << "a slot is whole pages either way";
  EXPECT_EQ(ring->total_bytes(), BatchRing::kHeaderBytes + 3 * ring->slot_bytes());
  for (uint32_t slot = 0; slot < 3; ++slot) {
    EXPECT_EQ(ring->SlotOffset(slot), slot * ring->slot_bytes());
    EXPECT_EQ(ring->slot_data(slot), ring->slot_data(0) + ring->SlotOffset(slot));
  }
  EXPECT_EQ(ring->reserved_bytes(), BatchRing::kHeaderBytes) << "a new ring holds its header page only";
}

}  // namespace
}  // namespace lmdbloader
