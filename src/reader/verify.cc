// VerifyDatabase: the checks of `lmdbloader verify`, in the library so that
// every front finds the same problems.
#include "lmdbloader/verify.h"

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "lmdbloader/msgpack_record.h"
#include "lmdbloader/reader.h"
#include "corpus/page_check.h"
#include "reader/file_set.h"

namespace lmdbloader {

namespace {

// One database or shard set.
Status VerifyOne(const std::string& path, ReaderOptions options, VerifyReport* report) {
  *report = VerifyReport();
  auto problem = [&](std::string p) {
    if (report->problems.size() < VerifyReport::kMaxProblems) report->problems.push_back(std::move(p));
  };
  // Checking every record's checksum is what verify is for: in a corpus a
  // request to skip it is refused (below) rather than answered "OK"
  // unchecked, and "once" reads as every read (a record checked earlier in
  // this process would be trusted otherwise). A plain LMDB has none to skip.
  const bool skip_checksums = options.verify_checksums == ChecksumPolicy::kOff;
  options.verify_checksums = ChecksumPolicy::kEveryRead;
  // Every page, overflow headers included, before anything else reads the file.
  LMDBLOADER_RETURN_IF_ERROR(CheckPages(path, options.db_name, &report->problems));
  options.index_dir = "none";  // the walk is the check: never trust a saved index
  std::unique_ptr<Reader> r;
  Status s = Reader::Open(path, options, &r);
  if (!s.ok()) {
    problem(s.ToString());
    return Status::OK();
  }
  if (r->is_corpus() && skip_checksums)
    return Status::InvalidArgument("verify " + path +
                                   ": verify_checksums=false would skip the record checksums verify checks");
  report->opened = true;
  report->records = r->size();
  // Open checked the manifest (JSON, format, record count, column dtypes and
  // sizes); these are the values it does not read.
  if (r->is_corpus() && !(s = r->CheckMetadata()).ok()) problem(s.ToString());
  // Records are msgpack maps unless the corpus stores them as they were
  // (converted from an LMDB: schema encoding "as-is").
  bool msgpack_records = false;
  if (r->is_corpus()) {
    const nlohmann::json manifest = nlohmann::json::parse(r->manifest(), nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* schema =
        manifest.is_object() && manifest.contains("schema") ? &manifest["schema"] : nullptr;
    msgpack_records = !(schema && schema->is_object() && schema->contains("encoding") &&
                        (*schema)["encoding"] == "as-is");
  }
  std::string value;
  for (uint64_t i = 0; i < r->size(); ++i) {
    if (!(s = r->Read(i, &value)).ok()) {
      problem("record " + std::to_string(i) + ": " + s.ToString());
      continue;
    }
    if (!msgpack_records) continue;
    UnpackedRecord record;
    if (!(s = UnpackRecord(value, &record)).ok())
      problem("record " + std::to_string(i) + ": undecodable msgpack (" + s.message() + ")");
    else if (record.root().type() != RecordValue::Type::kMap)
      problem("record " + std::to_string(i) + ": not a msgpack map");
  }
  if (r->is_corpus()) {
    std::string name;
    if (r->size() && !(s = r->Name(r->size() - 1, &name)).ok()) problem("names: " + s.ToString());
    std::vector<ColumnChunk> chunks;
    if (r->Column("label", &chunks).ok()) {
      uint64_t bytes = 0;
      for (const ColumnChunk& c : chunks) bytes += c.size;
      if (bytes != r->size() * 8)
        problem("column label holds " + std::to_string(bytes) + " bytes for " + std::to_string(r->size()) +
                " records");
      std::string column;
      if (!(s = r->ReadColumn("label", &column)).ok()) problem(s.ToString());
    }
  }
  return Status::OK();
}

// Each database of a set of files verified alone, its problems named by
// its path, so that one bad file among thousands is found by name. A file
// that cannot be walked at all is a problem of the set, not the end of the
// check: the others are verified too.
Status VerifyMembers(const std::vector<std::string>& files, const ReaderOptions& options, VerifyReport* report) {
  *report = VerifyReport();
  report->opened = true;
  for (const std::string& file : files) {
    VerifyReport one;
    Status s = CheckFileSetMember(file);
    if (s.ok()) s = VerifyOne(file, options, &one);
    ++report->files;
    report->records += one.records;
    report->opened = report->opened && s.ok() && one.opened;
    if (!s.ok()) one.problems.push_back(s.ToString());
    for (const std::string& p : one.problems) {
      if (report->problems.size() == VerifyReport::kMaxProblems) return Status::OK();
      // Most messages name the file already; those that start with a record do not.
      report->problems.push_back(p.find(file) == std::string::npos ? file + ": " + p : p);
    }
  }
  return Status::OK();
}

}  // namespace

Status VerifyDatabase(const std::string& path, ReaderOptions options, VerifyReport* report) {
  bool is_set = false;
  std::vector<std::string> files;
  LMDBLOADER_RETURN_IF_ERROR(ListFileSet(path, &is_set, &files));
  if (is_set) return VerifyMembers(files, options, report);
  return VerifyOne(path, options, report);
}

Status VerifyDatabase(const std::vector<std::string>& paths, ReaderOptions options, VerifyReport* report) {
  if (paths.empty()) return Status::InvalidArgument("a list of databases to verify needs at least one path");
  return VerifyMembers(paths, options, report);
}

}  // namespace lmdbloader
