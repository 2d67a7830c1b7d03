// Splitting an LMDB value written by another tool into a corpus record's
// fields (`lmdbloader convert --from lmdb --record ...`; the layouts are listed
// in lmdbloader/convert.h): the image or frames, and the label, which the
// converter makes a column.
#ifndef LMDBLOADER_SRC_CONVERT_RECORD_LAYOUT_H_
#define LMDBLOADER_SRC_CONVERT_RECORD_LAYOUT_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "lmdbloader/convert.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// A key of the form __name__ (at least one character between the
// underscores): the metadata records that CoCLR's and folder2lmdb-style
// writers keep beside the samples.
bool IsMetadataKey(std::string_view key);

// What SplitRecord made of one value.
struct SplitValue {
  bool has_label = false;
  int64_t label = 0;  // within -2^53..2^53: its column is read as float64 on the way
};

// Writes into `*out` the msgpack map that `value`, laid out as `layout` (not
// kAsIs), becomes, and adds the names of its fields to `*fields`.
// InvalidArgument saying why a value does not fit the layout.
Status SplitRecord(RecordLayout layout, std::string_view value, msgpack::sbuffer* out, SplitValue* split,
                   std::set<std::string>* fields);

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_CONVERT_RECORD_LAYOUT_H_
