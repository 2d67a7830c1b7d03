// libFuzzer harness: a saved record index. The input gets a valid checksum
// appended, so the fuzzer explores the parser behind the checksum gate.
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/checksum.h"
#include "lmdb/index_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  const uint64_t sum = lmdbloader::Checksum(bytes);
  bytes.append(reinterpret_cast<const char*>(&sum), 8);
  lmdbloader::RecordIndex index;
  if (lmdbloader::IndexFileCodec::Decode(bytes, "fuzz.idx", &index).ok()) {
    // Use what was accepted the way a reader does.
    for (uint64_t i = 0; i < index.size() && i < 64; ++i) {
      uint64_t found = 0;
      index.Find(index.Key(i), &found);
      (void)index.offset(i);
      (void)index.value_size(i);
    }
    (void)index.LowerBound("key");
    (void)index.MemoryBytes();
  }
  return 0;
}
