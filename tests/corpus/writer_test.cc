// CorpusWriter: a corpus appears whole under its name or not at all.
#include "lmdbloader/writer.h"

#include <unistd.h>

#include <filesystem>

#include "lmdbloader/reader.h"
#include "test_util.h"

namespace lmdbloader {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

Status Write(const std::string& path, int records, const WriterOptions& options = WriterOptions()) {
  std::unique_ptr<CorpusWriter> w;
  LMDBLOADER_RETURN_IF_ERROR(CorpusWriter::Create(path, options, &w));
  for (int i = 0; i < records; ++i)
    LMDBLOADER_RETURN_IF_ERROR(w->Add("r" + std::to_string(i), testing::RecordBytes(i, 3000), {{"label", i % 4}}));
  return w->Finish("{}");
}

TEST(WriterTest, AFinishedCorpusReadsBackWithItsIndexSavedBeside) {
  TempDir dir;
  ASSERT_OK(Write(dir.Sub("c"), 50));
  EXPECT_TRUE(fs::exists(dir.Sub("c/lmdbloader.idx")));
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("c"), ReaderOptions(), &r));
  EXPECT_EQ(r->stats().index_source, "loaded from " + dir.Sub("c/lmdbloader.idx"));
  ASSERT_EQ(r->size(), 50u);
  std::string value, name;
  ASSERT_OK(r->Read(17, &value));
  EXPECT_EQ(value, testing::RecordBytes(17, 3000));
  ASSERT_OK(r->Name(17, &name));
  EXPECT_EQ(name, "r17");
}

TEST(WriterTest, AnAbandonedWriterLeavesNothing) {
  TempDir dir;
  {
    std::unique_ptr<CorpusWriter> w;
    ASSERT_OK(CorpusWriter::Create(dir.Sub("c"), WriterOptions(), &w));
    ASSERT_OK(w->Add("a", "x", {}));
  }
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a temporary corpus was left behind";
}

TEST(WriterTest, DuplicateNamesAndAnExistingTargetAreRefused) {
  TempDir dir;
  std::unique_ptr<CorpusWriter> w;
  ASSERT_OK(CorpusWriter::Create(dir.Sub("c"), WriterOptions(), &w));
  ASSERT_OK(w->Add("same", "1", {}));
  Status s = w->Add("same", "2", {});
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("duplicate name 'same'"), std::string::npos) << s.message();
  w.reset();
  ASSERT_OK(Write(dir.Sub("c"), 3));
  EXPECT_EQ(Write(dir.Sub("c"), 3).code(), Status::Code::kInvalidArgument) << "an existing corpus without overwrite";
  WriterOptions replace;
  replace.overwrite = true;
  ASSERT_OK(Write(dir.Sub("c"), 5, replace));
  std::unique_ptr<Reader> r;
  ASSERT_OK(Reader::Open(dir.Sub("c"), ReaderOptions(), &r));
  EXPECT_EQ(r->size(), 5u);
}

}  // namespace
}  // namespace lmdbloader
