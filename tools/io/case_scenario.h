// File: tools/io/case_scenario.h
//
// `mlasim check CASE_DIR --scenario-out FILE` (issue 14): the engine step (sim/scenario.h, the
// format `mlasim replay` reads) that reproduces a captured decode call. The captured planner
// request gives the batch (real requests: the leading ones with KV; padding: the trailing zero-KV
// requests the engine pads the graph batch with, atom-mtp-flow.md §2), the rank's heads, MTP K
// (max_seqlen_qo - 1), the page size, dtypes, target, revision, CU count and planner knobs; q and
// o give the row counts and widths as allocated; config.kernel / config.contract / --contract the
// kernel; config.engine.tp and config.engine.profile the parallelism and the engine preset.
#pragma once

#include <string>

#include "ref/planner.h"
#include "ref/status.h"
#include "sim/scenario.h"
#include "tools/io/case_contracts.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"

namespace mlasim::io {

struct CaseScenario {
  sim::Scenario scenario;
  // The call of the replayed step that is the captured call ("draft_step_0.dense_decode"), and
  // whether the scenario states the captured q / o rows as an override of that call (docs/
  // scenario.md "calls") because the engine's own step allocates other row counts there.
  std::string call;
  bool overridden = false;
  int32_t real_requests = 0, padded_requests = 0;
};

// The scenario of the captured decode call. It is chosen so that replaying it runs the captured
// plan over the captured q / o rows: the step is expanded (sim::ExpandStep) and the first decode
// call whose plan request equals the captured one (qo_indptr, kv_indptr, last-page lengths,
// heads, max_seqlen_qo) and whose q / o rows equal the captured ones is the captured call; when
// none is, the verify step's decode gets the captured q_rows / o_rows as an override.
// Errors (InvalidArgument, exit 2), each naming "CASE/manifest.json:FIELD" and why: no planner
// request ("config.planner" / "tensors.kv_indptr"), a reduce call ("call"), KV heads other than 1,
// non-uniform qo_indptr ("tensors.qo_indptr"), q and KV dtypes that differ
// ("config.planner.q_dtype"), a zero-KV request before a request with KV
// ("tensors.kv_indptr"), max_seqlen_qo above 8 ("config.planner.max_seqlen_qo"), an unknown
// config.engine.profile or a tp that does not fit ("config.engine.tp"), a kernel contract that
// does not resolve (as CheckCaseContracts), and the scenario's own validation (sim::Replay's).
StatusOr<CaseScenario> ScenarioFromCase(const CaseFiles& files, const CaseManifest& manifest,
                                        const CasePlanner& planner, ref::PlannerChoice choice,
                                        const CaseContractOptions& options = {});

}  // namespace mlasim::io
