#include "io/file_system.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace lmdbloader {
namespace {

TEST(FileSystemTest, LocalFilesAndMissingPathsAreLocal) {
  testing::TempDir dir;
  EXPECT_FALSE(FileSystemOf(dir.path()).remote);
  EXPECT_EQ(FileSystemOf(dir.path()).name, "local");
  EXPECT_EQ(FileSystemOf("/proc/self/status").name, "local");
  EXPECT_FALSE(FileSystemOf(dir.Sub("missing")).remote);
}

}  // namespace
}  // namespace lmdbloader
