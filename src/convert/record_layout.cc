#include "convert/record_layout.h"

#include <cstring>
#include <vector>

#include "lmdbloader/image_record.h"

namespace lmdbloader {
namespace {

constexpr int64_t kExactInDouble = int64_t{1} << 53;

void PackBytes(msgpack::packer<msgpack::sbuffer>& pk, std::string_view b) {
  pk.pack_bin(static_cast<uint32_t>(b.size()));
  pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
}

void PackKey(msgpack::packer<msgpack::sbuffer>& pk, const char* key, std::set<std::string>* fields) {
  pk.pack(std::string(key));
  fields->insert(key);
}

// The value as its layout splits it (image_record.h), packed: the converter
// adds nothing of its own reading, so ImageDecode finds in the copy what it
// finds in the original.
Status Pack(const ImageRecord& r, msgpack::sbuffer* out, SplitValue* split, std::set<std::string>* fields) {
  msgpack::packer<msgpack::sbuffer> pk(*out);
  switch (r.kind) {
    case ImageRecord::Kind::kWhole: {  // a map, kept as it is, its text keys its fields
      const RecordValue map = r.unpacked.root();
      for (uint32_t i = 0; i < map.size(); ++i)
        if (map.key(i).type() == RecordValue::Type::kString) fields->insert(std::string(map.key(i).bytes()));
      out->write(r.image.data(), r.image.size());
      break;
    }
    case ImageRecord::Kind::kFrames:
      pk.pack_map(1);
      PackKey(pk, "frames", fields);
      pk.pack_array(static_cast<uint32_t>(r.frames.size()));
      for (std::string_view f : r.frames) PackBytes(pk, f);
      break;
    case ImageRecord::Kind::kEncoded:
      pk.pack_map(r.target == ImageRecord::Target::kNone ? 1 : 2);
      PackKey(pk, "image", fields);
      PackBytes(pk, r.image);
      break;
    case ImageRecord::Kind::kPixels:
      pk.pack_map(r.target == ImageRecord::Target::kNone ? 4 : 5);
      PackKey(pk, "pixels", fields);
      PackBytes(pk, r.image);
      PackKey(pk, "channels", fields);
      pk.pack(r.channels);
      PackKey(pk, "height", fields);
      pk.pack(r.height);
      PackKey(pk, "width", fields);
      pk.pack(r.width);
      break;
  }
  // Only an integer label is a column (a class name is not), and only one a
  // float64 column holds exactly.
  const bool integer = r.target == ImageRecord::Target::kInteger;
  const bool huge = r.target == ImageRecord::Target::kValue && r.value.type() == RecordValue::Type::kUnsigned;
  if (huge || (integer && (r.label > kExactInDouble || r.label < -kExactInDouble)))
    return Status::InvalidArgument("its 'label' is beyond 2^53, which its column cannot hold exactly");
  if (r.kind == ImageRecord::Kind::kEncoded || r.kind == ImageRecord::Kind::kPixels) {
    if (r.target != ImageRecord::Target::kNone) {
      PackKey(pk, "label", fields);
      pk.pack(r.label);
    }
  }
  split->has_label = integer;
  split->label = r.label;
  return Status::OK();
}

}  // namespace

bool IsMetadataKey(std::string_view key) {
  return key.size() > 4 && key.compare(0, 2, "__") == 0 && key.compare(key.size() - 2, 2, "__") == 0;
}

Status SplitRecord(RecordLayout layout, std::string_view value, msgpack::sbuffer* out, SplitValue* split,
                   std::set<std::string>* fields) {
  out->clear();
  *split = SplitValue();
  ImageRecordSpec spec;
  spec.layout = layout;
  spec.field.clear();  // a msgpack map is kept whole
  spec.target_required = false;
  spec.frames = true;  // a msgpack list of byte strings is a clip's frames
  ImageRecord r;
  const Status s = SplitImageRecord(spec, value, &r);
  if (!s.ok()) return Status::InvalidArgument(s.message());
  return Pack(r, out, split, fields);
}

}  // namespace lmdbloader
