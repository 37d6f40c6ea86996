#include "ref/status.h"

namespace mlasim {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kInternal: return "INTERNAL";
  }
  return "UNKNOWN";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  if (field_.empty()) return message_;
  return field_ + ": " + message_;
}

void AssertFail(const char* expr, const char* file, int line, const std::string& detail) {
  std::fprintf(stderr,
               "mlasim internal error at %s:%d: assertion `%s` failed: %s\n"
               "This is a bug in mlasim; please report it with the input that triggered it.\n",
               file, line, expr, detail.c_str());
  std::abort();
}

}  // namespace mlasim
