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

Status ParseIoEngine(std::string_view text, IoEngine* engine) {
  if (text == "auto") *engine = IoEngine::kAuto;
  else if (text == "io_uring") *engine = IoEngine::kIoUring;
  else if (text == "threads") *engine = IoEngine::kThreads;
  else if (text == "sync") *engine = IoEngine::kSync;
  else
    return Status::InvalidArgument("invalid io_engine '" + std::string(text) +
                                   "' (expected auto, io_uring, threads or sync)");
  return Status::OK();
}

const char* IoEngineName(IoEngine engine) {
  switch (engine) {
    case IoEngine::kAuto: return "auto";
    case IoEngine::kIoUring: return "io_uring";
    case IoEngine::kThreads: return "threads";
    case IoEngine::kSync: return "sync";
  }
  return "unknown";
}

Status ParseCachePolicy(std::string_view text, CachePolicy* policy) {
  if (text == "auto") *policy = CachePolicy::kAuto;
  else if (text == "fill") *policy = CachePolicy::kFill;
  else if (text == "exact") *policy = CachePolicy::kExact;
  else if (text == "drop") *policy = CachePolicy::kDrop;
  else
    return Status::InvalidArgument("invalid cache policy '" + std::string(text) +
                                   "' (expected auto, fill, exact or drop)");
  return Status::OK();
}

const char* CachePolicyName(CachePolicy policy) {
  switch (policy) {
    case CachePolicy::kAuto: return "auto";
    case CachePolicy::kFill: return "fill";
    case CachePolicy::kExact: return "exact";
    case CachePolicy::kDrop: return "drop";
  }
  return "unknown";
}

Status ValidateOptions(const ReaderOptions& options) {
  if (options.queue_depth < 1 || options.queue_depth > 4096)
    return Status::InvalidArgument("queue_depth must be between 1 and 4096, got " +
                                   std::to_string(options.queue_depth));
  if (static_cast<unsigned>(options.io_engine) > static_cast<unsigned>(IoEngine::kSync))
    return Status::InvalidArgument("invalid io_engine");
  if (static_cast<unsigned>(options.cache_policy) > static_cast<unsigned>(CachePolicy::kDrop))
    return Status::InvalidArgument("invalid cache policy");
  if (options.mmap_window < (1u << 16))
    return Status::InvalidArgument("mmap_window must be at least 64KiB, got " +
                                   std::to_string(options.mmap_window));
  if (options.mode != AccessMode::kAuto && options.mode != AccessMode::kPread &&
      options.mode != AccessMode::kMmap)
    return Status::InvalidArgument("invalid access mode");
  return Status::OK();
}

}  // namespace lmdbloader
