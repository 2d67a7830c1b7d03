#include "lmdbloader/status.h"

#include <lmdb.h>

#include <cstring>

namespace lmdbloader {

const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk: return "OK";
    case Status::Code::kNotFound: return "NotFound";
    case Status::Code::kInvalidArgument: return "InvalidArgument";
    case Status::Code::kOutOfRange: return "OutOfRange";
    case Status::Code::kIOError: return "IOError";
    case Status::Code::kCorruption: return "Corruption";
    case Status::Code::kUnsupported: return "Unsupported";
    case Status::Code::kLmdbError: return "LmdbError";
    case Status::Code::kDecodeError: return "DecodeError";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

static std::string Describe(std::string_view call, std::string_view path,
                            const char* what) {
  std::string m(call);
  if (!path.empty()) {
    m += ' ';
    m += path;
  }
  m += ": ";
  m += what;
  return m;
}

Status Status::FromErrno(int err, std::string_view call, std::string_view path) {
  return IOError(Describe(call, path, std::strerror(err)), err);
}

Status Status::FromLmdb(int rc, std::string_view call, std::string_view path) {
  if (rc == MDB_SUCCESS) return OK();
  if (rc > 0) return FromErrno(rc, call, path);  // LMDB passes errno through
  const char* what = mdb_strerror(rc);
  switch (rc) {
    case MDB_NOTFOUND:
      return NotFound(Describe(call, path, what));
    case MDB_INVALID:
      return Corruption(Describe(call, path, "not an LMDB file (bad magic or meta page)"))
          .WithReason(Reason::kNotLmdb);
    case MDB_VERSION_MISMATCH:
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
    case MDB_BAD_TXN:
      return Corruption(Describe(call, path, what));
    case MDB_INCOMPATIBLE:
      return InvalidArgument(Describe(call, path, what));
    default:
      return Status(Code::kLmdbError, Describe(call, path, what));
  }
}

}  // namespace lmdbloader
