// libFuzzer harness: a record's bytes through the limited msgpack unpacker.
#include <cstddef>
#include <cstdint>

#include "lmdbloader/msgpack_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  msgpack::object_handle oh;
  std::string error;
  lmdbloader::UnpackRecord(reinterpret_cast<const char*>(data), size, &oh, &error);
  return 0;
}
