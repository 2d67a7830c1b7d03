// The _core extension: the C++ library translated to Python, one part a
// concept, each registered here with one call. No logic of its own beyond
// building Python objects: every failure goes through one translator
// (status_translate.cc); reads release the GIL (record_reads.h says when).
#include <pybind11/pybind11.h>

#include "status_error.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  m.doc() = "lmdbloader C++ core (private; use the lmdbloader package)";
  m.attr("__version__") = LMDBLOADER_VERSION;

  lmdbloader::RegisterStatusTranslator(m);
  lmdbloader::RegisterImage(m);
  lmdbloader::RegisterImageRecords(m);
  lmdbloader::RegisterCorpus(m);
  lmdbloader::RegisterInspect(m);
  lmdbloader::RegisterMemory(m);
  lmdbloader::RegisterRing(m);
  lmdbloader::RegisterReader(m);
  lmdbloader::RegisterReports(m);
}
