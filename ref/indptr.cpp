#include "ref/indptr.h"

#include <string>

namespace mlasim::ref {
namespace {

std::string At(std::string_view name, size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

}  // namespace

Status CheckIndptr(const std::vector<int32_t>& v, std::string_view name, IndptrRule rule) {
  if (v.empty()) {
    if (!rule.required) return OkStatus();
    return InvalidArgumentError(std::string(name),
                                "must hold at least one entry (B+1 for B requests)");
  }
  if (rule.starts_at_zero && v[0] != 0)
    return InvalidArgumentError(At(name, 0), "must be 0, got " + std::to_string(v[0]));
  if (v[0] < 0) return InvalidArgumentError(At(name, 0), "must be >= 0");
  // One branch-free pass (the planner checks every request's arrays on every call), then a
  // second one only to name the first offender.
  bool decreases = false;
  for (size_t i = 1; i < v.size(); ++i) decreases |= v[i] < v[i - 1];
  if (!decreases) return OkStatus();
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i] < v[i - 1])
      return InvalidArgumentError(At(name, i), "decreases (" + std::to_string(v[i - 1]) + " -> " +
                                                   std::to_string(v[i]) +
                                                   "): an indptr is cumulative");
  }
  return OkStatus();
}

}  // namespace mlasim::ref
