// A reported struct (lmdbloader/report_fields.h) as a Python dict: every
// field of its list, under the field's name.
#ifndef LMDBLOADER_BINDINGS_REPORT_DICTS_H_
#define LMDBLOADER_BINDINGS_REPORT_DICTS_H_

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "lmdbloader/report_fields.h"

namespace lmdbloader {

template <typename Struct>
pybind11::dict ReportDict(const Struct& s) {
  pybind11::dict d;
  ForEachField(s, [&d](const auto& field, const auto& value) { d[field.name] = value; });
  return d;
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_REPORT_DICTS_H_
