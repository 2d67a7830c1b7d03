// The record checksum (src/base/checksum.h): XXH3-64, one-shot and streamed.
#include "base/checksum.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace lmdbloader {
namespace {

// The one-shot form (AVX2 where the CPU has it) is XXH3-64 as libxxhash's
// scalar-dispatching entry point computes it: what any other reader of a
// corpus's checksums will compute.
TEST(ChecksumTest, IsXxh3OfTheBytes) {
  for (size_t size : {size_t{0}, size_t{3}, size_t{129}, size_t{240}, size_t{241}, size_t{65537}}) {
    const std::string bytes = testing::RecordBytes(size + 1, size);
    EXPECT_EQ(Checksum(bytes), XXH3_64bits(bytes.data(), bytes.size())) << size << " bytes";
  }
}

// Values too large to hold are checked a piece at a time: the streaming
// form must give the one-shot checksum for any split (the one-shot may take
// the AVX2 path, the streaming one does not).
TEST(ChecksumTest, PiecesGiveTheChecksumOfTheWhole) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{17}, size_t{240}, size_t{4096}, size_t{1 << 20}, size_t{3000001}}) {
    const std::string bytes = testing::RecordBytes(size, size);
    for (size_t piece : {size_t{1}, size_t{7}, size_t{64}, size_t{1000}, size_t{1 << 20}}) {
      if (piece == 1 && size > 5000) continue;
      ChecksumStream stream;
      for (size_t at = 0; at < size; at += piece) stream.Add(bytes.data() + at, std::min(piece, size - at));
      EXPECT_EQ(stream.Value(), Checksum(bytes)) << size << " bytes in pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace lmdbloader
