#include "lmdb/index_format.h"

#include "base/checksum.h"
#include "base/field_reader.h"

namespace lmdbloader {

namespace {

constexpr char kMagic[8] = {'L', 'M', 'D', 'B', 'L', 'I', 'D', 'X'};
// An LMDB database name is a key: at most 511 bytes by default. The header
// page holds one of up to this many.
constexpr uint32_t kMaxDbName = 2048;

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

uint32_t EntryCheck(const char* bytes, uint32_t length, uint64_t record) {
  char buf[32];
  std::memcpy(buf, bytes, length);
  std::memcpy(buf + length, &record, 8);
  return static_cast<uint32_t>(Checksum(buf, length + 8));
}

}  // namespace

std::string EncodeIndexHeader(const IndexHeader& h) {
  std::string out(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kIndexVersion);
  Put<uint32_t>(&out, h.flags);
  const FileIdentity& id = h.identity;
  Put(&out, id.device);
  Put(&out, id.inode);
  Put(&out, id.size);
  Put(&out, id.mtime_ns);
  Put(&out, id.txnid);
  Put(&out, id.page_size);
  Put(&out, id.meta_sum);
  Put<uint32_t>(&out, static_cast<uint32_t>(h.db_name.size()));
  out += h.db_name;
  Put(&out, h.records);
  Put(&out, h.entry_size);
  Put(&out, h.entries_offset);
  Put(&out, h.blob_offset);
  Put(&out, h.blob_bytes);
  Put(&out, h.meta_offset);
  Put(&out, h.meta_bytes);
  Put(&out, h.meta_sum);
  Put(&out, h.file_size);
  Put(&out, id.ctime_ns);
  Put(&out, id.page_header);
  Put(&out, h.leaf_offset);
  Put(&out, h.leaf_bytes);
  Put(&out, h.leaf_sum);
  out.resize(kIndexPage - 8, '\0');
  Put<uint64_t>(&out, Checksum(out));
  return out;
}

Status DecodeIndexHeader(std::string_view page, const std::string& path, uint64_t file_size, IndexHeader* h) {
  auto damaged = [&](const char* what) { return Status::Corruption("index file " + path + ": " + what); };
  if (page.size() < kIndexPage) return damaged("truncated");
  if (std::memcmp(page.data(), kMagic, sizeof(kMagic)) != 0) return damaged("bad magic");
  uint32_t version = 0;
  std::memcpy(&version, page.data() + sizeof(kMagic), 4);
  // Older versions held the whole index in one checksummed blob; they are
  // rebuilt (the caller treats this as not found).
  if (version != kIndexVersion) return Status::NotFound("index file " + path + ": version " + std::to_string(version));
  uint64_t stored = 0;
  std::memcpy(&stored, page.data() + kIndexPage - 8, 8);
  if (Checksum(page.data(), kIndexPage - 8) != stored) return damaged("header checksum mismatch");
  FieldReader f(page.substr(sizeof(kMagic) + 4, kIndexPage - 8 - sizeof(kMagic) - 4));
  FileIdentity& id = h->identity;
  uint32_t name_size = 0;
  if (!f.Get(&h->flags) || !f.Get(&id.device) || !f.Get(&id.inode) || !f.Get(&id.size) || !f.Get(&id.mtime_ns) ||
      !f.Get(&id.txnid) || !f.Get(&id.page_size) || !f.Get(&id.meta_sum) || !f.Get(&name_size) ||
      name_size > kMaxDbName || !f.GetBytes(&h->db_name, name_size) || !f.Get(&h->records) ||
      !f.Get(&h->entry_size) || !f.Get(&h->entries_offset) || !f.Get(&h->blob_offset) || !f.Get(&h->blob_bytes) ||
      !f.Get(&h->meta_offset) || !f.Get(&h->meta_bytes) || !f.Get(&h->meta_sum) || !f.Get(&h->file_size) ||
      !f.Get(&id.ctime_ns) || !f.Get(&id.page_header) || !f.Get(&h->leaf_offset) || !f.Get(&h->leaf_bytes) ||
      !f.Get(&h->leaf_sum))
    return damaged("truncated header");
  if (h->entry_size != (h->sequential_keys() ? kNarrowEntry : kWideEntry)) return damaged("bad entry size");
  if (h->file_size != file_size) return damaged("its size differs from the size its header gives");
  // Each section in order, inside the file; written so that no sum wraps.
  const uint64_t entries_bytes = h->records > file_size ? file_size + 1 : EntryPagesBytes(h->records, h->entry_size);
  const uint64_t blob_pages = (h->blob_bytes + kBlobPayload - 1) / kBlobPayload;
  if (h->entries_offset != kIndexPage || entries_bytes > file_size - kIndexPage ||
      h->blob_offset != h->entries_offset + entries_bytes || blob_pages > (file_size - h->blob_offset) / kIndexPage ||
      h->meta_offset != h->blob_offset + blob_pages * kIndexPage || h->meta_offset > file_size ||
      h->meta_bytes > file_size - h->meta_offset || h->leaf_offset != h->meta_offset + h->meta_bytes ||
      h->leaf_bytes != file_size - h->leaf_offset)
    return damaged("its sections do not fit the file");
  if (h->sequential_keys() && h->blob_bytes != 0) return damaged("keys stored for record-number keys");
  return Status::OK();
}

void EncodeIndexEntry(const IndexEntry& e, uint64_t record, uint32_t entry_size, char* out) {
  std::memcpy(out, &e.offset, 8);
  uint32_t at = 8;
  if (entry_size == kWideEntry) {
    const uint64_t key_ref = e.key_begin | (uint64_t{e.key_size} << kKeyLengthShift);
    std::memcpy(out + at, &key_ref, 8);
    at += 8;
  }
  std::memcpy(out + at, &e.size, 4);
  at += 4;
  const uint32_t check = EntryCheck(out, at, record);
  std::memcpy(out + at, &check, 4);
}

Status DecodeIndexEntry(const char* bytes, uint64_t record, const IndexHeader& h, const std::string& path,
                        IndexEntry* e) {
  const uint32_t at = h.entry_size - 4;
  uint32_t check = 0;
  std::memcpy(&check, bytes + at, 4);
  auto damaged = [&](const char* what) {
    return Status::Corruption("index file " + path + ": the entry of record " + std::to_string(record) + " " + what);
  };
  if (EntryCheck(bytes, at, record) != check) return damaged("is damaged (its check does not match)");
  std::memcpy(&e->offset, bytes, 8);
  std::memcpy(&e->size, bytes + at - 4, 4);
  e->key_begin = 0;
  e->key_size = 0;
  if (h.entry_size == kWideEntry) {
    uint64_t key_ref = 0;
    std::memcpy(&key_ref, bytes + 8, 8);
    e->key_begin = key_ref & ((uint64_t{1} << kKeyLengthShift) - 1);
    e->key_size = static_cast<uint32_t>(key_ref >> kKeyLengthShift);
    if (e->key_begin > h.blob_bytes || e->key_size > h.blob_bytes - e->key_begin) return damaged("points past the keys");
  }
  const uint64_t data_size = h.identity.size;
  if (e->offset > data_size || e->size > data_size - e->offset) return damaged("points past the data file");
  return Status::OK();
}

uint64_t BlobPageSum(const char* payload, uint64_t page) {
  char buf[kBlobPayload + 8];
  std::memcpy(buf, payload, kBlobPayload);
  std::memcpy(buf + kBlobPayload, &page, 8);
  return Checksum(buf, sizeof(buf));
}

std::string EncodeIndexMeta(const std::map<std::string, ValueLocation>& meta) {
  std::string out;
  Put<uint64_t>(&out, meta.size());
  for (const auto& [key, loc] : meta) {
    Put<uint32_t>(&out, static_cast<uint32_t>(key.size()));
    out += key;
    Put(&out, loc.offset);
    Put(&out, loc.size);
  }
  return out;
}

Status DecodeIndexMeta(std::string_view bytes, const IndexHeader& h, const std::string& path,
                       std::map<std::string, ValueLocation>* meta) {
  auto damaged = [&](const char* what) { return Status::Corruption("index file " + path + ": metadata " + what); };
  if (Checksum(bytes.data(), bytes.size()) != h.meta_sum) return damaged("checksum mismatch");
  FieldReader f(bytes);
  uint64_t count = 0;
  if (!f.Get(&count)) return damaged("truncated");
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t key_size = 0;
    std::string key;
    ValueLocation loc;
    if (!f.Get(&key_size) || !f.GetBytes(&key, key_size) || !f.Get(&loc.offset) || !f.Get(&loc.size))
      return damaged("truncated");
    if (loc.offset > h.identity.size || loc.size > h.identity.size - loc.offset) return damaged("past the data file");
    (*meta)[key] = loc;
  }
  if (!f.done()) return damaged("trailing bytes");
  return Status::OK();
}

}  // namespace lmdbloader
