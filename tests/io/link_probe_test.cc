// The link probe: the decision it feeds (read around small records or read
// them exactly) follows the cost model both ways, refuses without a
// measurement, and the probe measures a real file, leaves small, missing
// and unreadable ones unmeasured, and needs no page cache to be cold
// (O_DIRECT, or its buffered fallback).
#include "io/link_probe.h"

#include <fstream>
#include <memory>
#include <string>

#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;

LinkEstimate Link(double requests_s, double bytes_per_s) {
  LinkEstimate link;
  link.measured = true;
  link.requests_s = requests_s;
  link.bytes_per_s = bytes_per_s;
  return link;
}

TEST(LinkProbeTest, ReadsAroundOnlyWhereTheWholeFileCostsLessThanTheRecords) {
  // 200,000 records of 2 KiB in 825 MB, a third read; 16 requests in 2 ms.
  const uint64_t file = 825'000'000;
  const double third = 200'000 / 3.0;
  EXPECT_TRUE(ReadAroundPays(Link(2e-3, 600e6), file, third));    // 1.4 s against 4.2 s
  EXPECT_FALSE(ReadAroundPays(Link(2e-3, 117e6), file, third));   // 7.1 s against 4.2 s: the link is the limit
  EXPECT_FALSE(ReadAroundPays(Link(2e-3, 600e6), file, 20'000));  // 1.4 s against 1.25 s: a tenth
  EXPECT_TRUE(ReadAroundPays(Link(2e-3, 0), file, 20'000));       // bandwidth beyond what the probe tells
  EXPECT_FALSE(ReadAroundPays(LinkEstimate{}, file, third));      // never without a measurement
  EXPECT_FALSE(ReadAroundPays(Link(2e-3, 600e6), file, 0));
}

TEST(LinkProbeTest, OnlySmallRecordsAreReadWithTheirWindow) {
  EXPECT_TRUE(ReadsAround(1));
  EXPECT_TRUE(ReadsAround(kReadAroundWindow / 4));
  EXPECT_FALSE(ReadsAround(kReadAroundWindow / 4 + 1));
  EXPECT_FALSE(ReadsAround(110 << 10));
}

std::unique_ptr<BatchIo> Threads() {
  std::unique_ptr<BatchIo> io;
  std::string why;
  EXPECT_TRUE(BatchIo::Create(IoEngine::kThreads, 16, &io, &why).ok());
  return io;
}

TEST(LinkProbeTest, MeasuresAFileLargeEnough) {
  TempDir dir;
  const std::string path = dir.Sub("data");
  std::ofstream(path, std::ios::binary) << testing::RecordBytes(1, 20 << 20);
  const auto io = Threads();
  const LinkEstimate link = MeasureLink(path, io.get());
  ASSERT_TRUE(link.measured);
  EXPECT_GT(link.requests_s, 0);
  EXPECT_GE(link.bytes_per_s, 0);
}

TEST(LinkProbeTest, SmallMissingAndUnreadableFilesAreNotMeasured) {
  TempDir dir;
  const std::string small = dir.Sub("small");
  std::ofstream(small, std::ios::binary) << testing::RecordBytes(2, 16 << 20);  // under 16.5 MiB
  const auto io = Threads();
  EXPECT_FALSE(MeasureLink(small, io.get()).measured);
  EXPECT_FALSE(MeasureLink(dir.Sub("missing"), io.get()).measured);
  EXPECT_FALSE(MeasureLink(dir.path(), io.get()).measured);  // a directory
}

}  // namespace
}  // namespace lmdbloader
