#include "lmdbloader/options.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

namespace lmdbloader {

Status ParseByteSize(std::string_view text, uint64_t* bytes) {
  std::string s(text);
  auto bad = [&] {
    return Status::InvalidArgument("invalid byte size '" + s +
                                   "' (expected e.g. 1048576, 256MiB, 1GiB, 500MB)");
  };
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return bad();
  std::string number = s.substr(0, i);
  std::string unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  char* end = nullptr;
  double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) return bad();
  double scale = 0;
  std::string u;
  for (char c : unit) u += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (u.empty() || u == "b") scale = 1;
  else if (u == "k" || u == "kib") scale = 1024.0;
  else if (u == "m" || u == "mib") scale = 1024.0 * 1024;
  else if (u == "g" || u == "gib") scale = 1024.0 * 1024 * 1024;
  else if (u == "t" || u == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else if (u == "kb") scale = 1e3;
  else if (u == "mb") scale = 1e6;
  else if (u == "gb") scale = 1e9;
  else if (u == "tb") scale = 1e12;
  else return bad();
  double result = value * scale;
  if (result >= 1.8e19) return Status::InvalidArgument("byte size '" + s + "' is too large");
  // "0.4" must not silently mean 0 (unbounded): bytes are whole.
  if (result != std::floor(result))
    return Status::InvalidArgument("byte size '" + s + "' is not a whole number of bytes");
  *bytes = static_cast<uint64_t>(result);
  return Status::OK();
}

Status ParseAccessMode(std::string_view text, AccessMode* mode) {
  if (text == "auto") *mode = AccessMode::kAuto;
  else if (text == "pread") *mode = AccessMode::kPread;
  else if (text == "mmap") *mode = AccessMode::kMmap;
  else
    return Status::InvalidArgument("invalid mode '" + std::string(text) +
                                   "' (expected auto, pread or mmap)");
  return Status::OK();
}

const char* AccessModeName(AccessMode mode) {
  switch (mode) {
    case AccessMode::kAuto: return "auto";
    case AccessMode::kPread: return "pread";
    case AccessMode::kMmap: return "mmap";
  }
  return "unknown";
}

Status ValidateOptions(const ReaderOptions& options) {
  if (options.mmap_window < (1u << 16))
    return Status::InvalidArgument("mmap_window must be at least 64KiB, got " +
                                   std::to_string(options.mmap_window));
  if (options.mode != AccessMode::kAuto && options.mode != AccessMode::kPread &&
      options.mode != AccessMode::kMmap)
    return Status::InvalidArgument("invalid access mode");
  return Status::OK();
}

}  // namespace lmdbloader
