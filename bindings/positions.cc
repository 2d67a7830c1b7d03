#include "positions.h"

#include <string>

#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

uint64_t Position(const Reader& r, const py::handle& index) {
  PyObject* number = PyNumber_Index(index.ptr());
  if (!number) {
    PyErr_Clear();
    throw py::type_error(std::string("indices must be integers, not ") + Py_TYPE(index.ptr())->tp_name);
  }
  py::object owner = py::reinterpret_steal<py::object>(number);
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
  const int64_t n = static_cast<int64_t>(r.size());
  const int64_t i = overflow ? -1 : value < 0 ? value + n : value;
  if (overflow || i < 0 || i >= n)
    throw StatusError{Status::OutOfRange("index " + py::str(owner).cast<std::string>() + " out of range for " +
                                         r.path() + " (" + std::to_string(n) + " records)")};
  return static_cast<uint64_t>(i);
}

std::vector<uint64_t> Positions(const Reader& r, const py::iterable& indices) {
  std::vector<uint64_t> out;
  for (py::handle index : indices) out.push_back(Position(r, index));
  return out;
}

std::vector<uint64_t> ValueSizes(const Reader& r, const std::vector<uint64_t>& pos) {
  std::vector<uint64_t> sizes(pos.size());
  ThrowIfError(r.ValueSizes(pos.data(), pos.size(), sizes.data()));
  return sizes;
}

}  // namespace lmdbloader
