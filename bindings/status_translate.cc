// The _core extension's one translation of failures into Python exceptions:
// every part throws a StatusError (ThrowIfError, ThrowInvalid) and this maps
// its code to the exception type the package documents (lmdbloader/errors.py).
#include <pybind11/pybind11.h>

#include <string>

#include "status_error.h"

namespace py = pybind11;

namespace lmdbloader {

namespace {

// A message as Python text: paths in it are the file system's bytes, which
// need not be UTF-8; those bytes show as \xNN escapes.
py::object MessageText(const std::string& m) {
  return py::reinterpret_steal<py::object>(
      PyUnicode_DecodeUTF8(m.data(), static_cast<Py_ssize_t>(m.size()), "backslashreplace"));
}

// Not found -> KeyError, out of range -> IndexError, invalid argument ->
// ValueError, I/O -> OSError (with the errno), the rest lmdbloader.Error
// subclasses. A status's reason rides on the exception as attributes (reason,
// lmdb_format, batch_index), so callers (compat) never parse the message.
void TranslateStatus(const Status& s) {
  py::module_ errors = py::module_::import("lmdbloader.errors");
  py::object text = MessageText(s.message());
  py::object type;
  switch (s.code()) {
    case Status::Code::kNotFound: type = py::reinterpret_borrow<py::object>(PyExc_KeyError); break;
    case Status::Code::kOutOfRange: type = py::reinterpret_borrow<py::object>(PyExc_IndexError); break;
    case Status::Code::kInvalidArgument: type = py::reinterpret_borrow<py::object>(PyExc_ValueError); break;
    case Status::Code::kIOError: type = py::reinterpret_borrow<py::object>(PyExc_OSError); break;
    case Status::Code::kCorruption: type = errors.attr("CorruptedError"); break;
    case Status::Code::kUnsupported: type = errors.attr("UnsupportedError"); break;
    case Status::Code::kDecodeError: type = errors.attr("DecodeError"); break;
    default:
      type = errors.attr("Error");
      text = MessageText(std::string(CodeName(s.code())) + ": " + s.message());
  }
  py::object exc = s.code() == Status::Code::kIOError && s.sys_errno() != 0 ? type(s.sys_errno(), text) : type(text);
  switch (s.reason()) {
    case Status::Reason::kNotLmdb: exc.attr("reason") = "not_lmdb"; break;
    case Status::Reason::kLmdbFormat:
      exc.attr("reason") = "lmdb_format";
      exc.attr("lmdb_format") = s.reason_detail();
      break;
    case Status::Reason::kBatchItem: exc.attr("batch_index") = s.reason_detail(); break;
    case Status::Reason::kShortRead:  // a truncated file, told by its message
    case Status::Reason::kNone: break;
  }
  PyErr_SetObject(type.ptr(), exc.ptr());
}

}  // namespace

void RegisterStatusTranslator(py::module_&) {
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      TranslateStatus(e.status);
    }
  });
}

}  // namespace lmdbloader
