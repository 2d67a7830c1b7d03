// OptionTable: the machinery behind an options struct's by-name interface
// (ReaderOptionList / SetReaderOption / ReaderOptionValue in options.h, and
// the converter's in convert.h): one entry an option, holding its
// description, how to set it from text and how to read it back. Each
// options struct writes its entries once; listing, setting and reading by
// name are this template's.
#ifndef LMDBLOADER_SRC_BASE_OPTION_TABLE_H_
#define LMDBLOADER_SRC_BASE_OPTION_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lmdbloader/options.h"
#include "lmdbloader/status.h"

namespace lmdbloader {

template <typename Options>
struct OptionEntry {
  OptionInfo info;
  Status (*set)(std::string_view text, Options* o);
  std::string (*get)(const Options& o);
};

template <typename Options>
std::vector<OptionInfo> OptionInfos(const std::vector<OptionEntry<Options>>& entries) {
  std::vector<OptionInfo> out;
  for (const OptionEntry<Options>& e : entries) out.push_back(e.info);
  return out;
}

// A decimal integer in [low, high] into *field; InvalidArgument naming the
// option otherwise (not a number, or out of range, however large).
template <typename T>
Status SetInt(const char* name, std::string_view text, int64_t low, uint64_t high, T* field) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string_view digits = negative ? text.substr(1) : text;
  bool ok = !digits.empty(), overflow = false;
  uint64_t magnitude = 0;
  for (char c : digits) {
    ok = ok && c >= '0' && c <= '9';
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (ok && !overflow && magnitude > (UINT64_MAX - d) / 10) overflow = true;
    if (ok && !overflow) magnitude = magnitude * 10 + d;
  }
  if (!ok)
    return Status::InvalidArgument(std::string(name) + " must be an integer, got '" + std::string(text) + "'");
  const bool in_range = overflow ? false : negative ? low < 0 && magnitude <= static_cast<uint64_t>(-low)
                                 : magnitude <= high && (low <= 0 || magnitude >= static_cast<uint64_t>(low));
  if (!in_range)
    return Status::InvalidArgument(std::string(name) + " must be between " + std::to_string(low) + " and " +
                                   std::to_string(high) + ", got " + std::string(text));
  *field = negative ? static_cast<T>(-static_cast<int64_t>(magnitude)) : static_cast<T>(magnitude);
  return Status::OK();
}

// InvalidArgument naming every known option for an unknown `name`.
template <typename Options>
Status SetOptionByName(const std::vector<OptionEntry<Options>>& entries, std::string_view name,
                       std::string_view value, Options* options) {
  for (const OptionEntry<Options>& e : entries)
    if (name == e.info.name) return e.set(value, options);
  std::string known;
  for (const OptionEntry<Options>& e : entries) known += (known.empty() ? "" : ", ") + std::string(e.info.name);
  return Status::InvalidArgument("unknown option '" + std::string(name) + "' (options: " + known + ")");
}

// "" for an unknown `name`.
template <typename Options>
std::string OptionValueByName(const std::vector<OptionEntry<Options>>& entries, const Options& options,
                              std::string_view name) {
  for (const OptionEntry<Options>& e : entries)
    if (name == e.info.name) return e.get(options);
  return "";
}

}  // namespace lmdbloader

#endif  // LMDBLOADER_SRC_BASE_OPTION_TABLE_H_
