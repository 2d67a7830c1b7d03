// libFuzzer harness: a record's bytes through the Caffe Datum parser. What it
// accepts must keep the header's promises: data inside the record, raw pixels
// that fill channels x height x width, dimensions never negative.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "lmdbloader/caffe_datum.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view record(reinterpret_cast<const char*>(data), size);
  lmdbloader::CaffeDatum d;
  if (!lmdbloader::ParseCaffeDatum(record, &d).ok()) return 0;
  const bool inside = d.data.empty() || (d.data.data() >= record.data() &&
                                         d.data.data() + d.data.size() <= record.data() + record.size());
  if (!inside || d.channels < 0 || d.height < 0 || d.width < 0) std::abort();
  if (d.encoded && d.data.empty()) std::abort();
  if (!d.encoded) {
    const unsigned __int128 want = static_cast<unsigned __int128>(d.channels) * d.height * d.width;
    const uint64_t held = d.data.empty() ? d.float_data_count : d.data.size();
    if (want != held || held == 0) std::abort();
  }
  return 0;
}
