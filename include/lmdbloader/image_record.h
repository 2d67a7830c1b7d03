// Splitting one record into its image (an encoded image, a clip's encoded
// frames, or raw pixels with their shape) and its target, for every record
// layout: the one reading of a layout that the image path (ImageDecode,
// ClipDecode) and the converter (`convert --from lmdb --record ...`) share,
// so a record and its converted copy give the same image and target.
//
// The layouts:
//   - kMsgpack: a msgpack map, the image in `field` and the target in
//     `target`; a clip's frames a msgpack array of byte strings, in `field` or
//     as the whole record (CoCLR's `msgpack.dumps([jpeg, ...])`). A map
//     without `field` but with `pixels`, `channels`, `height` and `width` is a
//     raw-pixel Datum as the converter writes it. Byte strings may be bin or,
//     as msgpack-python before 1.0 wrote bytes, str (msgpack_record.h).
//   - kRaw: the record is the encoded image; no target.
//   - kCaffe: a Caffe Datum (caffe_datum.h): an encoded image, or raw BGR
//     planes with their shape; the target is `label`, 0 where the Datum has
//     none (as protobuf reads an absent int32, and as Caffe's data layer).
//   - kAsIs: the converter's "keep the value as it is"; nothing to split.
//
// The record's bytes are untrusted: msgpack goes through UnpackRecord's
// limits, a Datum through ParseCaffeDatum's rules. Fuzzed by
// fuzz/image_record_fuzzer.cc.
//
// Lifetimes: an ImageRecord's views point into the record's bytes, and its
// `value` into its own unpacked tree: valid while both live.
// Thread-safety: SplitImageRecord is reentrant.
#ifndef LMDBLOADER_IMAGE_RECORD_H_
#define LMDBLOADER_IMAGE_RECORD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/msgpack_record.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

// How a record holds its image and target (the list at the top of this file).
enum class RecordLayout { kAsIs, kCaffe, kMsgpack, kRaw };

// Where a record's image and target are.
struct ImageRecordSpec {
  RecordLayout layout = RecordLayout::kMsgpack;
  // kMsgpack: the map's field that holds the image (or the frames). Empty:
  // the whole record is the image, or for the converter the map kept whole.
  std::string field = "image";
  // kMsgpack: the map's field that holds the target; empty: none is read.
  std::string target = "label";
  // kMsgpack: whether a record without `target` is an error (the image path)
  // or has no target (the converter).
  bool target_required = true;
  // What the image is: one encoded image (false) or a clip's frames (true).
  // The converter asks for frames only where the record is a list of them.
  bool frames = false;
};

struct ImageRecord {
  enum class Kind {
    kEncoded,  // `image`: an encoded image (JPEG, PNG, ...)
    kFrames,   // `frames`: a clip's encoded frames, at least one
    kPixels,   // `image`: channels x height x width bytes, planes (BGR for 3 channels)
    kWhole,    // kMsgpack with an empty `field`: the record itself (`image`), a map when unpacked
  };
  Kind kind = Kind::kEncoded;
  std::string_view image;
  std::vector<std::string_view> frames;
  int32_t channels = 0;
  int32_t height = 0;
  int32_t width = 0;

  // The target: none; an integer (`label`: Caffe's, or a msgpack integer
  // within int64); or another msgpack value (`value`: text, a float, a list).
  enum class Target { kNone, kInteger, kValue };
  Target target = Target::kNone;
  int64_t label = 0;
  RecordValue value;

  // kMsgpack: the record unpacked (its root a map, or the frames' list); the
  // views above and `value` point into it. kNil for the other layouts, and
  // for a kMsgpack record with neither `field` nor `target` (not unpacked).
  UnpackedRecord unpacked;
};

// Splits `record`, laid out as `spec` says, into `*out`. DecodeError saying
// what is wrong ("not msgpack: ...", "no field 'image' (fields: 'label',
// 'name')", "a Caffe Datum of 12 float_data values and no data", ...); the
// caller adds which record it was. `*out` is then unspecified.
Status SplitImageRecord(const ImageRecordSpec& spec, std::string_view record, ImageRecord* out);

// Writes a kPixels record's pixels as RGB, height x width x 3 bytes, into
// `rgb` (a gray plane repeated three times; BGR planes reordered).
// DecodeError for another number of channels than 1 or 3 (the converter
// keeps such pixels; the image path cannot show them).
Status PixelsToRgb(const ImageRecord& record, uint8_t* rgb);

}  // namespace lmdbloader

#endif  // LMDBLOADER_IMAGE_RECORD_H_
