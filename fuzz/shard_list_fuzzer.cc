// libFuzzer harness: a shard set's shards.json.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/shard_list.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<lmdbloader::ShardEntry> parts;
  lmdbloader::ParseShardList(std::string(reinterpret_cast<const char*>(data), size), "set", "set/shards.json",
                             &parts)
      .IgnoreError();
  return 0;
}
