// File: ref/status.h
//
// mlasim's error channel for bad input, after Abseil's Status/StatusOr (house style, see
// docs/design.md): a small fixed set of codes, one factory per code, must-use results.
// Programmer errors (broken internal invariants) use MLASIM_ASSERT instead, which aborts.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace mlasim {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the input itself is malformed or names an unsupported shape
  kFailedPrecondition,  // the input is well formed but the state it needs does not hold
  kOutOfRange,          // an index or size outside what a buffer holds
  // Well formed and meaningful, but above one of mlasim's size limits (ref/limits.h): raising the
  // limit (--limit, MLASIM_LIMITS) runs it. Sweeps (triage, fuzz) count such cases as not run,
  // apart from the shapes aiter itself refuses.
  kResourceExhausted,
  kInternal,  // an mlasim invariant broke: a bug, please report it
};

const char* StatusCodeName(StatusCode code);

// Status: ok, or a code plus the input field it concerns and a reason. `field` is a dotted
// path or a flag name ("input.kv_indptr[3]", "--heads"); `message` says why, in full words.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string field, std::string message)
      : code_(code), field_(std::move(field)), message_(std::move(message)) {}

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }
  // "field: message" (or just the message when no field applies).
  std::string ToString() const;
  void IgnoreError() const {}

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string field_;
  std::string message_;
};

inline Status OkStatus() {
  return Status();
}
inline Status InvalidArgumentError(std::string field, std::string msg) {
  return Status(StatusCode::kInvalidArgument, std::move(field), std::move(msg));
}
inline Status FailedPreconditionError(std::string field, std::string msg) {
  return Status(StatusCode::kFailedPrecondition, std::move(field), std::move(msg));
}
inline Status OutOfRangeError(std::string field, std::string msg) {
  return Status(StatusCode::kOutOfRange, std::move(field), std::move(msg));
}
inline Status ResourceExhaustedError(std::string field, std::string msg) {
  return Status(StatusCode::kResourceExhausted, std::move(field), std::move(msg));
}
// `cause` told in the caller's words: InvalidArgument, unless `cause` is over one of mlasim's
// limits (ResourceExhausted), which stays so, so that a sweep still tells the two apart.
inline Status WrappedError(const Status& cause, std::string field, std::string msg) {
  return Status(
      cause.code() == StatusCode::kResourceExhausted ? cause.code() : StatusCode::kInvalidArgument,
      std::move(field), std::move(msg));
}
inline Status InternalError(std::string field, std::string msg) {
  return Status(StatusCode::kInternal, std::move(field), std::move(msg));
}

// StatusOr<T>: a value or a non-ok Status. operator* / -> are valid only after ok().
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}         // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = InternalError("", "StatusOr built from an ok Status");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& value() { return *value_; }
  const T& value() const { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

[[noreturn]] void AssertFail(const char* expr, const char* file, int line,
                             const std::string& detail);

}  // namespace mlasim

#define MLASIM_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::mlasim::Status mlasim_status_ = (expr);        \
    if (!mlasim_status_.ok()) return mlasim_status_; \
  } while (0)

#define MLASIM_CONCAT_INNER_(a, b) a##b
#define MLASIM_CONCAT_(a, b) MLASIM_CONCAT_INNER_(a, b)
#define MLASIM_ASSIGN_OR_RETURN(lhs, expr)                \
  auto MLASIM_CONCAT_(mlasim_or_, __LINE__) = (expr);     \
  if (!MLASIM_CONCAT_(mlasim_or_, __LINE__).ok())         \
    return MLASIM_CONCAT_(mlasim_or_, __LINE__).status(); \
  lhs = std::move(MLASIM_CONCAT_(mlasim_or_, __LINE__).value())

// Always-on assertion for programmer errors (never for bad input).
#define MLASIM_ASSERT(cond, detail)                                         \
  do {                                                                      \
    if (!(cond)) ::mlasim::AssertFail(#cond, __FILE__, __LINE__, (detail)); \
  } while (0)
