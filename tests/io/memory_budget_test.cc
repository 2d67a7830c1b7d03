// MemoryBudget: every "how much may this use" answer from one budget.
#include "lmdbloader/memory_budget.h"

#include <gtest/gtest.h>

namespace lmdbloader {
namespace {

TEST(MemoryBudgetTest, UnboundedAnswersTheDefaults) {
  MemoryBudget b(0, 1 << 20);
  EXPECT_TRUE(b.unbounded());
  EXPECT_TRUE(b.CheckIndexFits("db", 10).ok());
  EXPECT_EQ(b.MappedAllowance(), 0u);
  EXPECT_TRUE(b.RoomForChunkFills());
  EXPECT_EQ(b.ChunkFillsInFlight(2 << 20, 4), 4u);
  EXPECT_EQ(b.ScanBatchBytes(), 32u << 20);
}

TEST(MemoryBudgetTest, TheIndexIsPaidFirstAndTheRestSharesWhatIsLeft) {
  MemoryBudget b(64 << 20, 4 << 20);
  EXPECT_EQ(b.MappedAllowance(), 60u << 20);
  EXPECT_TRUE(b.RoomForChunkFills());
  EXPECT_EQ(b.ChunkFillsInFlight(2 << 20, 4), 4u);  // 4 x 2 MiB is an eighth of 64 MiB
  EXPECT_EQ(b.ScanBatchBytes(), 16u << 20);
  MemoryBudget tight(18 << 20, 4 << 20);
  EXPECT_FALSE(tight.RoomForChunkFills()) << "14 MiB left is under the 16 MiB chunk fills need";
  EXPECT_EQ(tight.ChunkFillsInFlight(2 << 20, 4), 1u);
}

TEST(MemoryBudgetTest, AnIndexThatDoesNotFitIsAnErrorNamingThePath) {
  Status s = MemoryBudget(1 << 20, 2 << 20).CheckIndexFits("/data/train", 1000);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("smaller than the record index of /data/train (2097152 bytes for 1000 records)"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace lmdbloader
