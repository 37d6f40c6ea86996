#include "sim/known_bugs.h"

namespace mlasim::sim {
namespace {

using K = ViolationKind;

// The registry. Sources: docs/findings.md (numbered entries), docs/seed-fault.md, the engine
// flow of atom-mtp-flow.md §4-§6 (docs/engine-flow.md).
std::vector<KnownBug> Build() {
  std::vector<KnownBug> v;
  v.push_back({"atom-sparse-mtp-plan-over-running-tokens",
               BugClass::kA,
               "ATOM #2715",
               "atom-2026-11",
               "the founding fault: draft step 0 reuses the sparse per-token MTP plan built over "
               "the graph-padded tokens with q and o of the scheduled tokens",
               {{K::kOutOfBounds},
                {"draft_step_0|sparse_decode|q|*|*", "draft_step_0|sparse_decode|o|*|*"}}});
  v.push_back({"atom-2715-plan-rows-guard",
               BugClass::kA,
               "ATOM #2715",
               "atom-2026-11",
               "the #2715 guard refuses a decode whose plan covers more rows than its q: the "
               "founding fault's condition, stopped before any memory access",
               {{K::kGuardRefused}, {}}});
  v.push_back({"atom-dense-draft-step0-reuses-main-plan",
               BugClass::kA,
               "docs/findings.md #2 (atom-mtp-flow.md §6 row D0b')",
               "",
               "dense MLA draft step 0 reuses the main plan over R requests x Q rows with q and o "
               "of the scheduled rows; #2715 fixes the sparse plan only",
               {{K::kOutOfBounds},
                {"draft_step_0|dense_decode|q|*|*", "draft_step_0|dense_decode|o|*|*"}}});
  v.push_back({"atom-dcp-rebuild-inputs-unsliced",
               BugClass::kA,
               "ATOM #2715",
               "atom-2026-11",
               "under DCP the per-layer sparse rebuild gets cu_seqlens_q and last-page lengths of "
               "the padded batch with kv_indptr of the real one (row D0c)",
               {{K::kPlanInvalid}, {}, "plan_invalid:inconsistent_batch"}});
  v.push_back({"decode-update-reads-num-reject-tokens-past-b",
               BugClass::kG,
               "docs/findings.md #3 (atom-mtp-flow.md §5)",
               "",
               "decode_update reads num_reject_tokens past its B entries when the target plan "
               "covers R > B batches",
               {{K::kPlannerInputRead}, {"*|*|num_reject_tokens|*|*"}}});
  v.push_back({"decode-update-unsupported-plan",
               BugClass::kH,
               "docs/findings.md #4 (aiter-mla-metadata.md §9.3)",
               "",
               "decode_update patches a plan it cannot update (another fold decision than the "
               "planner's, or per-token q tiles); everything at draft steps >= 1 follows from it",
               {{}, {}, "", KnownBugWhen::kUpdateHazardLater}});
  v.push_back({"decode-update-on-paged-plan",
               BugClass::kH,
               "docs/findings.md #7 (aiter-mla-metadata.md §9.2)",
               "",
               "decode_update patches a dense plan over pages of more than one token (aiter "
               "asserts page_size == 1): it adds tokens to lengths counted in pages, so the last "
               "piece starts before its request; everything at draft steps >= 1 follows from it",
               {{}, {}, "", KnownBugWhen::kPagedUpdateLater}});
  v.push_back({"dcp-token-without-local-kv",
               BugClass::kB,
               "docs/findings.md #5",
               "",
               "with DCP a token that owns no KV on this rank is a zero-KV work item; OPUS and HK "
               "write nothing for it, so its o/LSE rows stay stale for the cross-rank merge "
               "(the replay's unwritten rows; the engine-step numerics' never-written rows)",
               {{K::kUnwrittenOutput, K::kPoisonedOutput}, {"*|*|*|write|B"}, "",
                KnownBugWhen::kDcp}});
  v.push_back(
      {"sparse-main-plan-sized-is-sparse",
       BugClass::kD,
       "docs/findings.md #6",
       "",
       "sparse models size the main plan with is_sparse = True (one-token batches) while "
       "T1 plans Q-token requests: near max_num_seqs the plan outgrows its buffers",
       {{K::kOutOfBounds, K::kPlanInvalid}, {"*|main_plan|*|*|*"}, "", KnownBugWhen::kSparse}});
  return v;
}

bool PartMatches(const std::string& pat, const std::string& s) {
  if (pat == "*") return true;
  if (!pat.empty() && pat.back() == '*')
    return s.compare(0, pat.size() - 1, pat, 0, pat.size() - 1) == 0;
  return pat == s;
}

std::vector<std::string> Parts(const std::string& sig) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t bar = sig.find('|', at);
    out.push_back(sig.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    if (bar == std::string::npos) break;
    at = bar + 1;
  }
  return out;
}

bool WhenHolds(KnownBugWhen w, const Violation& v, const ReplayReport& r) {
  switch (w) {
    case KnownBugWhen::kAlways: return true;
    case KnownBugWhen::kDcp: return r.scenario.parallel.dcp > 1;
    case KnownBugWhen::kSparse: return r.scenario.model.sparse;
    case KnownBugWhen::kUpdateHazardLater:
      return v.step != "verify" && v.step != "draft_step_0" && HasUpdateHazard(r);
    case KnownBugWhen::kPagedUpdateLater:
      return v.step != "verify" && v.step != "draft_step_0" && HasPagedUpdate(r);
  }
  return false;
}

}  // namespace

