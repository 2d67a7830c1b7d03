// What the parts of the _core extension share: a non-OK Status travels to
// the module's one exception translator (core_module.cc) as a StatusError.
#ifndef LMDBLOADER_BINDINGS_STATUS_ERROR_H_
#define LMDBLOADER_BINDINGS_STATUS_ERROR_H_

#include <pybind11/pybind11.h>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Carries a non-OK Status to the translator.
struct StatusError {
  Status status;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}

// Adds the image functions (image_module.cc) to the module.
void RegisterImage(pybind11::module_& m);

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_STATUS_ERROR_H_
