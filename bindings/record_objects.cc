// msgpack -> Python objects (maps, lists, bytes, ints, floats, strings).
#include "record_objects.h"

#include <msgpack.hpp>

#include <string>

#include "lmdbloader/msgpack_record.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

py::object ToPython(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL: return py::none();
    case msgpack::type::BOOLEAN: return py::bool_(o.via.boolean);
    case msgpack::type::POSITIVE_INTEGER:
      return py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(o.via.u64));
    case msgpack::type::NEGATIVE_INTEGER:
      return py::reinterpret_steal<py::object>(PyLong_FromLongLong(o.via.i64));
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return py::float_(o.via.f64);
    case msgpack::type::STR: {  // UnpackRecord checked the UTF-8
      PyObject* s = PyUnicode_DecodeUTF8(o.via.str.ptr, o.via.str.size, "strict");
      if (!s) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(s);
    }
    case msgpack::type::BIN: return py::bytes(o.via.bin.ptr, o.via.bin.size);
    case msgpack::type::ARRAY: {
      py::list list(o.via.array.size);
      for (uint32_t i = 0; i < o.via.array.size; ++i) list[i] = ToPython(o.via.array.ptr[i]);
      return std::move(list);
    }
    case msgpack::type::MAP: {
      py::dict dict;
      for (uint32_t i = 0; i < o.via.map.size; ++i)
        dict[ToPython(o.via.map.ptr[i].key)] = ToPython(o.via.map.ptr[i].val);
      return std::move(dict);
    }
    default:
      throw StatusError{Status::DecodeError("msgpack extension types are not supported")};
  }
}

}  // namespace

py::object DecodeRecord(const Reader& r, uint64_t index, const char* data, size_t size) {
  msgpack::object_handle oh;
  std::string error;
  if (!UnpackRecord(data, size, &oh, &error))
    throw StatusError{Status::DecodeError("cannot decode record " + std::to_string(index) + " of " + r.path() +
                                          " as msgpack: " + error)};
  return ToPython(oh.get());
}

}  // namespace lmdbloader