const std::vector<KnownBug>& KnownBugs() {
  static const std::vector<KnownBug> kAll = Build();
  return kAll;
}

namespace {

// SignatureMatches of a signature already split into its Parts.
bool PartsMatch(const std::string& pattern, const std::vector<std::string>& s) {
  const std::vector<std::string> p = Parts(pattern);
  if (p.size() != s.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (!PartMatches(p[i], s[i])) return false;
  return true;
}

}  // namespace

bool SignatureMatches(const std::string& pattern, const std::string& signature) {
  return PartsMatch(pattern, Parts(signature));
}

bool HasUpdateHazard(const ReplayReport& r) {
  for (const PlanSnapshot& p : r.trace.plans) {
    if (p.plan.update_fold_ratios.empty()) continue;
    if (p.plan.derived.qo_split) return true;
    for (int32_t f : p.plan.update_fold_ratios)
      if (f != p.plan.derived.fold_ratio) return true;
  }
  return false;
}

bool HasPagedUpdate(const ReplayReport& r) {
  for (const PlanSnapshot& p : r.trace.plans)
    if (!p.plan.update_fold_ratios.empty() && p.request.page_size > 1) return true;
  return false;
}

const KnownBug* MatchKnownBug(const Violation& v, const ReplayReport& r) {
  const std::vector<std::string> sig = Parts(ViolationSignature(v));  // split once
  const std::string consequence = ConsequenceText(v);
  for (const KnownBug& k : KnownBugs()) {
    const KnownBugPattern& p = k.pattern;
    bool kind = p.kinds.empty();
    for (ViolationKind x : p.kinds) kind = kind || x == v.kind;
    if (!kind) continue;  // (then nothing else decides: the signatures are not matched)
    bool signature = p.signatures.empty();
    for (const std::string& s : p.signatures) signature = signature || PartsMatch(s, sig);
    if (kind && signature && consequence.compare(0, p.consequence.size(), p.consequence) == 0 &&
        WhenHolds(p.when, v, r))
      return &k;
  }
  return nullptr;
}

std::string KnownBugText(const KnownBug& k) {
  return "known: " + k.name + " (" + k.upstream + "), " +
         (k.fixed_in.empty() ? std::string("open: no profile fixes it") : "fixed in " + k.fixed_in);
}

}  // namespace mlasim::sim
