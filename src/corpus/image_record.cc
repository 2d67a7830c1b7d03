#include "lmdbloader/image_record.h"

#include <algorithm>
#include <utility>

#include "lmdbloader/caffe_datum.h"

namespace lmdbloader {
namespace {

using Type = RecordValue::Type;

bool IsByteString(const RecordValue& v) { return v.type() == Type::kBytes || v.type() == Type::kString; }

// A list whose elements are all byte strings: the frames of a clip.
bool IsFrameList(const RecordValue& v) {
  if (v.type() != Type::kArray) return false;
  for (uint32_t i = 0; i < v.size(); ++i)
    if (!IsByteString(v.element(i))) return false;
  return true;
}

Status TakeFrames(const RecordValue& list, ImageRecord* out) {
  if (list.size() == 0) return Status::DecodeError("a msgpack list of no frames");
  out->kind = ImageRecord::Kind::kFrames;
  out->frames.clear();
  out->frames.reserve(list.size());
  for (uint32_t i = 0; i < list.size(); ++i) out->frames.push_back(list.element(i).bytes());
  return Status::OK();
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kNil: return "nil";
    case Type::kBool: return "a bool";
    case Type::kUnsigned: case Type::kSigned: return "an integer";
    case Type::kFloat: return "a float";
    case Type::kString: return "text";
    case Type::kBytes: return "bytes";
    case Type::kArray: return "a list";
    case Type::kMap: return "a map";
  }
  return "?";
}

// The map's field named `name`, or kNil with *found false.
RecordValue Field(const RecordValue& map, std::string_view name, bool* found) {
  for (uint32_t i = 0; i < map.size(); ++i) {
    const RecordValue key = map.key(i);
    if (key.type() == Type::kString && key.bytes() == name) {
      *found = true;
      return map.value(i);
    }
  }
  *found = false;
  return RecordValue();
}

// "no field 'image' (fields: 'label', 'name')": the text keys, sorted.
Status NoField(const RecordValue& map, std::string_view name) {
  std::vector<std::string> keys;
  for (uint32_t i = 0; i < map.size(); ++i)
    if (map.key(i).type() == Type::kString) keys.emplace_back(map.key(i).bytes());
  std::sort(keys.begin(), keys.end());
  std::string list;
  for (const std::string& k : keys) list += (list.empty() ? "'" : ", '") + k.substr(0, 64) + "'";
  return Status::DecodeError("no field '" + std::string(name) + "' (fields: " + (list.empty() ? "none" : list) +
                             ")");
}

// A raw-pixel Datum as the converter writes it: {"pixels", "channels",
// "height", "width", "label"}.
Status TakePixelFields(const RecordValue& map, ImageRecord* out) {
  bool found = false;
  const RecordValue pixels = Field(map, "pixels", &found);
  int32_t* dims[] = {&out->channels, &out->height, &out->width};
  const char* names[] = {"channels", "height", "width"};
  for (int i = 0; i < 3; ++i) {
    const RecordValue v = Field(map, names[i], &found);
    if (v.type() != Type::kUnsigned || v.unsigned_value() > INT32_MAX)
      return Status::DecodeError("a 'pixels' record needs integer channels, height and width");
    *dims[i] = static_cast<int32_t>(v.unsigned_value());
  }
  out->kind = ImageRecord::Kind::kPixels;
  out->image = pixels.bytes();
  return Status::OK();
}

Status CheckPixels(const ImageRecord& r) {
  const uint64_t want = static_cast<uint64_t>(r.channels) * static_cast<uint64_t>(r.height) *
                        static_cast<uint64_t>(r.width);
  if (r.height <= 0 || r.width <= 0 || r.image.size() != want)
    return Status::DecodeError(std::to_string(r.image.size()) + " bytes of raw pixels for " +
                               std::to_string(r.channels) + " x " + std::to_string(r.height) + " x " +
                               std::to_string(r.width));
  return Status::OK();
}

void TakeTarget(const RecordValue& v, ImageRecord* out) {
  if (v.type() == Type::kUnsigned && v.unsigned_value() <= static_cast<uint64_t>(INT64_MAX)) {
    out->target = ImageRecord::Target::kInteger;
    out->label = static_cast<int64_t>(v.unsigned_value());
  } else if (v.type() == Type::kSigned) {
    out->target = ImageRecord::Target::kInteger;
    out->label = v.signed_value();
  } else {
    out->target = ImageRecord::Target::kValue;
  }
  out->value = v;
}

Status SplitMsgpack(const ImageRecordSpec& spec, std::string_view record, ImageRecord* out) {
  if (spec.field.empty() && spec.target.empty()) {
    out->kind = ImageRecord::Kind::kWhole;
    out->image = record;
    return Status::OK();
  }
  const Status unpacked = UnpackRecord(record, &out->unpacked);
  if (!unpacked.ok()) {
    // The hint that the record may be the image itself only where it does
    // not open as a msgpack map or list (a fixmap, fixarray, map16/32 or
    // array16/32 byte): one that does is a map or list with a value
    // lmdbloader does not read (an extension value), or a damaged one.
    const uint8_t first = record.empty() ? 0 : static_cast<uint8_t>(record[0]);
    const bool container = (first >= 0x80 && first <= 0x9f) || (first >= 0xdc && first <= 0xdf);
    std::string hint;
    if (spec.frames) {
      hint = "; a clip's frames are a msgpack list, or a list in a map";
    } else if (!container) {
      hint = "; a record that is the image itself has layout 'raw'";
    }
    return Status::DecodeError("not msgpack (" + unpacked.message() + ")" + hint);
  }
  const RecordValue root = out->unpacked.root();
  if (spec.frames && root.type() == Type::kArray) {
    if (!IsFrameList(root)) return Status::DecodeError("a msgpack list that is not of byte strings (frames)");
    return TakeFrames(root, out);
  }
  if (root.type() != Type::kMap) {
    return Status::DecodeError(spec.frames ? "neither a msgpack list of byte strings (frames) nor a msgpack map"
                                           : "the record is not a msgpack map");
  }
  bool found = false;
  if (spec.field.empty()) {
    out->kind = ImageRecord::Kind::kWhole;
    out->image = record;
  } else {
    const RecordValue image = Field(root, spec.field, &found);
    if (!found) {
      bool pixels = false;
      if (!spec.frames && Field(root, "pixels", &pixels).type() == Type::kBytes && pixels) {
        Status s = TakePixelFields(root, out);
        if (s.ok()) s = CheckPixels(*out);
        if (!s.ok()) return s;
      } else {
        return NoField(root, spec.field);
      }
    } else if (spec.frames) {
      if (!IsFrameList(image) || image.size() == 0)
        return Status::DecodeError("field '" + spec.field + "' holds no list of encoded frames");
      Status s = TakeFrames(image, out);
      if (!s.ok()) return s;
    } else {
      if (!IsByteString(image) || image.type() == Type::kString)
        return Status::DecodeError("field '" + spec.field + "' holds " + TypeName(image.type()) +
                                   ", not the image's bytes");
      out->kind = ImageRecord::Kind::kEncoded;
      out->image = image.bytes();
    }
  }
  if (spec.target.empty()) return Status::OK();
  const RecordValue target = Field(root, spec.target, &found);
  if (found) {
    TakeTarget(target, out);
  } else if (spec.target_required) {
    return NoField(root, spec.target);
  }
  return Status::OK();
}

Status SplitCaffe(std::string_view record, ImageRecord* out) {
  CaffeDatum d;
  Status s = ParseCaffeDatum(record, &d);
  if (!s.ok()) return s;
  if (d.data.empty())
    return Status::DecodeError("a Caffe Datum of " + std::to_string(d.float_data_count) +
                               " float_data values and no data: features, not an image");
  out->image = d.data;
  if (d.encoded) {
    out->kind = ImageRecord::Kind::kEncoded;
  } else {
    out->kind = ImageRecord::Kind::kPixels;
    out->channels = d.channels;
    out->height = d.height;
    out->width = d.width;
    s = CheckPixels(*out);
    if (!s.ok()) return s;
  }
  // protobuf reads an absent int32 as 0, and so does Caffe's data layer.
  out->target = ImageRecord::Target::kInteger;
  out->label = d.label;
  return Status::OK();
}

}  // namespace

