// Status: the outcome of an lmdbloader operation.
//
// The C++ core reports failures as values, never as exceptions. A Status is
// either OK or carries a code and a message that names the failing call and
// the file, for example
//   "open /data/train.lmdb/data.mdb: No such file or directory".
// "Not found" (a key that is not in the database) is an expected outcome: it
// has its own code so callers can test for it with IsNotFound().
//
// LMDB return codes and errno values are translated to a Status in exactly one
// place (status.cc), so every call site reports the same way.
//
// Thread safety: a Status is a plain value; distinct objects may be used from
// distinct threads freely.
#ifndef LMDBLOADER_STATUS_H_
#define LMDBLOADER_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace lmdbloader {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kNotFound,         // a key that is not present (expected, not an error)
    kInvalidArgument,  // bad options or arguments from the caller
    kOutOfRange,       // a position past the end
    kIOError,          // a system call failed; sys_errno() says why
    kCorruption,       // not an LMDB file, truncated, corrupted, or stale
    kUnsupported,      // a valid LMDB feature this library does not read
    kLmdbError,        // any other LMDB failure (MDB_READERS_FULL, ...)
    kDecodeError,      // a record's bytes that do not decode (a truncated or corrupt image)
  };

  // What a caller may need beyond the code and the message: compat answers
  // with py-lmdb's exception for these, so it must not parse message text.
  enum class Reason {
    kNone = 0,
    kNotLmdb,     // the file is not an LMDB file at all (kCorruption)
    kLmdbFormat,  // an LMDB data format this library does not read (kUnsupported); detail: the format
    kBatchItem,   // one item of a batch failed; detail: its index in the batch
    kShortRead,   // a read met the end of its file before its bytes (kCorruption): truncated, or the storage
                  // answered short once (a network file system); read again before calling it truncated
  };

  Status() = default;  // OK

  static Status OK() { return Status(); }
  static Status NotFound(std::string message) {
    return Status(Code::kNotFound, std::move(message));
  }
  static Status InvalidArgument(std::string message) {
    return Status(Code::kInvalidArgument, std::move(message));
  }
  static Status OutOfRange(std::string message) {
    return Status(Code::kOutOfRange, std::move(message));
  }
  static Status Corruption(std::string message) {
    return Status(Code::kCorruption, std::move(message));
  }
  static Status Unsupported(std::string message) {
    return Status(Code::kUnsupported, std::move(message));
  }
  static Status DecodeError(std::string message) {
    return Status(Code::kDecodeError, std::move(message));
  }
  static Status IOError(std::string message, int sys_errno = 0) {
    Status s(Code::kIOError, std::move(message));
    s.errno_ = sys_errno;
    return s;
  }

  // "<call> <path>: strerror(err)", code kIOError, sys_errno() == err.
  static Status FromErrno(int err, std::string_view call, std::string_view path);
  // Translates an LMDB return code (or an errno that LMDB passed through).
  // MDB_NOTFOUND -> kNotFound; MDB_INVALID, MDB_CORRUPTED, MDB_PAGE_NOTFOUND,
  // MDB_VERSION_MISMATCH -> kCorruption; errno values -> kIOError.
  static Status FromLmdb(int rc, std::string_view call, std::string_view path);

  // This status with a reason (and its detail) attached.
  Status WithReason(Reason reason, uint32_t detail = 0) const {
    Status s = *this;
    s.reason_ = reason;
    s.reason_detail_ = detail;
    return s;
  }
  // This status with `prefix` put before its message.
  Status WithPrefix(std::string_view prefix) const {
    Status s = *this;
    s.message_.insert(0, prefix);
    return s;
  }
  // This status with `suffix` put after its message.
  Status WithSuffix(std::string_view suffix) const {
    Status s = *this;
    s.message_.append(suffix);
    return s;
  }
  Reason reason() const { return reason_; }
  uint32_t reason_detail() const { return reason_detail_; }

  bool ok() const { return code_ == Code::kOk; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  Code code() const { return code_; }
  int sys_errno() const { return errno_; }
  const std::string& message() const { return message_; }
  // "OK" or "<code name>: <message>".
  std::string ToString() const;
  // Status is [[nodiscard]]: a caller that has nothing to do with a failure
  // (a fuzz harness, which looks only for crashes) says so with this.
  void IgnoreError() const {}

 private:
  Status(Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  Code code_ = Code::kOk;
  int errno_ = 0;
  Reason reason_ = Reason::kNone;
  uint32_t reason_detail_ = 0;
  std::string message_;
};

const char* CodeName(Status::Code code);

}  // namespace lmdbloader

// Returns early from the enclosing function when `expr` is not OK.
#define LMDBLOADER_RETURN_IF_ERROR(expr)            \
  do {                                              \
    ::lmdbloader::Status _lmdbloader_s = (expr);    \
    if (!_lmdbloader_s.ok()) return _lmdbloader_s;  \
  } while (0)

#endif  // LMDBLOADER_STATUS_H_
