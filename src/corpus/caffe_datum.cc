// ParseCaffeDatum: protobuf's wire format read field by field, checked at
// every step (include/lmdbloader/caffe_datum.h has the rules).
#include "lmdbloader/caffe_datum.h"

#include <cstring>
#include <string>

namespace lmdbloader {
namespace {

// Wire types (protobuf's encoding guide).
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;
constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;
constexpr uint64_t kMaxLength = 0x7fffffff;  // protobuf refuses messages of 2 GiB and more

const char* FieldName(uint32_t number) {
  switch (number) {
    case 1: return "channels";
    case 2: return "height";
    case 3: return "width";
    case 4: return "data";
    case 5: return "label";
    case 6: return "float_data";
    case 7: return "encoded";
    default: return "unknown";
  }
}

class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : p_(bytes.data()), begin_(bytes.data()), end_(p_ + bytes.size()) {}

  bool done() const { return p_ == end_; }
  size_t offset() const { return static_cast<size_t>(p_ - begin_); }
  size_t left() const { return static_cast<size_t>(end_ - p_); }

  // A base-128 varint of at most 10 bytes whose value fits 64 bits (the tenth
  // byte holds only the top bit).
  Status Varint(const char* what, uint64_t* value) {
    const size_t at = offset();
    uint64_t v = 0;
    for (int i = 0; i < 10; ++i) {
      if (p_ == end_) return Error(at, std::string(what) + ": the varint is cut off by the end of the record");
      const uint8_t byte = static_cast<uint8_t>(*p_++);
      if (i == 9 && byte > 1) return Error(at, std::string(what) + ": the varint overflows 64 bits");
      v |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if (!(byte & 0x80)) {
        *value = v;
        return Status::OK();
      }
    }
    return Error(at, std::string(what) + ": the varint is longer than 10 bytes");
  }

  Status Skip(size_t n, const std::string& what) {
    if (n > left())
      return Error(offset(), what + ": " + std::to_string(n) + " bytes, but the record has " +
                                 std::to_string(left()) + " left");
    p_ += n;
    return Status::OK();
  }

  // A length-delimited field's bytes.
  Status Bytes(const std::string& what, std::string_view* out) {
    uint64_t n = 0;
    LMDBLOADER_RETURN_IF_ERROR(Varint((what + "'s length").c_str(), &n));
    if (n > kMaxLength) return Error(offset(), what + ": a length of " + std::to_string(n) + " bytes (at most 2^31-1)");
    const char* start = p_;
    LMDBLOADER_RETURN_IF_ERROR(Skip(static_cast<size_t>(n), what));
    *out = std::string_view(start, static_cast<size_t>(n));
    return Status::OK();
  }

  Status Error(size_t at, const std::string& what) const {
    return Status::DecodeError("not a valid Caffe Datum: " + what + " (byte " + std::to_string(at) + " of " +
                               std::to_string(end_ - begin_) + ")");
  }

 private:
  const char* p_;
  const char* begin_;
  const char* end_;
};

// An int32 field's varint: protobuf writes a negative int32 as the 64-bit
// two's complement (10 bytes). Anything else beyond int32 is refused.
bool AsInt32(uint64_t v, int32_t* out) {
  const int64_t s = static_cast<int64_t>(v);
  if (s < INT32_MIN || s > INT32_MAX) return false;
  *out = static_cast<int32_t>(s);
  return true;
}

}  // namespace

