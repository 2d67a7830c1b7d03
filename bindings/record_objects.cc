// msgpack -> Python objects (maps, lists, bytes, ints, floats, strings).
#include "record_objects.h"

#include <string>
#include <string_view>

#include "lmdbloader/msgpack_record.h"
#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

py::object RecordValueToPython(const RecordValue& v) {
  switch (v.type()) {
    case RecordValue::Type::kNil: return py::none();
    case RecordValue::Type::kBool: return py::bool_(v.boolean());
    case RecordValue::Type::kUnsigned:
      return py::reinterpret_steal<py::object>(PyLong_FromUnsignedLongLong(v.unsigned_value()));
    case RecordValue::Type::kSigned:
      return py::reinterpret_steal<py::object>(PyLong_FromLongLong(v.signed_value()));
    case RecordValue::Type::kFloat: return py::float_(v.float_value());
    case RecordValue::Type::kString: {  // UnpackRecord checked the UTF-8
      const std::string_view text = v.bytes();
      PyObject* s = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "strict");
      if (!s) throw py::error_already_set();
      return py::reinterpret_steal<py::object>(s);
    }
    case RecordValue::Type::kBytes: {
      const std::string_view bytes = v.bytes();
      return py::bytes(bytes.data(), bytes.size());
    }
    case RecordValue::Type::kArray: {
      const uint32_t n = v.size();
      py::list list(n);
      for (uint32_t i = 0; i < n; ++i) list[i] = RecordValueToPython(v.element(i));
      return std::move(list);
    }
    case RecordValue::Type::kMap: {
      py::dict dict;
      const uint32_t n = v.size();
      for (uint32_t i = 0; i < n; ++i) dict[RecordValueToPython(v.key(i))] = RecordValueToPython(v.value(i));
      return std::move(dict);
    }
  }
  return py::none();  // not reached: every type is handled above
}

py::object DecodeRecord(const Reader& r, uint64_t index, const char* data, size_t size) {
  UnpackedRecord record;
  const Status s = UnpackRecord(std::string_view(data, size), &record);
  if (!s.ok())
    throw StatusError{Status::DecodeError("cannot decode record " + std::to_string(index) + " of " + r.path() +
                                          " as msgpack: " + s.message())};
  return RecordValueToPython(record.root());
}

}  // namespace lmdbloader
