#include "ref/flashinfer/plan_info.h"

#include <fmt/format.h>

namespace mlasim::ref::flashinfer {

bool MLAPlanInfo::operator==(const MLAPlanInfo& o) const {
  return ToVector(*this) == ToVector(o);
}

std::vector<int64_t> ToVector(const MLAPlanInfo& info) {
  std::vector<int64_t> v;
  v.reserve(kMLAPlanInfoNumFields);
  for (const PlanInfoField& f : kMLAPlanInfoFields) v.push_back(info.*f.member);
  return v;
}

StatusOr<MLAPlanInfo> FromVector(const std::vector<int64_t>& vec) {
  if (vec.size() != kMLAPlanInfoNumFields)
    return InvalidArgumentError(
        "plan_info", fmt::format("MLAPlanInfo::FromVector: vec.size() should be {}, but got {}",
                                 kMLAPlanInfoNumFields, vec.size()));
  MLAPlanInfo info;
  for (size_t i = 0; i < kMLAPlanInfoNumFields; ++i) info.*kMLAPlanInfoFields[i].member = vec[i];
  return info;
}

}  // namespace mlasim::ref::flashinfer
