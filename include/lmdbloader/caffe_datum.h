// Caffe Datum records: parsing one from untrusted bytes, without copying.
//
// A Datum is the protobuf message that Caffe's `convert_imageset` (and DALI's
// `readers.caffe`) keep as each value of an LMDB (caffe.proto):
//   optional int32 channels = 1;  optional int32 height = 2;
//   optional int32 width = 3;     optional bytes data = 4;
//   optional int32 label = 5;     repeated float float_data = 6;
//   optional bool encoded = 7 [default = false];
// Caffe writes two kinds: an encoded image (ReadImageToDatum: `data` the
// file's bytes, `label`, `encoded` true, no dimensions) and raw pixels
// (CVMatToDatum: `channels`, `height`, `width`, `data` = channels x height x
// width bytes, planes in OpenCV's BGR order, `label`, `encoded` false).
//
// Wire rules, as protobuf's own parser applies them:
//   - a scalar field given twice keeps its last value, `data` too;
//   - `float_data` may be packed (wire type 2) or one float a tag (wire type
//     5, what proto2 writes for caffe.proto, which does not ask for packing);
//   - `encoded` is true for any non-zero varint;
//   - fields Datum does not declare (numbers 8 and up), with a wire type of
//     varint, 64-bit, length-delimited or 32-bit, are skipped and counted in
//     `unknown_fields`. Caffe reads such records (its parser skips them too), so
//     refusing them would refuse corpora that Caffe trains on; a caller that
//     wants only plain Datums checks the count.
// Refused, with a DecodeError naming what is wrong and where (byte offset):
//   - a varint longer than 10 bytes, past 64 bits or cut off, a length past
//     the end of the record or above 2^31-1 (protobuf's message limit), a
//     field cut off;
//   - field number 0 or above 2^29-1, wire types 3 and 4 (groups, which no
//     Datum has) and 6, 7 (no such wire types);
//   - a declared field with another wire type than its declaration's
//     (protobuf would keep it as an unknown field and read the default: here
//     it is the mark of another message, such as SSD's AnnotatedDatum, whose
//     field 1 is a nested Datum);
//   - `channels`, `height`, `width` or `label` outside int32 (protobuf would
//     truncate such a varint silently), or a negative dimension;
//   - an encoded Datum with empty `data`;
//   - raw pixels (`encoded` false, `data` non-empty) whose size is not
//     channels x height x width, or, when `data` is empty (Caffe then reads
//     `float_data`), a `float_data` count that is not; a raw Datum with
//     neither;
//   - a Datum that holds neither `data` nor `float_data` (no image at all:
//     this also turns away most bytes that are not a Datum).
//
// Lifetimes: a CaffeDatum's `data` is a view into the record passed to
// ParseCaffeDatum, valid while those bytes are.
//
// Thread-safety: ParseCaffeDatum is reentrant. It copies no bytes of the
// record; it may build short strings (a field's name) as it goes.
#ifndef LMDBLOADER_CAFFE_DATUM_H_
#define LMDBLOADER_CAFFE_DATUM_H_

#include <cstdint>
#include <string_view>

#include "lmdbloader/status.h"

namespace lmdbloader {

struct CaffeDatum {
  // Dimensions of raw pixels; 0 when the record does not give them (an
  // encoded Datum). Never negative.
  int32_t channels = 0;
  int32_t height = 0;
  int32_t width = 0;
  // The image: the encoded file's bytes (encoded true) or the raw pixels,
  // channels planes of height rows of width bytes, BGR for 3 channels. A view
  // into the record; empty when the record has no `data`.
  std::string_view data;
  bool has_label = false;  // whether the record gives `label`
  int32_t label = 0;
  bool encoded = false;
  // How many floats `float_data` holds (they are not returned: Caffe writes
  // them for features, not for images).
  uint64_t float_data_count = 0;
  // Fields with numbers Datum does not declare, skipped.
  uint64_t unknown_fields = 0;
};

// Parses `record`, a serialized Datum, into `*datum` (the rules above). OK, or
// DecodeError whose message says what is wrong and at which byte; `*datum`
// is then unspecified.
Status ParseCaffeDatum(std::string_view record, CaffeDatum* datum);

}  // namespace lmdbloader

#endif  // LMDBLOADER_CAFFE_DATUM_H_
