// The runtime's errors are values: a Status (or a StatusOr<T> carrying a
// result) returned up to the API layer, which turns it into the C ABI's
// ggemm_status and the calling thread's last-error message
// (api/src/errors.cpp). The runtime never touches that message itself.
//
// The shape is Status / StatusOr's, but our own: Debian's
// Abseil archives are built as position-dependent code (R_X86_64_TPOFF32 in
// libabsl_base.a's sysinfo.cc.o, R_X86_64_PC32 in str_format_internal) and
// cannot be linked into a shared library, and libggemm.so must need nothing
// new at run time (docs/design.md, "Dependencies").
#pragma once
#include <cstdarg>
#include <string>
#include <utility>

#include "ggemm.h"

namespace ggemm {

class Status {
 public:
  Status() = default;  // OK
  Status(ggemm_status code, std::string message) : code_(code), message_(std::move(message)) {}
  bool ok() const { return code_ == GGEMM_STATUS_SUCCESS; }
  ggemm_status code() const { return code_; }
  const std::string &message() const { return message_; }

 private:
  ggemm_status code_ = GGEMM_STATUS_SUCCESS;
  std::string message_;
};

inline Status OkStatus() { return Status(); }

// A T, or the Status saying why there is none.
template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}            // NOLINT: implicit, as StatusOr
  StatusOr(Status status) : status_(std::move(status)) {}    // NOLINT
  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
  const T &value() const & { return value_; }
  T &value() & { return value_; }
  T &&value() && { return std::move(value_); }
  T &operator*() & { return value_; }
  T *operator->() { return &value_; }

 private:
  Status status_;
  T value_{};
};

// An error with a printf-style message (checked by the compiler).
Status error(ggemm_status code, const char *format, ...) __attribute__((format(printf, 2, 3)));

// A printf-style message from a va_list (error's, and the API layer's fail's).
std::string format_message(const char *format, va_list args);

}  // namespace ggemm

#define GGEMM_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::ggemm::Status ggemm_status_ = (expr);        \
    if (!ggemm_status_.ok()) return ggemm_status_; \
  } while (0)

#define GGEMM_STATUS_CONCAT_INNER_(a, b) a##b
#define GGEMM_STATUS_CONCAT_(a, b) GGEMM_STATUS_CONCAT_INNER_(a, b)
// `lhs = value of expr` when expr (a StatusOr) holds one; else returns its status.
#define GGEMM_ASSIGN_OR_RETURN(lhs, expr) \
  GGEMM_ASSIGN_OR_RETURN_IMPL_(GGEMM_STATUS_CONCAT_(ggemm_statusor_, __LINE__), lhs, expr)
#define GGEMM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
