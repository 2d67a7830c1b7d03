// libFuzzer harness: a record's bytes through the limited msgpack unpacker,
// and every value of what it accepts read back through RecordValue.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lmdbloader/msgpack_record.h"

namespace {

// Depth is bounded by kMaxRecordDepth, so this recursion is too.
size_t Walk(const lmdbloader::RecordValue& v) {
  size_t n = v.bytes().size() + v.boolean() + static_cast<size_t>(v.unsigned_value()) +
             static_cast<size_t>(v.signed_value());
  for (uint32_t i = 0; i < v.size(); ++i) {
    if (v.type() == lmdbloader::RecordValue::Type::kArray) {
      n += Walk(v.element(i));
    } else {
      n += Walk(v.key(i)) + Walk(v.value(i));
    }
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmdbloader::UnpackedRecord record;
  if (lmdbloader::UnpackRecord(std::string_view(reinterpret_cast<const char*>(data), size), &record).ok()) {
    volatile size_t sink = Walk(record.root());
    (void)sink;
  }
  return 0;
}