Status ParseCaffeDatum(std::string_view record, CaffeDatum* datum) {
  *datum = CaffeDatum();
  WireReader in(record);
  bool has_data = false;
  while (!in.done()) {
    const size_t at = in.offset();
    uint64_t tag = 0;
    LMDBLOADER_RETURN_IF_ERROR(in.Varint("a field's tag", &tag));
    const uint32_t wire = static_cast<uint32_t>(tag & 7);
    const uint64_t number = tag >> 3;
    if (number == 0 || number > kMaxFieldNumber)
      return in.Error(at, "field number " + std::to_string(number) + " (1 to 2^29-1)");
    if (wire != kVarint && wire != kFixed64 && wire != kLengthDelimited && wire != kFixed32)
      return in.Error(at, "field " + std::to_string(number) + " has wire type " + std::to_string(wire) +
                              (wire == 3 || wire == 4 ? " (a group, which a Datum never holds)" : " (no such type)"));
    const std::string name = number <= 7 ? FieldName(static_cast<uint32_t>(number)) : std::string();
    auto wrong_type = [&](const char* declared) {
      return in.Error(at, "field " + std::to_string(number) + " (" + name + ") has wire type " +
                              std::to_string(wire) + "; a Datum declares it " + declared);
    };
    switch (number) {
      case 1: case 2: case 3: case 5: {  // int32
        if (wire != kVarint) return wrong_type("int32 (a varint)");
        uint64_t v = 0;
        LMDBLOADER_RETURN_IF_ERROR(in.Varint(name.c_str(), &v));
        int32_t value = 0;
        if (!AsInt32(v, &value))
          return in.Error(at, name + " is " + std::to_string(v) + ", outside int32");
        if (number == 5) {
          datum->label = value;
          datum->has_label = true;
        } else {
          if (value < 0) return in.Error(at, name + " is negative (" + std::to_string(value) + ")");
          (number == 1 ? datum->channels : number == 2 ? datum->height : datum->width) = value;
        }
        break;
      }
      case 4:  // bytes: the last one given is the value
        if (wire != kLengthDelimited) return wrong_type("bytes (length-delimited)");
        LMDBLOADER_RETURN_IF_ERROR(in.Bytes(name, &datum->data));
        has_data = true;
        break;
      case 6:  // repeated float, packed or one a tag
        if (wire == kFixed32) {
          LMDBLOADER_RETURN_IF_ERROR(in.Skip(4, name));
          ++datum->float_data_count;
        } else if (wire == kLengthDelimited) {
          std::string_view packed;
          LMDBLOADER_RETURN_IF_ERROR(in.Bytes(name, &packed));
          if (packed.size() % 4 != 0)
            return in.Error(at, "packed float_data of " + std::to_string(packed.size()) +
                                    " bytes, not a whole number of floats");
          datum->float_data_count += packed.size() / 4;
        } else {
          return wrong_type("repeated float (32-bit, or packed)");
        }
        break;
      case 7: {  // bool
        if (wire != kVarint) return wrong_type("bool (a varint)");
        uint64_t v = 0;
        LMDBLOADER_RETURN_IF_ERROR(in.Varint(name.c_str(), &v));
        datum->encoded = v != 0;
        break;
      }
      default: {  // a field Datum does not declare: skipped, as protobuf does
        const std::string what = "field " + std::to_string(number);
        uint64_t v = 0;
        std::string_view bytes;
        if (wire == kVarint) LMDBLOADER_RETURN_IF_ERROR(in.Varint(what.c_str(), &v));
        if (wire == kFixed64) LMDBLOADER_RETURN_IF_ERROR(in.Skip(8, what));
        if (wire == kFixed32) LMDBLOADER_RETURN_IF_ERROR(in.Skip(4, what));
        if (wire == kLengthDelimited) LMDBLOADER_RETURN_IF_ERROR(in.Bytes(what, &bytes));
        ++datum->unknown_fields;
      }
    }
  }
  auto refuse = [&](const std::string& what) {
    return Status::DecodeError("not a valid Caffe Datum: " + what + " (" + std::to_string(record.size()) +
                               " bytes)");
  };
  if (!has_data && datum->float_data_count == 0) return refuse("it holds neither data nor float_data");
  if (datum->encoded) {
    if (datum->data.empty()) return refuse("encoded, but its data is empty");
    return Status::OK();
  }
  // Raw values: the bytes of data, or when data is empty (Caffe's
  // DataTransformer reads data whenever it is non-empty) the floats.
  const bool bytes = !datum->data.empty();
  const uint64_t held = bytes ? datum->data.size() : datum->float_data_count;
  if (held == 0) return refuse("raw, but its data is empty");
  // Each dimension is below 2^31, so their product may pass 64 bits: it is
  // compared one factor at a time.
  const uint64_t plane = static_cast<uint64_t>(datum->height) * static_cast<uint64_t>(datum->width);
  const bool fits = datum->channels != 0 && held % datum->channels == 0 && held / datum->channels == plane;
  if (!fits)
    return refuse(std::string(bytes ? "raw pixels: data holds " : "float_data holds ") + std::to_string(held) +
                  (bytes ? " bytes" : " floats") + ", not channels x height x width = " +
                  std::to_string(datum->channels) + " x " + std::to_string(datum->height) + " x " +
                  std::to_string(datum->width));
  return Status::OK();
}

}  // namespace lmdbloader
