// The contract seam (tools/io/case_contracts.h). No contract is wired in yet: every call is
// reported as not checked, with the reason.
#include "tools/io/case_contracts.h"

namespace mlasim::io {

ContractCheckResult CheckCaseContracts(const CaseManifest& manifest, const CasePlanner& planner) {
  (void)planner;
  ContractCheckResult r;
  r.checked = false;
  r.reason = "no kernel contract is wired to case directories yet (call '" + manifest.call +
             "'); see tools/io/case_contracts.h";
  return r;
}

}  // namespace mlasim::io
