// Convert: folders and manifests become corpora; bad input names the file and
// the reason, and leaves nothing at the output.
#include "lmdbloader/convert.h"

#include <sys/stat.h>

#include <cstring>
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

// Options converting `source`, of `kind`, to `output`.
ConvertOptions Converting(SourceKind kind, const std::string& source, const std::string& output) {
  ConvertOptions o;
  o.source_kind = kind;
  o.source = source;
  o.output = output;
  return o;
}

TEST(ConverterTest, AnImageFolderBecomesACorpusInNameOrder) {
  TempDir dir;
  ImageFolder(dir.Sub("src"), 3);
  ConvertOptions o = Converting(SourceKind::kImageFolder, dir.Sub("src"), dir.Sub("out"));
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
  ConvertOptions o = Converting(SourceKind::kImageFolder, dir.Sub("src"), dir.Sub("set"));
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
  ConvertOptions o = Converting(SourceKind::kJsonl, dir.Sub("m.jsonl"), dir.Sub("out"));
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

// A Caffe Datum as convert_imageset writes an encoded image: data, label,
// encoded (protobuf's wire format; tests/corpus/caffe_datum_test.cc checks
// these bytes against protobuf's).
std::string EncodedDatum(const std::string& image, uint8_t label) {
  return std::string("\x22") + static_cast<char>(image.size()) + image + "\x28" + static_cast<char>(label) + "\x38\x01";
}

TEST(ConverterTest, ACaffeLmdbBecomesImagesWithALabelColumn) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("caffe"), {{"00000000_a.jpg", EncodedDatum("jpeg-a", 3)},
                                        {"00000001_b.jpg", EncodedDatum("jpeg-b", 5)},
                                        {"__keys__", "not a Datum"}});
  ConvertOptions o = Converting(SourceKind::kLmdb, dir.Sub("caffe"), dir.Sub("out"));
  o.record = RecordLayout::kCaffe;
  ConvertSummary summary;
  ASSERT_OK(Convert(o, &summary));
  EXPECT_EQ(summary.records, 2u);
  ASSERT_EQ(summary.skipped.size(), 1u);
  EXPECT_NE(summary.skipped[0].find("(key '__keys__'): a metadata record"), std::string::npos) << summary.skipped[0];
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("out"), ReaderOptions(), &r));
  std::string labels, record;
  ASSERT_OK(r->ReadColumn("label", &labels));
  ASSERT_EQ(labels.size(), 16u);
  int64_t second = 0;
  std::memcpy(&second, labels.data() + 8, 8);
  EXPECT_EQ(second, 5);
  ASSERT_OK(r->Read(1, &record));
  EXPECT_EQ(record, std::string("\x82\xa5image\xc4\x06jpeg-b\xa5label\x05"));
}

TEST(ConverterTest, ABadRecordIsNamedByKeyAndLeavesNothingAtTheOutput) {
  TempDir dir;
  testing::WriteLmdb(dir.Sub("caffe"), {{"00000000_a.jpg", EncodedDatum("jpeg-a", 3)},
                                        {"00000001_b.jpg", EncodedDatum("jpeg-b", 5).substr(0, 5)}});
  ConvertOptions o = Converting(SourceKind::kLmdb, dir.Sub("caffe"), dir.Sub("out"));
  o.record = RecordLayout::kCaffe;
  ConvertSummary summary;
  Status s = Convert(o, &summary);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find(dir.Sub("caffe") + " record 1 (key '00000001_b.jpg'): not a valid Caffe Datum: data: 6 "
                             "bytes, but the record has 3 left"),
            std::string::npos)
      << s.message();
  EXPECT_FALSE(fs::exists(dir.Sub("out")));
  o.skip_bad = true;
  ASSERT_OK(Convert(o, &summary));
  EXPECT_EQ(summary.records, 1u);
  ASSERT_EQ(summary.skipped.size(), 1u);
  EXPECT_NE(summary.skipped[0].find("(key '00000001_b.jpg'): not a valid Caffe Datum"), std::string::npos);
  // A layout is for LMDB sources.
  o.source_kind = SourceKind::kImageFolder;
  o.output = dir.Sub("out2");
  s = Convert(o, &summary);
  EXPECT_NE(s.message().find("record caffe applies to an lmdb source only"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace lmdbloader
