#include "lmdb/index_file.h"

#include <cstdlib>
#include <cstring>

#include "base/checksum.h"
#include "io/open_file.h"
#include "lmdb/index_writer.h"
#include "lmdb/paged_index.h"

namespace lmdbloader {

namespace {

std::string HexOf(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

}  // namespace

std::string IndexFileBeside(const DataLocation& location, const std::string& db_name) {
  const std::string suffix = db_name.empty() ? "" : "." + HexOf(db_name);
  return location.subdir ? location.path + "/lmdbloader" + suffix + ".idx"
                         : location.data_path + ".lmdbloader" + suffix + ".idx";
}

std::string IndexCacheDir(const ReaderOptions& options) {
  if (options.index_dir == "none") return "";
  if (!options.index_dir.empty()) return options.index_dir;
  if (const char* env = std::getenv("LMDBLOADER_INDEX_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/lmdbloader";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/lmdbloader";
  return "";
}

IndexPaths IndexFilePaths(const DataLocation& location, const ReaderOptions& options,
                          const FileIdentity& identity) {
  IndexPaths paths;
  if (options.index_dir == "none") return paths;
  if (options.index_dir.empty()) paths.load.push_back(IndexFileBeside(location, options.db_name));
  const std::string dir = IndexCacheDir(options);
  if (dir.empty()) return paths;
  const std::string suffix = options.db_name.empty() ? "" : "." + HexOf(options.db_name);
  paths.save = dir + "/" + std::to_string(identity.device) + "-" + std::to_string(identity.inode) + suffix + ".idx";
  paths.load.push_back(paths.save);
  return paths;
}

Status IndexFileCodec::Decode(const std::string& bytes, const std::string& path, RecordIndex* index,
                              bool check_sums) {
  auto damaged = [&](const std::string& what) { return Status::Corruption("index file " + path + ": " + what); };
  if (bytes.size() < kIndexPage) return damaged("truncated");
  std::string header_page = bytes.substr(0, kIndexPage);
  if (!check_sums) {
    // The fuzz harness: a header with a valid sum, so that what follows is parsed.
    const uint64_t sum = Checksum(header_page.data(), kIndexPage - 8);
    std::memcpy(header_page.data() + kIndexPage - 8, &sum, 8);
  }
  IndexHeader h;
  Status header = DecodeIndexHeader(header_page, path, bytes.size(), &h);
  if (header.IsNotFound()) return damaged("unknown version");
  LMDBLOADER_RETURN_IF_ERROR(header);
  if (!check_sums) h.meta_sum = Checksum(bytes.data() + h.meta_offset, h.meta_bytes);
  index->identity = h.identity;
  index->db_name = h.db_name;
  index->set_keys_sorted(h.keys_sorted());
  index->set_db_flags(h.db_flags());
  index->sequential_keys_ = h.sequential_keys();
  LMDBLOADER_RETURN_IF_ERROR(
      DecodeIndexMeta(std::string_view(bytes).substr(h.meta_offset, h.meta_bytes), h, path, &index->meta_));
  const uint64_t n = h.records;
  index->offsets_.resize(n);
  index->sizes_.resize(n);
  if (!h.sequential_keys()) {
    // The keys' pages, checked, then joined.
    const uint64_t pages = (h.blob_bytes + kBlobPayload - 1) / kBlobPayload;
    index->key_blob_.reserve(pages * kBlobPayload);
    for (uint64_t p = 0; p < pages; ++p) {
      const char* page = bytes.data() + h.blob_offset + p * kIndexPage;
      uint64_t sum = 0;
      std::memcpy(&sum, page + kBlobPayload, 8);
      if (check_sums && BlobPageSum(page, p) != sum) return damaged("key page " + std::to_string(p) + " is damaged");
      index->key_blob_.append(page, kBlobPayload);
    }
    index->key_blob_.resize(h.blob_bytes);
    index->key_ends_.resize(n);
  }
  for (uint64_t i = 0; i < n; ++i) {
    const char* bytes_of_entry = bytes.data() + h.EntryOffset(i);
    IndexEntry e;
    if (check_sums) {
      LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(bytes_of_entry, i, h, path, &e));
    } else {
      char copy[kWideEntry];
      std::memcpy(copy, bytes_of_entry, h.entry_size);
      IndexEntry raw;
      std::memcpy(&raw.offset, copy, 8);
      uint64_t key_ref = 0;
      if (h.entry_size == kWideEntry) std::memcpy(&key_ref, copy + 8, 8);
      std::memcpy(&raw.size, copy + h.entry_size - 8, 4);
      raw.key_begin = key_ref & ((uint64_t{1} << kKeyLengthShift) - 1);
      raw.key_size = static_cast<uint32_t>(key_ref >> kKeyLengthShift);
      EncodeIndexEntry(raw, i, h.entry_size, copy);
      LMDBLOADER_RETURN_IF_ERROR(DecodeIndexEntry(copy, i, h, path, &e));
    }
    index->offsets_[i] = e.offset;
    index->sizes_[i] = e.size;
    if (!h.sequential_keys()) {
      // The writer puts the keys back to back, in order.
      if (e.key_begin != (i == 0 ? 0 : index->key_ends_[i - 1])) return damaged("keys out of order");
      index->key_ends_[i] = e.key_begin + e.key_size;
    }
  }
  if (!h.sequential_keys() && (n == 0 ? 0 : index->key_ends_[n - 1]) != h.blob_bytes)
    return damaged("bytes of keys left over");
  return Status::OK();
}

Status SaveIndex(const std::string& path, const RecordIndex& index) {
  std::unique_ptr<IndexWriter> writer;
  LMDBLOADER_RETURN_IF_ERROR(IndexWriter::Create(path, &writer));
  std::string key;
  for (uint64_t i = 0; i < index.size(); ++i) {
    ValueLocation loc;
    LMDBLOADER_RETURN_IF_ERROR(index.Locate(i, &loc));
    LMDBLOADER_RETURN_IF_ERROR(index.Key(i, &key));
    LMDBLOADER_RETURN_IF_ERROR(writer->Add(key, loc.offset, static_cast<uint32_t>(loc.size)));
  }
  for (const auto& [k, loc] : index.meta())
    LMDBLOADER_RETURN_IF_ERROR(writer->AddMeta(k, loc.offset, static_cast<uint32_t>(loc.size)));
  return writer->Finish(index.identity, index.db_name, index.db_flags(), index.keys_sorted());
}

Status LoadIndex(const std::string& path, const FileIdentity& expected, const std::string& db_name,
                 RecordIndex* index) {
  std::unique_ptr<PagedIndex> file;
  LMDBLOADER_RETURN_IF_ERROR(PagedIndex::Open(path, expected, db_name, kIndexPage, &file));
  return file->LoadResident(index);
}

}  // namespace lmdbloader
