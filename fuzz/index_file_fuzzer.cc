// libFuzzer harness: a saved record index, parsed with its sums skipped, so
// the fuzzer explores the parser behind them (bounds, sections, entries).
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/checksum.h"
#include "lmdb/index_file.h"

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
  return 0;
}
