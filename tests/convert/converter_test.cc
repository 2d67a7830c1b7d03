// Convert: folders and manifests become corpora; bad input names the file and
// the reason, and leaves nothing at the output.
#include "lmdbloader/convert.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "lmdbloader/reader.h"
#include "lmdbloader/shard_set.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

void ImageFolder(const std::string& root, int per_class) {
  for (int c = 0; c < 2; ++c) {
    fs::create_directories(root + "/class_" + std::to_string(c));
    for (int i = 0; i < per_class; ++i)
      std::ofstream(root + "/class_" + std::to_string(c) + "/img" + std::to_string(i) + ".jpg", std::ios::binary)
          << testing::RecordBytes(c * 100 + i, 500);
  }
}

TEST(ConverterTest, AnImageFolderBecomesACorpusInNameOrder) {
  TempDir dir;
  ImageFolder(dir.Sub("src"), 3);
  ConvertOptions o;
  o.source_kind = SourceKind::kImageFolder;
  o.source = dir.Sub("src");
  o.output = dir.Sub("out");
  ConvertSummary summary;
  ASSERT_OK(Convert(o, &summary));
  EXPECT_EQ(summary.records, 6u);
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("out"), ReaderOptions(), &r));
  std::string name;
  ASSERT_OK(r->Name(0, &name));
  EXPECT_EQ(name, "class_0/img0.jpg");
}

TEST(ConverterTest, ShardsAreListedAndTheirCountIsBounded) {
  TempDir dir;
  ImageFolder(dir.Sub("src"), 5);
  ConvertOptions o;
  o.source_kind = SourceKind::kImageFolder;
  o.source = dir.Sub("src");
  o.output = dir.Sub("set");
  o.num_shards = 3;
  ConvertSummary summary;
  ASSERT_OK(Convert(o, &summary));
  EXPECT_EQ(summary.outputs.size(), 3u);
  EXPECT_TRUE(fs::exists(dir.Sub("set/shards.json")));
  o.output = dir.Sub("too_many");
  o.num_shards = kMaxShards + 1;
  Status s = Convert(o, &summary);
  EXPECT_NE(s.message().find("num_shards must be between 1 and 99999, got 100000"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(dir.Sub("too_many")));
}

TEST(ConverterTest, AManifestThatIsADirectoryOrAnUnknownKindIsNamed) {
  TempDir dir;
  fs::create_directories(dir.Sub("m.jsonl"));
  ConvertOptions o;
  o.source_kind = SourceKind::kJsonl;
  o.source = dir.Sub("m.jsonl");
  o.output = dir.Sub("out");
  ConvertSummary summary;
  Status s = Convert(o, &summary);
  EXPECT_NE(s.message().find("m.jsonl: not a regular file (a directory)"), std::string::npos) << s.message();
  ASSERT_EQ(::mkfifo(dir.Sub("fifo.jsonl").c_str(), 0600), 0);
  o.source = dir.Sub("fifo.jsonl");  // would wait for a writer forever if opened as a stream
  s = Convert(o, &summary);
  EXPECT_NE(s.message().find("fifo.jsonl: not a regular file (a FIFO)"), std::string::npos) << s.message();
  s = SetConvertOption("kind", "tarball", &o);
  EXPECT_NE(s.message().find("kind must be one of image_folder, video_folder, jsonl, lmdb; got 'tarball'"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::exists(dir.Sub("out")));
}

}  // namespace
}  // namespace lmdbloader
