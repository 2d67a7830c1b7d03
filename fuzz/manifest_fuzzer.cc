// libFuzzer harness: a corpus manifest's JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include "corpus/corpus_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmdbloader::CorpusManifest manifest;
  lmdbloader::ParseCorpusManifest(std::string(reinterpret_cast<const char*>(data), size), "fuzz", &manifest).IgnoreError();
  return 0;
}
