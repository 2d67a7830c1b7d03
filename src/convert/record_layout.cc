#include "convert/record_layout.h"

#include <cstring>
#include <vector>

#include "lmdbloader/caffe_datum.h"
#include "lmdbloader/msgpack_record.h"

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

uint64_t BigEndian(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v = v << 8 | static_cast<uint8_t>(p[i]);
  return v;
}

// A msgpack array whose elements are all byte strings: bin, or str, which is
// how msgpack-python before 1.0 (use_bin_type=False) wrote bytes. Views of
// the elements; false when `v` is anything else or has bytes after the array.
bool ByteStringArray(std::string_view v, std::vector<std::string_view>* out) {
  const char* p = v.data();
  const char* end = p + v.size();
  auto need = [&](size_t n) { return static_cast<size_t>(end - p) >= n; };
  if (!need(1)) return false;
  const uint8_t head = static_cast<uint8_t>(*p++);
  uint64_t count = 0;
  if ((head & 0xf0) == 0x90) {
    count = head & 0x0f;
  } else if (head == 0xdc || head == 0xdd) {
    const int n = head == 0xdc ? 2 : 4;
    if (!need(n)) return false;
    count = BigEndian(p, n);
    p += n;
  } else {
    return false;
  }
  // Each element takes a byte at least: a count beyond that is a lie, and
  // must not size the vector.
  if (count > static_cast<uint64_t>(end - p)) return false;
  out->clear();
  out->reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    if (!need(1)) return false;
    const uint8_t tag = static_cast<uint8_t>(*p++);
    uint64_t size = 0;
    if ((tag & 0xe0) == 0xa0) {
      size = tag & 0x1f;
    } else {
      int n = 0;
      switch (tag) {
        case 0xc4: case 0xd9: n = 1; break;
        case 0xc5: case 0xda: n = 2; break;
        case 0xc6: case 0xdb: n = 4; break;
        default: return false;
      }
      if (!need(n)) return false;
      size = BigEndian(p, n);
      p += n;
    }
    if (!need(size)) return false;
    out->emplace_back(p, static_cast<size_t>(size));
    p += size;
  }
  return p == end;
}

Status Caffe(std::string_view value, msgpack::sbuffer* out, SplitValue* split, std::set<std::string>* fields) {
  CaffeDatum d;
  Status s = ParseCaffeDatum(value, &d);
  if (!s.ok()) return Status::InvalidArgument(s.message());
  if (d.data.empty())
    return Status::InvalidArgument("a Caffe Datum of " + std::to_string(d.float_data_count) +
                                   " float_data values and no data: features, not an image");
  msgpack::packer<msgpack::sbuffer> pk(*out);
  // A Datum without a label has label 0, as protobuf reads an absent int32
  // and as Caffe's data layer, and ImageDecode(record="caffe"), read it.
  pk.pack_map((d.encoded ? 1 : 4) + 1);
  if (d.encoded) {
    PackKey(pk, "image", fields);
    PackBytes(pk, d.data);
  } else {
    PackKey(pk, "pixels", fields);
    PackBytes(pk, d.data);
    PackKey(pk, "channels", fields);
    pk.pack(d.channels);
    PackKey(pk, "height", fields);
    pk.pack(d.height);
    PackKey(pk, "width", fields);
    pk.pack(d.width);
  }
  PackKey(pk, "label", fields);
  pk.pack(d.label);
  split->has_label = true;
  split->label = d.label;
  return Status::OK();
}

Status Msgpack(std::string_view value, msgpack::sbuffer* out, SplitValue* split, std::set<std::string>* fields) {
  std::vector<std::string_view> frames;
  if (ByteStringArray(value, &frames)) {
    if (frames.empty()) return Status::InvalidArgument("a msgpack list of no frames");
    msgpack::packer<msgpack::sbuffer> pk(*out);
    pk.pack_map(1);
    PackKey(pk, "frames", fields);
    pk.pack_array(static_cast<uint32_t>(frames.size()));
    for (std::string_view f : frames) PackBytes(pk, f);
    return Status::OK();
  }
  UnpackedRecord record;
  const Status unpacked = UnpackRecord(value, &record);
  if (!unpacked.ok()) return Status::InvalidArgument("not msgpack: " + unpacked.message());
  const RecordValue o = record.root();
  if (o.type() != RecordValue::Type::kMap)
    return Status::InvalidArgument("neither a msgpack list of byte strings (frames) nor a msgpack map");
  for (uint32_t i = 0; i < o.size(); ++i) {
    const RecordValue key = o.key(i);
    if (key.type() != RecordValue::Type::kString) continue;
    fields->insert(std::string(key.bytes()));
    if (key.bytes() != "label") continue;
    // Only an integer label is a column (a class name is not).
    const RecordValue label = o.value(i);
    const bool positive = label.type() == RecordValue::Type::kUnsigned;
    const bool negative = label.type() == RecordValue::Type::kSigned;
    if (!positive && !negative) continue;
    if ((positive && label.unsigned_value() > static_cast<uint64_t>(kExactInDouble)) ||
        (negative && label.signed_value() < -kExactInDouble))
      return Status::InvalidArgument("its 'label' is beyond 2^53, which its column cannot hold exactly");
    split->has_label = true;
    split->label = positive ? static_cast<int64_t>(label.unsigned_value()) : label.signed_value();
  }
  out->write(value.data(), value.size());  // kept as it is
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
  switch (layout) {
    case RecordLayout::kCaffe: return Caffe(value, out, split, fields);
    case RecordLayout::kMsgpack: return Msgpack(value, out, split, fields);
    case RecordLayout::kRaw: {
      if (value.empty()) return Status::InvalidArgument("an empty value, not an image");
      msgpack::packer<msgpack::sbuffer> pk(*out);
      pk.pack_map(1);
      PackKey(pk, "image", fields);
      PackBytes(pk, value);
      return Status::OK();
    }
    case RecordLayout::kAsIs: break;
  }
  return Status::InvalidArgument("invalid record layout");
}

}  // namespace lmdbloader
