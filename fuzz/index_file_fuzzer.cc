// libFuzzer harness: a saved record index, parsed with its sums skipped, so
// the fuzzer explores the parser behind them (bounds, sections, entries, the
// table of leaf pages and the records it places).
#include <cstddef>
#include <cstdint>
#include <string>

#include <cstring>

#include "base/checksum.h"
#include "lmdb/index_file.h"
#include "lmdb/leaf_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  lmdbloader::RecordIndex index;
  if (lmdbloader::IndexFileCodec::Decode(bytes, "fuzz.idx", &index, /*check_sums=*/false).ok()) {
    // Use what was accepted the way a reader does.
    for (uint64_t i = 0; i < index.size() && i < 64; ++i) {
      uint64_t found_at = 0;
      bool found = false;
      std::string key;
      lmdbloader::ValueLocation at;
      if (index.Key(i, &key).ok()) (void)index.Find(key, &found, &found_at);
      (void)index.Locate(i, &at);
    }
    uint64_t position = 0;
    (void)index.LowerBound("key", &position);
    (void)index.MemoryBytes();
  }
  // The leaf table, as a paged reader reads it (its header's sum made valid).
  if (size >= lmdbloader::kIndexPage) {
    std::string page = bytes.substr(0, lmdbloader::kIndexPage);
    const uint64_t sum = lmdbloader::Checksum(page.data(), lmdbloader::kIndexPage - 8);
    std::memcpy(page.data() + lmdbloader::kIndexPage - 8, &sum, 8);
    lmdbloader::IndexHeader h;
    lmdbloader::LeafTable leaves;
    if (lmdbloader::DecodeIndexHeader(page, "fuzz.idx", size, &h).ok() &&
        lmdbloader::LeafTable::Decode(std::string_view(bytes).substr(h.leaf_offset, h.leaf_bytes), h.records,
                                      lmdbloader::LeafPageFormat{h.identity.page_size, h.identity.page_header},
                                      "fuzz.idx", &leaves)
            .ok()) {
      lmdbloader::LeafSpot spot;
      for (uint64_t i = 0; i < h.records && i < 64; ++i) (void)leaves.Find(i * (h.records / 64 + 1), &spot);
    }
  }
  return 0;
}
