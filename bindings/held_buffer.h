// A Python object's buffer, held (with a reference to its owner) until
// released: valid while the GIL is released, whatever happens to the object
// meanwhile. The one way the bindings hold a Python buffer: records to
// parse, images to decode, tensors to read or decode into.
#ifndef LMDBLOADER_BINDINGS_HELD_BUFFER_H_
#define LMDBLOADER_BINDINGS_HELD_BUFFER_H_

#include <pybind11/pybind11.h>

#include <cstddef>
#include <string>
#include <string_view>

namespace lmdbloader {

class HeldBuffer {
 public:
  // `flags`: PyBUF_C_CONTIGUOUS, or with PyBUF_WRITABLE for a destination;
  // an object without such a buffer is a TypeError naming `what` and its type.
  HeldBuffer(const pybind11::handle& obj, int flags, const std::string& what) {
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      throw pybind11::type_error(what + " must support the buffer protocol" +
                                 ((flags & PyBUF_WRITABLE) ? " (writable, C-contiguous)" : " (contiguous)") +
                                 ", not " + Py_TYPE(obj.ptr())->tp_name);
    }
    held_ = true;
  }
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  HeldBuffer(HeldBuffer&& o) noexcept : view_(o.view_), held_(o.held_) { o.held_ = false; }
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  HeldBuffer& operator=(HeldBuffer&&) = delete;

  const Py_buffer& view() const { return view_; }
  char* data() const { return static_cast<char*>(view_.buf); }
  size_t size() const { return static_cast<size_t>(view_.len); }
  std::string_view bytes() const { return {data(), size()}; }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_HELD_BUFFER_H_
