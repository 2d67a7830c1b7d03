// What the parts of the _core extension share: a failure travels to the
// module's one exception translator (status_translate.cc) as a StatusError,
// and each part registers its functions and classes with one call from
// PYBIND11_MODULE (core_module.cc).
#ifndef LMDBLOADER_BINDINGS_STATUS_ERROR_H_
#define LMDBLOADER_BINDINGS_STATUS_ERROR_H_

#include <pybind11/pybind11.h>

#include <string>

#include "lmdbloader/status.h"

namespace lmdbloader {

// Carries a non-OK Status to the translator.
struct StatusError {
  Status status;
};

inline void ThrowIfError(const Status& s) {
  if (!s.ok()) throw StatusError{s};
}

// Runs `work` (a library call that touches no Python object, returning a
// Status) with the GIL released, so that other Python threads run meanwhile.
template <typename Work>
Status WithoutGil(Work&& work) {
  pybind11::gil_scoped_release release;
  return work();
}

// A bad argument the library never sees: ValueError, through the translator.
[[noreturn]] inline void ThrowInvalid(std::string message) {
  throw StatusError{Status::InvalidArgument(std::move(message))};
}

// The parts, each adding its functions and classes to the module.
void RegisterStatusTranslator(pybind11::module_& m);  // status_translate.cc
void RegisterReader(pybind11::module_& m);            // reader_module.cc
void RegisterRing(pybind11::module_& m);              // ring_module.cc
void RegisterCorpus(pybind11::module_& m);            // corpus_module.cc
void RegisterInspect(pybind11::module_& m);           // inspect_module.cc
void RegisterMemory(pybind11::module_& m);            // memory_module.cc
void RegisterImage(pybind11::module_& m);             // image_module.cc
void RegisterImageRecords(pybind11::module_& m);      // image_record_module.cc
void RegisterReports(pybind11::module_& m);           // report_module.cc

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_STATUS_ERROR_H_
