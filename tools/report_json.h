// The command's JSON of a reported struct: the fields its list
// (lmdbloader/report_fields.h) marks for the command, under their keys.
#ifndef LMDBLOADER_TOOLS_REPORT_JSON_H_
#define LMDBLOADER_TOOLS_REPORT_JSON_H_

#include <nlohmann/json.hpp>

#include "lmdbloader/report_fields.h"

namespace lmdbloader {

// Adds to the object `out` each field of `s` that the command reports; a key
// the command already wrote (its own figure of the run) is kept.
template <typename Struct>
void AddReportFields(const Struct& s, nlohmann::json* out) {
  ForEachField(s, [out](const auto& field, const auto& value) {
    if (field.command_key != nullptr && !out->contains(field.command_key)) (*out)[field.command_key] = value;
  });
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_TOOLS_REPORT_JSON_H_
