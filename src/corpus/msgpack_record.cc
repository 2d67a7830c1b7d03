#include "lmdbloader/msgpack_record.h"

#include <msgpack.hpp>

#include <exception>
#include <string>

#include "corpus/corpus_format.h"

namespace lmdbloader {

struct UnpackedRecord::Rep {
  msgpack::object_handle handle;
};

namespace {

const msgpack::object kNil;  // what out-of-type and out-of-range accessors point to

const msgpack::object& Object(const void* p) { return *static_cast<const msgpack::object*>(p); }

// Depth is already bounded by the unpack limit, so this recursion is too.
bool Check(const msgpack::object& o, std::string* error) {
  switch (o.type) {
    case msgpack::type::STR:
      if (!IsUtf8(std::string_view(o.via.str.ptr, o.via.str.size))) {
        *error = "a string is not valid UTF-8";
        return false;
      }
      return true;
    case msgpack::type::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i)
        if (!Check(o.via.array.ptr[i], error)) return false;
      return true;
    case msgpack::type::MAP:
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object& key = o.via.map.ptr[i].key;
        // Keys become Python dict keys: containers cannot be (unhashable).
        if (key.type == msgpack::type::ARRAY || key.type == msgpack::type::MAP) {
          *error = "a map key is an array or a map";
          return false;
        }
        if (!Check(key, error) || !Check(o.via.map.ptr[i].val, error)) return false;
      }
      return true;
    case msgpack::type::EXT:
      *error = "msgpack extension types are not supported";
      return false;
    default:
      return true;
  }
}

// The unpack itself, with msgpack-cxx's exceptions turned into the rule broken.
bool Unpack(std::string_view data, msgpack::object_handle* out, std::string* error) {
  // Every element takes at least one byte, every map entry two.
  const size_t n = data.size() > 0xffffffffu ? 0xffffffffu : data.size();
  msgpack::unpack_limit limit(n, n / 2, n, n, n, kMaxRecordDepth);
  size_t offset = 0;
  try {
    // Reference str/bin bytes in place instead of copying them into the zone.
    *out = msgpack::unpack(
        data.data(), data.size(), offset, [](msgpack::type::object_type, std::size_t, void*) { return true; },
        nullptr, limit);
  } catch (const msgpack::depth_size_overflow&) {
    *error = "nested deeper than " + std::to_string(kMaxRecordDepth) + " levels";
    return false;
  } catch (const std::bad_alloc&) {
    *error = "a container is too large";
    return false;
  } catch (const std::exception& e) {
    *error = e.what();
    return false;
  }
  if (offset != data.size()) {
    *error = std::to_string(data.size() - offset) + " bytes follow the msgpack value";
    return false;
  }
  return Check(out->get(), error);
}

}  // namespace

RecordValue::Type RecordValue::type() const {
  switch (Object(object_).type) {
    case msgpack::type::BOOLEAN: return Type::kBool;
    case msgpack::type::POSITIVE_INTEGER: return Type::kUnsigned;
    case msgpack::type::NEGATIVE_INTEGER: return Type::kSigned;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return Type::kFloat;
    case msgpack::type::STR: return Type::kString;
    case msgpack::type::BIN: return Type::kBytes;
    case msgpack::type::ARRAY: return Type::kArray;
    case msgpack::type::MAP: return Type::kMap;
    default: return Type::kNil;  // NIL; EXT never passes Check
  }
}

bool RecordValue::boolean() const {
  const msgpack::object& o = Object(object_);
  return o.type == msgpack::type::BOOLEAN && o.via.boolean;
}

uint64_t RecordValue::unsigned_value() const {
  const msgpack::object& o = Object(object_);
  return o.type == msgpack::type::POSITIVE_INTEGER ? o.via.u64 : 0;
}

int64_t RecordValue::signed_value() const {
  const msgpack::object& o = Object(object_);
  return o.type == msgpack::type::NEGATIVE_INTEGER ? o.via.i64 : 0;
}

double RecordValue::float_value() const {
  const msgpack::object& o = Object(object_);
  return o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64 ? o.via.f64 : 0;
}

std::string_view RecordValue::bytes() const {
  const msgpack::object& o = Object(object_);
  if (o.type == msgpack::type::STR) return std::string_view(o.via.str.ptr, o.via.str.size);
  if (o.type == msgpack::type::BIN) return std::string_view(o.via.bin.ptr, o.via.bin.size);
  return std::string_view();
}

uint32_t RecordValue::size() const {
  const msgpack::object& o = Object(object_);
  if (o.type == msgpack::type::ARRAY) return o.via.array.size;
  if (o.type == msgpack::type::MAP) return o.via.map.size;
  return 0;
}

RecordValue RecordValue::element(uint32_t i) const {
  const msgpack::object& o = Object(object_);
  return RecordValue(o.type == msgpack::type::ARRAY && i < o.via.array.size ? &o.via.array.ptr[i] : &kNil);
}

RecordValue RecordValue::key(uint32_t i) const {
  const msgpack::object& o = Object(object_);
  return RecordValue(o.type == msgpack::type::MAP && i < o.via.map.size ? &o.via.map.ptr[i].key : &kNil);
}

RecordValue RecordValue::value(uint32_t i) const {
  const msgpack::object& o = Object(object_);
  return RecordValue(o.type == msgpack::type::MAP && i < o.via.map.size ? &o.via.map.ptr[i].val : &kNil);
}

UnpackedRecord::UnpackedRecord() : rep_(new Rep) {}
UnpackedRecord::~UnpackedRecord() = default;
UnpackedRecord::UnpackedRecord(UnpackedRecord&&) noexcept = default;
UnpackedRecord& UnpackedRecord::operator=(UnpackedRecord&&) noexcept = default;

RecordValue UnpackedRecord::root() const {
  // A default object_handle holds a NIL object; a moved-from record holds none.
  return RecordValue(rep_ ? &rep_->handle.get() : &kNil);
}

Status UnpackRecord(std::string_view data, UnpackedRecord* out) {
  if (!out->rep_) out->rep_.reset(new UnpackedRecord::Rep);
  std::string error;
  if (!Unpack(data, &out->rep_->handle, &error)) {
    out->rep_->handle = msgpack::object_handle();  // no half-built tree behind root()
    return Status::DecodeError(error);
  }
  return Status::OK();
}

}  // namespace lmdbloader
