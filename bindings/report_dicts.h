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

// The field list of Struct: (name, key in the command's JSON or None when
// the command does not write it), for checking every front against it.
template <typename Struct>
pybind11::list ReportFieldList() {
  pybind11::list out;
  std::apply(
      [&out](const auto&... field) {
        (out.append(pybind11::make_tuple(field.name, field.command_key ? pybind11::object(pybind11::str(field.command_key))
                                                                       : pybind11::object(pybind11::none()))),
         ...);
      },
      ReportFieldsOf<Struct>::kFields);
  return out;
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_BINDINGS_REPORT_DICTS_H_
