#include "lmdbloader/msgpack_record.h"

#include "corpus/corpus_format.h"

#include <exception>

namespace lmdbloader {

namespace {

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

}  // namespace

bool UnpackRecord(const char* data, size_t size, msgpack::object_handle* out, std::string* error) {
  // Every element takes at least one byte, every map entry two.
  const size_t n = size > 0xffffffffu ? 0xffffffffu : size;
  msgpack::unpack_limit limit(n, n / 2, n, n, n, kMaxRecordDepth);
  size_t offset = 0;
  try {
    // Reference str/bin bytes in place instead of copying them into the zone.
    *out = msgpack::unpack(
        data, size, offset, [](msgpack::type::object_type, std::size_t, void*) { return true; }, nullptr, limit);
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
  if (offset != size) {
    *error = std::to_string(size - offset) + " bytes follow the msgpack value";
    return false;
  }
  return Check(out->get(), error);
}

}  // namespace lmdbloader
