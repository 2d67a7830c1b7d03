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

// Depth is already bounded by the unpack limit, so this recursion is too.
bool Check(const msgpack::object& o, std::string* error) {
  switch (o.type) {
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

RecordValue RecordValue::Of(const void* node) {
  const msgpack::object& o = *static_cast<const msgpack::object*>(node);
  RecordValue v;
  switch (o.type) {
    case msgpack::type::BOOLEAN:
      v.type_ = Type::kBool;
      v.scalar_.boolean = o.via.boolean;
      break;
    case msgpack::type::POSITIVE_INTEGER:
      v.type_ = Type::kUnsigned;
      v.scalar_.u = o.via.u64;
      break;
    case msgpack::type::NEGATIVE_INTEGER:
      v.type_ = Type::kSigned;
      v.scalar_.i = o.via.i64;
      break;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      v.type_ = Type::kFloat;
      v.scalar_.f = o.via.f64;
      break;
    case msgpack::type::STR:
    case msgpack::type::BIN: {
      const std::string_view bytes = o.type == msgpack::type::STR ? std::string_view(o.via.str.ptr, o.via.str.size)
                                                                  : std::string_view(o.via.bin.ptr, o.via.bin.size);
      // msgpack-python before 1.0 packed bytes as str (CoCLR's published
      // LMDBs): a str that is not UTF-8 text is those bytes.
      v.type_ = o.type == msgpack::type::STR && IsUtf8(bytes) ? Type::kString : Type::kBytes;
      v.scalar_.data = bytes.data();
      v.size_ = static_cast<uint32_t>(bytes.size());
      break;
    }
    case msgpack::type::ARRAY:
      v.type_ = Type::kArray;
      v.scalar_.children = o.via.array.ptr;
      v.size_ = o.via.array.size;
      break;
    case msgpack::type::MAP:
      v.type_ = Type::kMap;
      v.scalar_.children = o.via.map.ptr;
      v.size_ = o.via.map.size;
      break;
    default:  // NIL; EXT never passes Check
      break;
  }
  return v;
}

RecordValue RecordValue::element(uint32_t i) const {
  if (type_ != Type::kArray || i >= size_) return RecordValue();
  return Of(&static_cast<const msgpack::object*>(scalar_.children)[i]);
}

RecordValue RecordValue::key(uint32_t i) const {
  if (type_ != Type::kMap || i >= size_) return RecordValue();
  return Of(&static_cast<const msgpack::object_kv*>(scalar_.children)[i].key);
}

RecordValue RecordValue::value(uint32_t i) const {
  if (type_ != Type::kMap || i >= size_) return RecordValue();
  return Of(&static_cast<const msgpack::object_kv*>(scalar_.children)[i].val);
}

UnpackedRecord::UnpackedRecord() : rep_(new Rep) {}
UnpackedRecord::~UnpackedRecord() = default;
UnpackedRecord::UnpackedRecord(UnpackedRecord&&) noexcept = default;
UnpackedRecord& UnpackedRecord::operator=(UnpackedRecord&&) noexcept = default;

RecordValue UnpackedRecord::root() const {
  // A default object_handle holds a NIL object; a moved-from record holds none.
  return rep_ ? RecordValue::Of(&rep_->handle.get()) : RecordValue();
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
