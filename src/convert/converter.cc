#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <regex>
#include <set>

#include <msgpack.hpp>
#include <nlohmann/json.hpp>

#include "convert/record_layout.h"
#include "convert/source_listing.h"
#include "corpus/corpus_format.h"
#include "io/open_file.h"
#include "lmdbloader/convert.h"
#include "lmdbloader/reader.h"
#include "lmdbloader/shard_set.h"
#include "lmdbloader/writer.h"

namespace lmdbloader {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

Status ReadFile(const std::string& path, std::string* out) {
  // A regular file only: a FIFO named in a manifest would wait for a writer.
  int fd = -1;
  struct stat st;
  LMDBLOADER_RETURN_IF_ERROR(OpenReadOnly(path, &fd, &st));
  if (static_cast<uint64_t>(st.st_size) > kMaxRecordBytes) {
    ::close(fd);
    return Status::InvalidArgument(path + ": " + std::to_string(st.st_size) + " bytes; a record holds at most " +
                                   std::to_string(kMaxRecordBytes) + " bytes (LMDB's largest value)");
  }
  out->resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out->size()) {
    ssize_t n = ::read(fd, out->data() + done, out->size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      ::close(fd);
      return Status::FromErrno(err, "read", path);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Status::OK();
}

void PackScalar(msgpack::packer<msgpack::sbuffer>& pk, const json& v) {
  if (v.is_boolean()) v.get<bool>() ? pk.pack_true() : pk.pack_false();
  else if (v.is_number_unsigned()) pk.pack(v.get<uint64_t>());
  else if (v.is_number_integer()) pk.pack(v.get<int64_t>());
  else if (v.is_number_float()) pk.pack(v.get<double>());
  else pk.pack(v.get<std::string>());
}

// Builds the msgpack record of a file-backed item.
Status PackItem(const Item& it, std::vector<std::string>& contents, msgpack::sbuffer* buf) {
  buf->clear();
  uint64_t content_bytes = 0;
  for (const std::string& c : contents) content_bytes += c.size();
  if (content_bytes > kMaxRecordBytes)  // each file was checked alone; a video's frames together may not fit
    return Status::InvalidArgument(it.origin + ": its files hold " + std::to_string(content_bytes) +
                                   " bytes; a record holds at most " + std::to_string(kMaxRecordBytes) +
                                   " bytes (LMDB's largest value)");
  msgpack::packer<msgpack::sbuffer> pk(*buf);
  pk.pack_map(2 + (it.has_label ? 1 : 0) + static_cast<uint32_t>(it.extra.size()));
  pk.pack(std::string(it.frames ? "frames" : "image"));
  if (it.frames) pk.pack_array(static_cast<uint32_t>(contents.size()));
  for (const std::string& c : contents) {
    pk.pack_bin(static_cast<uint32_t>(c.size()));
    pk.pack_bin_body(c.data(), static_cast<uint32_t>(c.size()));
  }
  if (it.has_label) {
    pk.pack(std::string("label"));
    pk.pack(it.label);
  }
  pk.pack(std::string("name"));
  pk.pack(it.name);
  for (auto& [k, v] : it.extra.items()) {
    pk.pack(k);
    PackScalar(pk, v);
  }
  return Status::OK();
}

class Progress {
 public:
  Progress(bool on, uint64_t total) : on_(on), total_(total), start_(Clock::now()), last_(start_) {}
  void Update(uint64_t records, uint64_t bytes) {
    if (!on_) return;
    auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(500) && records != total_) return;
    last_ = now;
    double s = std::chrono::duration<double>(now - start_).count();
    double rate = s > 0 ? records / s : 0;
    double eta = rate > 0 ? (total_ - records) / rate : 0;
    std::fprintf(stderr, "\rconvert: %llu/%llu records, %.1f MB, %.1f MB/s, %.0f s left   ",
                 (unsigned long long)records, (unsigned long long)total_, bytes / 1e6, s > 0 ? bytes / 1e6 / s : 0.0,
                 eta);
    if (records == total_) std::fputc('\n', stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  bool on_;
  uint64_t total_;
  Clock::time_point start_, last_;
};

// A record the writer refused (its columns differ from the first record's, a
// name seen before, too large): with skip_bad, skipped and listed, as records
// the converter itself finds bad are. The writer is unchanged by a refusal;
// any other failure (the output's file system, LMDB) ends the conversion.
bool Refused(const Status& added, const ConvertOptions& o) {
  return o.skip_bad && added.code() == Status::Code::kInvalidArgument;
}

Status WriteOne(const ConvertOptions& o, const Listing& listing, size_t begin, size_t end, Reader* lmdb_source,
                const std::string& target, ConvertSummary* summary) {
  WriterOptions wo;
  wo.overwrite = o.overwrite;
  wo.keys = listing.keys;
  std::unique_ptr<CorpusWriter> writer;
  LMDBLOADER_RETURN_IF_ERROR(CorpusWriter::Create(target, wo, &writer));
  Progress progress(o.progress, end - begin);
  msgpack::sbuffer buf;
  std::string value;
  std::vector<std::string> contents;
  std::set<std::string> fields;  // a record layout's fields, for the schema
  std::set<std::string> record_fields;  // one record's, until the writer takes it
  for (size_t i = begin; i < end; ++i) {
    const Item& it = listing.items[i];
    std::map<std::string, double> columns;
    if (lmdb_source) {
      LMDBLOADER_RETURN_IF_ERROR(lmdb_source->Read(it.position, &value));
      for (const auto& [column, values] : listing.columns) columns[column] = values[it.position];
      std::string_view record = value;
      record_fields.clear();
      if (o.record != RecordLayout::kAsIs) {
        SplitValue split;
        Status s = SplitRecord(o.record, value, &buf, &split, &record_fields);
        if (!s.ok()) {
          const std::string why = it.origin + ": " + s.message();
          if (!o.skip_bad) return Status::InvalidArgument(why);
          summary->skipped.push_back(why);
          continue;
        }
        if (split.has_label) columns["label"] = static_cast<double>(split.label);
        record = std::string_view(buf.data(), buf.size());
      }
      Status added = writer->Add(it.name, record, columns);
      if (Refused(added, o)) {
        summary->skipped.push_back(it.origin + ": " + added.message());
        continue;
      }
      if (!added.ok()) return Status::InvalidArgument(it.origin + ": " + added.message());
      // Only what a record that went in holds enters the schema.
      fields.insert(record_fields.begin(), record_fields.end());
    } else {
      contents.resize(it.files.size());
      Status s;
      for (size_t k = 0; k < it.files.size() && s.ok(); ++k) s = ReadFile(it.files[k], &contents[k]);
      if (s.ok()) s = PackItem(it, contents, &buf);
      if (!s.ok()) {
        if (!o.skip_bad) return s;
        summary->skipped.push_back(s.message());
        continue;
      }
      if (it.has_label) columns["label"] = static_cast<double>(it.label);
      for (auto& [k, v] : it.extra.items())
        if (v.is_number()) columns[k] = v.get<double>();
      Status added = writer->Add(it.name, std::string_view(buf.data(), buf.size()), columns);
      if (Refused(added, o)) {
        summary->skipped.push_back(it.origin + ": " + added.message());
        continue;
      }
      if (!added.ok()) return Status::InvalidArgument(it.origin + ": " + added.message());
    }
    progress.Update(i + 1 - begin, writer->bytes());
  }
  json manifest = {{"source", {{"kind", SourceKindName(o.source_kind)}, {"path", o.source}}},
                   {"schema", lmdb_source ? (listing.schema.is_null() ? json{{"encoding", "as-is"}} : listing.schema)
                                          : json{{"encoding", "msgpack"},
                                                 {"fields", o.source_kind == SourceKind::kVideoFolder
                                                                ? json::array({"frames", "label", "name"})
                                                                : json::array({"image", "label", "name"})}}}};
  if (o.record != RecordLayout::kAsIs) {
    manifest["source"]["record"] = RecordLayoutName(o.record);
    manifest["schema"] = {{"encoding", "msgpack"}, {"fields", fields}};
    if (fields.count("pixels")) manifest["schema"]["pixels"] = "uint8, channels x height x width, BGR (Caffe's)";
  }
  if (!listing.label_names.empty()) manifest["label_names"] = listing.label_names;
  if (o.num_shards > 1) manifest["shard"] = {{"index", begin == 0 ? 0 : -1}, {"count", o.num_shards}};
  LMDBLOADER_RETURN_IF_ERROR(writer->Finish(manifest.dump(-1, ' ', false, json::error_handler_t::replace)));
  summary->records += writer->size();
  summary->bytes += writer->bytes();
  summary->outputs.push_back(target);
  return Status::OK();
}

}  // namespace

Status Convert(const ConvertOptions& o, ConvertSummary* summary) {
  auto start = std::chrono::steady_clock::now();
  if (o.output.empty()) return Status::InvalidArgument("no output path given");
  // What ConvertOptionList checks for options given by name, checked again
  // for fields a C++ caller set directly.
  if (std::string(RecordOrderName(o.order)) == "unknown") return Status::InvalidArgument("invalid record order");
  if (o.frame_step < 1) return Status::InvalidArgument("frame_step must be at least 1");
  if (o.num_shards < 1 || o.num_shards > kMaxShards)
    return Status::InvalidArgument("num_shards must be between 1 and " + std::to_string(kMaxShards) + ", got " +
                                   std::to_string(o.num_shards));
  if (o.shard_index < -1)
    return Status::InvalidArgument("shard_index must be 0 or more (-1: every shard), got " +
                                   std::to_string(o.shard_index));
  if (o.shard_index >= static_cast<int32_t>(o.num_shards))
    return Status::InvalidArgument("shard_index " + std::to_string(o.shard_index) + " is not below num_shards " +
                                   std::to_string(o.num_shards));
  if (o.record != RecordLayout::kAsIs && o.source_kind != SourceKind::kLmdb)
    return Status::InvalidArgument(std::string("record ") + RecordLayoutName(o.record) + " applies to an lmdb "
                                   "source only; a " + SourceKindName(o.source_kind) + " source is split by the "
                                   "converter itself");
  Listing listing;
  std::unique_ptr<Reader> lmdb_source;
  if (o.source_kind == SourceKind::kImageFolder || o.source_kind == SourceKind::kVideoFolder) {
    LMDBLOADER_RETURN_IF_ERROR(ListFolders(o, o.source_kind == SourceKind::kVideoFolder, &listing));
  } else if (o.source_kind == SourceKind::kJsonl) {
    LMDBLOADER_RETURN_IF_ERROR(ListJsonl(o, &listing));
  } else if (o.source_kind == SourceKind::kLmdb) {
    if (std::string(RecordLayoutName(o.record)) == "unknown") return Status::InvalidArgument("invalid record layout");
    ReaderOptions ro;
    ro.db_name = o.db_name;
    ro.index_dir = "none";  // never write into the source
    LMDBLOADER_RETURN_IF_ERROR(Reader::Open(o.source, ro, &lmdb_source));
    LMDBLOADER_RETURN_IF_ERROR(ListLmdb(o, *lmdb_source, &listing));
  } else {
    return Status::InvalidArgument("invalid source kind");
  }
  summary->skipped = listing.skipped;
  if (o.order == RecordOrder::kSorted) {
    std::stable_sort(listing.items.begin(), listing.items.end(),
                     [](const Item& a, const Item& b) { return a.name < b.name; });
  } else if (o.order == RecordOrder::kShuffle) {
    std::mt19937_64 rng(o.seed);
    std::shuffle(listing.items.begin(), listing.items.end(), rng);
  }
  const size_t n = listing.items.size();
  if (o.num_shards == 1) {
    LMDBLOADER_RETURN_IF_ERROR(WriteOne(o, listing, 0, n, lmdb_source.get(), o.output, summary));
  } else {
    std::error_code ec;
    fs::create_directories(o.output, ec);
    if (ec) return Status::IOError("mkdir " + o.output + ": " + ec.message());
    for (uint32_t s = 0; s < o.num_shards; ++s) {
      if (o.shard_index >= 0 && static_cast<uint32_t>(o.shard_index) != s) continue;
      size_t begin = n * s / o.num_shards, end = n * (s + 1) / o.num_shards;
      LMDBLOADER_RETURN_IF_ERROR(WriteOne(o, listing, begin, end, lmdb_source.get(),
                                          o.output + "/" + ShardName(s, o.num_shards), summary));
    }
    if (o.shard_index < 0) {
      uint64_t records = 0;
      LMDBLOADER_RETURN_IF_ERROR(WriteShardList(o.output, &records));
    }
  }
  summary->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::OK();
}

}  // namespace lmdbloader
