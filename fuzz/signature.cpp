#include "fuzz/signature.h"

#include <algorithm>

namespace mlasim::fuzz {

std::string Signature(const sim::Violation& v) {
  return sim::ViolationSignature(v);
}

std::vector<std::string> Signatures(const std::vector<sim::Violation>& violations) {
  std::vector<std::string> out;
  out.reserve(violations.size());
  for (const sim::Violation& v : violations) out.push_back(Signature(v));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const sim::Violation* FindSignature(const std::vector<sim::Violation>& violations,
                                    const std::string& signature) {
  for (const sim::Violation& v : violations)
    if (Signature(v) == signature) return &v;
  return nullptr;
}

nlohmann::json ViolationJson(const sim::Violation& v) {
  return {{"kind", sim::ViolationKindName(v.kind)},
          {"class", sim::BugClassLetter(v.bug_class)},
          {"step", v.step},
          {"call", v.call},
          {"buffer", v.buffer},
          {"access", sim::AccessName(v.access)},
          {"rows_past_end", v.rows_past_end},
          {"detail", v.detail}};
}

sim::Violation ViolationWithSignature(const std::string& signature, const std::string& detail) {
  std::string part[5];
  size_t at = 0;
  for (int i = 0; i < 5 && at <= signature.size(); ++i) {
    const size_t bar = i < 4 ? signature.find('|', at) : std::string::npos;
    part[i] = signature.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  sim::Violation v;
  v.step = part[0];
  v.call = part[1];
  v.buffer = part[2];
  // Unknown access or class parts keep the defaults (read, C): the signature still names the bug.
  if (auto a = sim::ParseAccess(part[3], "signature"); a.ok()) v.access = *a;
  if (auto c = sim::ParseBugClass(part[4], "signature"); c.ok()) v.bug_class = *c;
  v.detail = detail;
  return v;
}

std::string ViolationDetail(const sim::Violation& v) {
  return v.detail;
}

}  // namespace mlasim::fuzz
