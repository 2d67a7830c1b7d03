// The saved record index's layout (version 6), laid out so that a process can
// read the few entries a batch needs with pread instead of holding the index:
// a 10^8-record database's index is a file of 1.6-2.4 GB that no process's
// RSS counts, where a resident one cost 29 bytes a record in every process.
//
// The file is a sequence of 4 KiB pages:
//   page 0           the header (IndexHeader), its XXH3-64 in its last 8 bytes
//   entries          one entry per record, in key order, never across a page:
//                      narrow (16 B, keys are record numbers 0..n-1):
//                        u64 value offset, u32 value size, u32 check
//                      wide (24 B, keys stored):
//                        u64 value offset, u64 key begin | key length << 48,
//                        u32 value size, u32 check
//                    `check` is 32 bits of XXH3-64 over the entry's other
//                    bytes and the record number: a flipped bit, or an entry
//                    read from the wrong place, is caught entry by entry.
//   key blob         the keys back to back, in pages of 4,088 bytes of keys
//                    and the XXH3-64 of those bytes and the page number
//   metadata         a corpus's metadata entries (small), checked by a sum in
//                    the header
//   leaf table       the database's leaf pages (leaf_table.h: 8 bytes a leaf),
//                    checked by a sum in the header; empty when no leaf holds
//                    inline records alone
// Everything is little-endian. Written by IndexWriter (index_writer.h), read
// whole by LoadIndex (index_file.h) or piecewise by PagedIndex (paged_index.h).
#ifndef LMDBLOADER_SRC_LMDB_INDEX_FORMAT_H_
#define LMDBLOADER_SRC_LMDB_INDEX_FORMAT_H_

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <string_view>

#include "lmdb/record_index.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

inline constexpr uint64_t kIndexPage = 4096;
// 5: the data file's ctime and LMDB page header size joined its identity;
// 6: the table of leaf pages (older files are rebuilt).
inline constexpr uint32_t kIndexVersion = 6;
inline constexpr uint32_t kNarrowEntry = 16;
inline constexpr uint32_t kWideEntry = 24;
inline constexpr uint64_t kBlobPayload = kIndexPage - 8;  // key bytes in a key blob page
// LMDB keys are at most 511 bytes by default and never more than half a page
// of 64 KiB: 16 bits hold any key length, 48 any blob position.
inline constexpr uint64_t kKeyLengthShift = 48;

struct IndexHeader {
  uint32_t flags = 0;  // 1: keys are record numbers; 2: keys sort bytewise; LMDB's db flags << 16
  FileIdentity identity;
  std::string db_name;
  uint64_t records = 0;
  uint32_t entry_size = 0;  // kNarrowEntry or kWideEntry
  uint64_t entries_offset = 0;
  uint64_t blob_offset = 0;
  uint64_t blob_bytes = 0;  // key bytes (without the pages' sums)
  uint64_t meta_offset = 0;
  uint64_t meta_bytes = 0;
  uint64_t meta_sum = 0;
  uint64_t leaf_offset = 0;  // after the metadata
  uint64_t leaf_bytes = 0;   // kLeafEntryBytes a leaf
  uint64_t leaf_sum = 0;
  uint64_t file_size = 0;

  bool sequential_keys() const { return flags & 1; }
  bool keys_sorted() const { return flags & 2; }
  uint16_t db_flags() const { return static_cast<uint16_t>(flags >> 16); }
  uint64_t entries_per_page() const { return kIndexPage / entry_size; }
  // File offset of record i's entry.
  uint64_t EntryOffset(uint64_t i) const {
    return entries_offset + (i / entries_per_page()) * kIndexPage + (i % entries_per_page()) * entry_size;
  }
};

// Bytes of the pages holding `records` entries of `entry_size`.
inline uint64_t EntryPagesBytes(uint64_t records, uint32_t entry_size) {
  const uint64_t per_page = kIndexPage / entry_size;
  return (records + per_page - 1) / per_page * kIndexPage;
}

// The header page (kIndexPage bytes, its sum included).
std::string EncodeIndexHeader(const IndexHeader& header);
// Checks the header page `page` (kIndexPage bytes) of the file at `path`:
// magic, version, sum, and that its sections lie inside a file of
// `file_size` bytes and describe values inside the data file. Corruption
// naming `path` otherwise.
Status DecodeIndexHeader(std::string_view page, const std::string& path, uint64_t file_size, IndexHeader* header);

// One record's entry, packed and unpacked. `key_begin`/`key_size` are 0 in
// a narrow entry.
struct IndexEntry {
  uint64_t offset = 0;
  uint32_t size = 0;
  uint64_t key_begin = 0;
  uint32_t key_size = 0;
};
void EncodeIndexEntry(const IndexEntry& entry, uint64_t record, uint32_t entry_size, char* out);
// Corruption naming `path` and the record when the entry's check fails or
// it points past the data file or the key blob.
Status DecodeIndexEntry(const char* bytes, uint64_t record, const IndexHeader& header, const std::string& path,
                        IndexEntry* entry);

// Key blob page `page` (0-based within the blob): its sum over the payload and
// the page number.
uint64_t BlobPageSum(const char* payload, uint64_t page);

// The metadata section: the entries by key.
std::string EncodeIndexMeta(const std::map<std::string, ValueLocation>& meta);
Status DecodeIndexMeta(std::string_view bytes, const IndexHeader& header, const std::string& path,
                       std::map<std::string, ValueLocation>* meta);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_LMDB_INDEX_FORMAT_H_
