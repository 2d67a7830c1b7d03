// libFuzzer harness: a file set's saved listing, parsed with its sum
// skipped, so the fuzzer explores the parser behind it (lengths, counts,
// paths); what it accepts is used as an open from it uses it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "reader/set_listing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lmdbloader::SetListing listing;
  if (lmdbloader::DecodeSetListing(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.lst", &listing,
                                   /*check_sum=*/false)
          .ok()) {
    uint64_t total = 0;
    for (size_t i = 0; i < listing.paths.size(); ++i) {
      total += listing.records[i] + listing.identities[i].Sum();
      if (i < 64) (void)listing.paths[i];
    }
    (void)total;
    (void)lmdbloader::EncodeSetListing(listing);
  }
  return 0;
}