Status SplitImageRecord(const ImageRecordSpec& spec, std::string_view record, ImageRecord* out) {
  *out = ImageRecord();
  switch (spec.layout) {
    case RecordLayout::kMsgpack: return SplitMsgpack(spec, record, out);
    case RecordLayout::kCaffe: return SplitCaffe(record, out);
    case RecordLayout::kRaw:
      if (record.empty()) return Status::DecodeError("an empty record, not an image");
      out->image = record;
      return Status::OK();
    case RecordLayout::kAsIs: break;
  }
  return Status::InvalidArgument("a record kept as it is has no image to split out");
}

Status PixelsToRgb(const ImageRecord& record, uint8_t* rgb) {
  if (record.kind != ImageRecord::Kind::kPixels || (record.channels != 1 && record.channels != 3))
    return Status::DecodeError("raw pixels of " + std::to_string(record.channels) +
                               " channels; 1 (gray) and 3 (BGR) decode");
  const size_t plane = static_cast<size_t>(record.height) * static_cast<size_t>(record.width);
  const auto* src = reinterpret_cast<const uint8_t*>(record.image.data());
  if (record.channels == 1) {
    for (size_t i = 0; i < plane; ++i) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = src[i];
    return Status::OK();
  }
  for (size_t i = 0; i < plane; ++i) {  // OpenCV's planes: blue, green, red
    rgb[3 * i] = src[2 * plane + i];
    rgb[3 * i + 1] = src[plane + i];
    rgb[3 * i + 2] = src[i];
  }
  return Status::OK();
}

}  // namespace lmdbloader
