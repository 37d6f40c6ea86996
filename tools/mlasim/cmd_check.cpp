// File: tools/mlasim/cmd_check.cpp — `mlasim check CASE_DIR`: reads a case directory written by
// mlasim.capture (tools/io/case_dir.h), re-plans from the captured planner inputs and diffs the
// captured plan buffers against the re-plan (first diverging element, the host decisions that
// differ, the input that reproduces the captured plan), runs the plan checker on the captured
// buffers, applies the call's kernel contract (the seam in tools/io/case_contracts.h) and
// attributes a fault address (--fault-log) to a captured tensor. Usage: docs/cli.md.
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "ref/sizing.h"
#include "sim/fault.h"
#include "sim/json_input.h"
#include "sim/scenario_json.h"
#include "tools/io/case_contracts.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_numerics.h"
#include "tools/io/case_plan.h"
#include "tools/io/case_scenario.h"
#include "tools/io/plan_buffers.h"
#include "tools/io/request_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"
#include "tools/mlasim/plan_input.h"

namespace mlasim::cli {
namespace {

using nlohmann::json;
constexpr const char* kName = "check";

// Everything `check` found, rendered as text or JSON.
struct PlanSection {
  bool ran = false;
  std::string not_run;  // why, when !ran
  ref::PlanRequest request;
  ref::PlannerChoice choice = ref::PlannerChoice::kAiterDispatch;
  ref::MetadataSizes info_v1;
  ref::Plan reference;  // the re-plan into get_mla_metadata_info_v1's sizes: mlasim's decisions
  std::optional<ref::Plan> captured;
  ref::Plan replanned;     // the re-plan into the captured buffers' sizes, for the diff
  std::string not_diffed;  // why no diff, when !captured
  io::PlanDiff diff;
  std::vector<io::DecisionDifference> observed;
  std::optional<io::Reproduction> reproduction;
  std::vector<std::string> pointer_findings;  // work_metadata_ptrs vs the captured data_ptrs
  std::string pointer_note;
  ref::PlanCheckReport check;
};

// The fault address inside rows a contract finding says the call touches outside a tensor.
struct OverrunHit {
  const io::ContractFinding* finding = nullptr;
  int64_t row = 0, head = -1, column = -1;  // the tensor's row (kernel view); head, column: 3-d
};

struct FaultSection {
  bool given = false;
  sim::FaultReport fault;
  bool attributed = false;
  sim::Attribution at;
  std::string not_attributed;
  std::optional<OverrunHit> overrun;  // set when a contract finding's rows hold the address
};

// --scenario-out: the engine step that reproduces the captured call.
struct ScenarioSection {
  std::string file;  // "" when not asked for
  io::CaseScenario cs;
};

struct CheckReport {
  std::string case_dir;
  io::CaseManifest manifest;
  PlanSection plan;
  io::ContractCheckResult contracts;
  FaultSection fault;
  io::CaseNumericsResult numerics;
  ScenarioSection scenario;
  std::vector<std::string> findings;  // one line each; exit 1 when any
};

// A planner field from the limits or the planner ("cu_count", "kv_indptr[3]", "batch_size") as
// the case names it: config.planner.X for scalars, tensors.X for the arrays.
std::string CaseField(const std::string& manifest, const std::string& field) {
  const std::string base = field.substr(0, field.find_first_of(".["));
  for (const char* a : {"qo_indptr", "kv_indptr", "kv_last_page_lens"})
    if (base == a) return manifest + ":tensors." + field;
  if (base == "batch_size") return manifest + ":tensors.kv_indptr";
  if (base == "planner") return "--planner";
  return manifest + ":config.planner." + field;
}

Status InCase(const Status& st, const std::string& manifest) {
  return st.ok() ? st : InvalidArgumentError(CaseField(manifest, st.field()), st.message());
}

// Planner limits, as `mlasim plan` applies them (tools/mlasim/plan_input.h).
Status Limits(const ref::PlanRequest& r, const ref::PlanDerived& d) {
  MLASIM_RETURN_IF_ERROR(CheckRequestLimits(r));
  return CheckPlannerLimits(r, d);
}

// work_metadata_ptrs holds &work_indptr[0], &work_info[0] (§3.2): compare with the data_ptrs.
void CheckMetadataPointers(const io::CaseManifest& m, const io::CaseFiles& files,
                           const io::CasePlanner& planner, PlanSection& s) {
  if (!planner.work_metadata_ptrs) return;
  const std::vector<uint64_t>& p = *planner.work_metadata_ptrs;
  if (p[0] == 0 && p[1] == 0) {
    s.pointer_note =
        "work_metadata_ptrs holds 0, 0 (mlasim plan --npy's modelled offsets): not "
        "compared with the data_ptrs";
    return;
  }
  const char* names[2] = {"work_indptr", "work_info"};
  for (int i = 0; i < 2; ++i) {
    auto t = io::FindPlannerTensor(m, files, names[i]);
    if (!t.ok() || !*t) continue;
    if ((*t)->data_ptr != p[i])
      s.pointer_findings.push_back(fmt::format(
          "work_metadata_ptrs[{}] is {} but the captured {} is at {}: the kernel reads a plan "
          "other than the captured one",
          i, io::HexAddress(p[i]), (*t)->name, io::HexAddress((*t)->data_ptr)));
  }
}

// Re-plan, diff, decisions, checker. Returns a bad-input Status (exit 2) or ok.
Status RunPlanSection(const io::CaseManifest& m, const io::CaseFiles& files,
                      const io::CasePlanner& planner, ref::PlannerChoice choice, PlanSection& s) {
  const std::string manifest = files.Display(io::kCaseManifestName);
  if (!planner.request) {
    s.not_run = "the case has no " + planner.missing_request;
    return OkStatus();
  }
  s.ran = true;
  s.request = *planner.request;
  s.choice = choice;
  const ref::PlanRequest& r = s.request;
  MLASIM_RETURN_IF_ERROR(InCase(CheckRequestLimits(r), manifest));
  MLASIM_RETURN_IF_ERROR(InCase(ref::ValidatePlanRequest(r), manifest));
  StatusOr<ref::PlanDerived> derived = ref::DecidePlan(r, choice);
  if (!derived.ok()) return InCase(derived.status(), manifest);
  MLASIM_RETURN_IF_ERROR(InCase(CheckPlannerLimits(r, *derived), manifest));
  const int32_t batch = static_cast<int32_t>(r.kv_indptr.size()) - 1;
  StatusOr<ref::MetadataSizes> info = ref::GetMlaMetadataInfoV1(r, batch);
  if (!info.ok()) return InCase(info.status(), manifest);
  MLASIM_RETURN_IF_ERROR(InCase(CheckSizesLimit(*info), manifest));
  s.info_v1 = *info;
  ref::PlannerOptions options;
  options.choice = choice;
  StatusOr<ref::Plan> reference = ref::PlanMlaMetadata(r, options);
  if (!reference.ok()) return InCase(reference.status(), manifest);
  s.reference = std::move(*reference);
  if (!planner.buffers) {
    s.not_diffed = "the case has no " + planner.missing_buffers;
    return OkStatus();
  }
  const io::PlanBufferViews views = planner.views();
  const int64_t total = views.work_indptr.size + views.work_info.size + views.reduce_indptr.size +
                        views.reduce_final_map.size + views.reduce_partial_map.size;
  if (total > ref::Limit(ref::LimitId::kPlanElements))  // the re-plan fills them
    return ref::TooLarge(manifest + ":tensors", total, ref::LimitId::kPlanElements,
                         "the captured plan buffers' int32 element count");
  StatusOr<ref::Plan> captured = io::PlanFromBuffers(r, views, io::kDefaultUnwrittenValue, choice);
  if (!captured.ok())
    return InvalidArgumentError(manifest + ":tensors." + captured.status().field(),
                                captured.status().message());
  s.captured = std::move(*captured);
  StatusOr<ref::Plan> plan = ref::PlanMlaMetadataInto(r, io::SizesOf(*s.captured), options);
  if (!plan.ok()) return InCase(plan.status(), manifest);
  s.replanned = std::move(*plan);
  s.diff = io::DiffPlans(*s.captured, s.replanned);
  if (!s.diff.identical()) {
    s.observed = io::ObservedDecisionDifferences(*s.captured, s.reference);
    s.reproduction = io::FindReproducingInput(r, choice, *s.captured, s.reference, Limits);
  }
  CheckMetadataPointers(m, files, planner, s);
  s.check = ref::CheckPlan(r, *s.captured);
  return OkStatus();
}

Status RunFaultSection(const io::CaseManifest& m, const std::string& log_file, FaultSection& f) {
  StatusOr<std::string> text = sim::ReadTextFile(log_file, "--fault-log");
  if (!text.ok()) return text.status();
  StatusOr<sim::FaultReport> fault = sim::ParseFaultText(*text, "--fault-log");
  if (!fault.ok()) return fault.status();
  if (fault->null_address)
    return InvalidArgumentError("--fault-log",
                                "the fault address is (nil): a null pointer, not an overrun of a "
                                "captured tensor");
  f.given = true;
  f.fault = *fault;
  const json layout = io::CaseLayout(m);
  if (layout.at("allocations").empty()) {
    f.not_attributed = "no captured tensor has a data_ptr and bytes";
    return OkStatus();
  }
  StatusOr<sim::Attribution> at = sim::AttributeAddress(layout, fault->address, "--fault-log");
  if (!at.ok()) {
    f.not_attributed = at.status().message() + " (the faulting buffer was not captured?)";
    return OkStatus();
  }
  f.attributed = true;
  f.at = *at;
  return OkStatus();
}

// Finds the contract finding whose out-of-range rows of a row-major captured tensor hold
// `address`. With a caching allocator (torch's, on CUDA or ROCm) the rows past a tensor's end are
// the next tensor's bytes, and the fault comes where the run crosses into unmapped memory: the
// address is attributed to the access that goes out of range, not to the tensor it lands in.
std::optional<OverrunHit> FaultInOverrun(const io::CaseManifest& m,
                                         const std::vector<io::ContractFinding>& findings,
                                         uint64_t address) {
  for (const io::ContractFinding& c : findings) {
    for (const io::CaseTensor& t : m.tensors) {
      if (t.name != c.tensor || t.data_ptr == 0 || t.shape.empty() || t.strides[0] <= 0)
        continue;
      const int64_t row_bytes = t.strides[0] * t.itemsize;
      const int64_t offset = static_cast<int64_t>(address - t.data_ptr);  // two's complement
      const int64_t row = offset >= 0 ? offset / row_bytes : -((-offset + row_bytes - 1) / row_bytes);
      if (row < c.first_row || row >= c.end_row) continue;
      OverrunHit hit{&c, row, -1, -1};
      const int64_t within = offset - row * row_bytes;
      if (t.shape.size() == 3 && t.strides[2] == 1 && t.strides[1] == t.shape[2] &&
          t.shape[2] > 0) {
        hit.head = within / (t.shape[2] * t.itemsize);
        hit.column = within % (t.shape[2] * t.itemsize) / t.itemsize;
      }
      return hit;
    }
  }
  return std::nullopt;
}

std::string OverrunSentence(const FaultSection& f, const std::string& call) {
  const OverrunHit& h = *f.overrun;
  const io::ContractFinding& c = *h.finding;
  const std::string where = h.head >= 0 ? fmt::format(" (head {}, column {})", h.head, h.column)
                                        : std::string();
  const bool under = c.rows_before_start > 0;
  return fmt::format("{} is row {}{} of {}, one of the rows {}..{} {} its {} that {} {}: the "
                     "contract finding above reaches the fault",
                     io::HexAddress(f.fault.address), h.row, where, c.tensor, c.first_row,
                     c.end_row - 1, under ? "before" : "past", under ? "start" : "end", call,
                     c.access == "read" ? "reads" : "writes");
}

void AttributeToOverrun(const io::CaseManifest& m, const io::ContractCheckResult& contracts,
                        FaultSection& f) {
  if (f.given && !f.fault.null_address)
    f.overrun = FaultInOverrun(m, contracts.findings, f.fault.address);
}

// The attribution in the captured tensors' terms (sim::Attribution's own text speaks of mapped
// pages, which a case does not record).
std::string FaultSentence(const FaultSection& f) {
  const sim::Attribution& a = f.at;
  const std::string addr = io::HexAddress(f.fault.address);
  const std::string where = a.head >= 0
                                ? fmt::format("row {}, head {}, column {}", a.row, a.head, a.column)
                                : fmt::format("row {}, byte {} of the row", a.row, a.column);
  if (a.before_start)
    return fmt::format("{} is {} bytes before the start of {} = row {} (an underflow)", addr,
                       -a.offset, a.buffer, a.row);
  if (a.inside)
    return fmt::format("{} is inside {} at byte {} = {} ({} rows)", addr, a.buffer, a.offset, where,
                       a.rows);
  std::string s = fmt::format("{} is {} bytes past the end of {} ({} rows) = {}", addr,
                              a.bytes_past_end, a.buffer, a.rows, where);
  if (!a.next_buffer.empty())
    s += fmt::format("; the next captured tensor, {}, starts {} bytes above", a.next_buffer,
                     a.bytes_before_next);
  return s;
}

void CollectFindings(CheckReport& r) {
  const PlanSection& p = r.plan;
  if (p.captured && !p.diff.identical()) {
    for (const io::PlanStorePastEnd& s : p.diff.stores_past_end)
      r.findings.push_back(
          fmt::format("the re-plan makes {} store(s) past the end of the "
                      "captured {} ({} elements)",
                      s.stores, s.buffer, s.captured_size));
    if (p.diff.first)
      r.findings.push_back("the captured plan differs from mlasim's re-plan: " +
                           p.diff.first->text);
  }
  for (const std::string& s : p.pointer_findings) r.findings.push_back(s);
  for (const ref::PlanDiagnostic& d : p.check.diagnostics)
    if (d.severity == ref::Severity::kError)
      r.findings.push_back(std::string("plan check: ") + ref::PlanDiagName(d.code) + ": " +
                           d.message);
  for (const io::ContractFinding& c : r.contracts.findings)
    r.findings.push_back("contract: " + c.text);
  if (r.fault.overrun)
    r.findings.push_back("fault: " + OverrunSentence(r.fault, r.manifest.call));
  else if (r.fault.attributed && !r.fault.at.inside)
    r.findings.push_back("fault: " + FaultSentence(r.fault));
  for (const io::OutputNumerics* n : {&r.numerics.o, &r.numerics.lse})
    if (r.numerics.ran && !n->tensor.empty() && !n->passed)
      r.findings.push_back(fmt::format(
          "numerics: {} differs from the reference in {} of {} real rows (first: {})", n->tensor,
          n->rows_differing_count, n->rows_compared, n->rows_differing.front()));
}

std::string Verdict(const CheckReport& r) {
  if (!r.findings.empty()) return "failed";
  const bool any =
      r.plan.captured.has_value() || r.contracts.checked || r.fault.given || r.numerics.ran;
  return any ? "ok" : "nothing_checked";
}

std::string Csv(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string DecisionLine(const ref::PlanDerived& d) {
  return fmt::format(
      "num_clusters {}  fold_ratio {}  pack {}  qo_split {}  planner {}  num_splits {}  works {}  "
      "payload {}",
      d.num_clusters, d.fold_ratio, d.packed_qo_len_per_wg, d.qo_split ? "yes" : "no",
      d.parallel_planner_used ? "parallel" : "serial", d.num_splits, d.num_works, d.payload);
}

void PrintPlanText(std::ostream& out, const PlanSection& p) {
  if (!p.ran) {
    out << "plan: not checked: " << p.not_run << '\n';
    return;
  }
  const ref::PlanRequest& r = p.request;
  out << fmt::format(
      "plan: re-planned from config.planner and the captured arrays\n"
      "  request    {} requests, {} q heads x {} KV heads, max_seqlen_qo {}, page {}, "
      "granularity {}, {}/{}, {} {}, cu_count {}\n"
      "  decisions  {}\n",
      r.kv_indptr.size() - 1, r.heads_per_head_k, r.num_heads_k, r.max_seqlen_qo, r.page_size,
      r.kv_granularity, ref::DTypeName(r.q_dtype), ref::DTypeName(r.kv_dtype),
      ref::ArchName(r.target), ref::RevisionName(r.revision), ref::EffectiveCuCount(r),
      DecisionLine(p.reference.derived));
  if (!p.captured) {
    out << "  diff       not run: " << p.not_diffed << '\n';
    return;
  }
  const ref::MetadataSizes c = io::SizesOf(*p.captured);
  out << fmt::format(
      "  sizes      work_indptr {}/{}  work_info {}/{} rows  reduce_indptr {}/{}  "
      "reduce_final_map {}/{} rows  reduce_partial_map {}/{}  (captured/info_v1)\n",
      c.work_indptr, p.info_v1.work_indptr, c.work_info_rows, p.info_v1.work_info_rows,
      c.reduce_indptr, p.info_v1.reduce_indptr, c.reduce_final_map_rows,
      p.info_v1.reduce_final_map_rows, c.reduce_partial_map, p.info_v1.reduce_partial_map);
  if (p.diff.identical()) {
    out << fmt::format("  diff       identical: the {} cells the planner writes agree\n",
                       p.diff.cells_compared);
  } else {
    for (const io::PlanStorePastEnd& s : p.diff.stores_past_end)
      out << fmt::format(
          "  diff       the re-plan makes {} store(s) past the end of the "
          "captured {} ({} elements; the first at index {})\n",
          s.stores, s.buffer, s.captured_size, s.first_index);
    if (p.diff.first)
      out << fmt::format("  diff       {} of {} cells differ; first: {}\n", p.diff.cells_differing,
                         p.diff.cells_compared, p.diff.first->text);
    for (const io::DecisionDifference& d : p.observed)
      out << "  decision   seen in the captured buffers: " << d.text << '\n';
    if (p.reproduction) {
      out << fmt::format("  reproduced with {} = {} (the case says {})\n", p.reproduction->input,
                         p.reproduction->value, p.reproduction->was);
      for (const io::DecisionDifference& d : p.reproduction->decisions)
        out << "  decision   " << d.text << '\n';
    } else {
      out << "  not reproduced by changing cu_count, the planner dispatch, the q/kv dtypes or the "
             "revision\n";
    }
  }
  if (!p.pointer_note.empty()) out << "  pointers   " << p.pointer_note << '\n';
  for (const std::string& s : p.pointer_findings) out << "  pointers   " << s << '\n';
  int64_t errors = 0, warnings = 0;
  for (const ref::PlanDiagnostic& d : p.check.diagnostics)
    (d.severity == ref::Severity::kError ? errors : warnings) += 1;
  out << fmt::format("  check      {} ({} error{}, {} warning{})\n", errors ? "FAILED" : "ok",
                     errors, errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
  for (const ref::PlanDiagnostic& d : p.check.diagnostics)
    out << fmt::format("    {} {}: {}\n", d.severity == ref::Severity::kError ? "error" : "warning",
                       ref::PlanDiagName(d.code), d.message);
}

std::string RowsText(const io::OutputNumerics& n) {
  std::string s;
  for (int64_t row : n.rows_differing) s += (s.empty() ? "" : ", ") + std::to_string(row);
  if (n.rows_differing_count > static_cast<int64_t>(n.rows_differing.size())) s += ", ...";
  return s;
}

std::string OutputText(const io::OutputNumerics& n) {
  std::string s = fmt::format(
      "  {:<4} max_abs {:.3g}{} max_rel {:.3g} (atol {:.3g} rtol {:.3g}): {}\n", n.tensor,
      n.max_abs, n.max_abs_row >= 0 ? fmt::format(" (row {})", n.max_abs_row) : std::string(),
      n.max_rel, n.atol, n.rtol,
      n.passed ? "within tolerance"
               : fmt::format("{} row{} DIFFER", n.rows_differing_count,
                             n.rows_differing_count == 1 ? "" : "s"));
  if (n.passed) return s;
  s += fmt::format(
      "       rows {}: {} element(s) outside tolerance, {} NaN/Inf in the capture, {} "
      "NaN in the reference\n",
      RowsText(n), n.elements_outside, n.nonfinite_elements, n.reference_nonfinite);
  return s;
}

std::string NumericsText(const io::CaseNumericsResult& n) {
  if (!n.ran) return "numerics: not run: " + n.reason + "\n";
  std::string s = fmt::format(
      "numerics: the captured outputs vs the reference over the captured plan ({} real rows, {} "
      "heads, D {} Dv {}, page {}, q {}, KV {}, o {})\n",
      n.real_rows, n.heads, n.head_dim_qk, n.head_dim_v, n.page_size, n.q_format, n.kv_format,
      n.out_format);
  s += OutputText(n.o);
  if (n.has_lse) s += OutputText(n.lse);
  return s;
}

json OutputJson(const io::OutputNumerics& n) {
  return {{"tensor", n.tensor},
          {"rows_compared", n.rows_compared},
          {"elements", n.elements},
          {"max_abs", n.max_abs},
          {"max_abs_row", n.max_abs_row},
          {"max_rel", n.max_rel},
          {"atol", n.atol},
          {"rtol", n.rtol},
          {"elements_outside", n.elements_outside},
          {"nonfinite_elements", n.nonfinite_elements},
          {"reference_nonfinite", n.reference_nonfinite},
          {"rows_differing", n.rows_differing},
          {"rows_differing_count", n.rows_differing_count},
          {"passed", n.passed}};
}

json NumericsJson(const io::CaseNumericsResult& n) {
  if (!n.ran) return {{"ran", false}, {"reason", n.reason}};
  json j = {{"ran", true},
            {"passed", n.passed()},
            {"real_rows", n.real_rows},
            {"heads", n.heads},
            {"head_dim_qk", n.head_dim_qk},
            {"head_dim_v", n.head_dim_v},
            {"page_size", n.page_size},
            {"q_format", n.q_format},
            {"kv_format", n.kv_format},
            {"out_format", n.out_format},
            {"o", OutputJson(n.o)},
            {"lse", nullptr}};
  if (n.has_lse) j["lse"] = OutputJson(n.lse);
  return j;
}

std::string ScenarioText(const ScenarioSection& s) {
  const io::CaseScenario& c = s.cs;
  const int32_t pad = c.padded_requests - c.real_requests;
  return fmt::format(
      "scenario: wrote {}: {} requests{}, MTP K {}, kernel {}, engine {}; the captured call is "
      "{}{} (mlasim replay {})\n",
      s.file, c.real_requests,
      pad > 0 ? fmt::format(" padded to {}", c.padded_requests) : std::string(), c.scenario.mtp_k,
      c.scenario.contracts.empty() ? c.scenario.kernel : "(--contract)", c.scenario.engine.name,
      c.call, c.overridden ? " with the captured q/o rows as an override" : " of the engine's step",
      s.file);
}

void PrintText(std::ostream& out, const CheckReport& r) {
  const io::CaseManifest& m = r.manifest;
  std::vector<std::string> others;
  for (auto it = m.versions.begin(); it != m.versions.end(); ++it)
    if (it.key() != "mlasim") others.push_back(it.key() + " " + it.value().get<std::string>());
  out << fmt::format("case {}: call {}, captured by mlasim {}{}\n", r.case_dir, m.call,
                     m.versions.at("mlasim").get<std::string>(),
                     others.empty() ? "" : " (" + Csv(others) + ")");
  std::vector<std::string> ts;
  for (const io::CaseTensor& t : m.tensors)
    ts.push_back(t.name + " " + t.dtype + " " + io::NpyShapeString(t.shape));
  out << "tensors: " << m.tensors.size() << (ts.empty() ? "" : " (" + Csv(ts) + ")") << "\n\n";
  PrintPlanText(out, r.plan);
  out << '\n';
  if (r.contracts.checked)
    out << fmt::format(
        "contracts: checked, 1 call ({} under {}), {}\n", m.call, r.contracts.contract,
        r.contracts.findings.empty() ? std::string("no finding")
                                     : fmt::format("{} finding{}", r.contracts.findings.size(),
                                                   r.contracts.findings.size() == 1 ? "" : "s"));
  else
    out << "contracts: not checked: " << r.contracts.reason << '\n';
  if (r.contracts.checked && !r.contracts.kv_rows_unchecked.empty())
    out << "  KV rows: not checked: " << r.contracts.kv_rows_unchecked << '\n';
  for (const io::ContractFinding& c : r.contracts.findings) out << "  " << c.text << '\n';
  if (r.fault.given) {
    out << fmt::format("fault: {} ({}{})\n", io::HexAddress(r.fault.fault.address),
                       r.fault.fault.source,
                       r.fault.fault.reason.empty() ? "" : ", reason: " + r.fault.fault.reason);
    out << "  "
        << (r.fault.attributed ? FaultSentence(r.fault)
                               : "not attributed: " + r.fault.not_attributed)
        << '\n';
    if (r.fault.overrun) out << "  " << OverrunSentence(r.fault, r.manifest.call) << '\n';
  }
  out << '\n' << NumericsText(r.numerics);
  if (!r.scenario.file.empty()) out << ScenarioText(r.scenario);
  const std::string verdict = Verdict(r);
  if (verdict == "failed")
    out << fmt::format("\nverdict: FAILED ({} finding{})\n", r.findings.size(),
                       r.findings.size() == 1 ? "" : "s");
  else if (verdict == "ok")
    out << "\nverdict: ok\n";
  else
    out << "\nverdict: nothing checked (no captured plan with its planner inputs, no contract, "
           "no --fault-log)\n";
}

json DecisionsJson(const std::vector<io::DecisionDifference>& ds) {
  json a = json::array();
  for (const io::DecisionDifference& d : ds)
    a.push_back({{"name", d.name}, {"captured", d.captured}, {"replanned", d.replanned}});
  return a;
}

json PlanJson(const PlanSection& p) {
  if (!p.ran) return {{"checked", false}, {"reason", p.not_run}};
  json derived = json::object();
  for (const auto& [k, v] : io::DecisionValues(p.reference.derived)) derived[k] = v;
  json j = {{"checked", true},
            {"request", io::PlanRequestToJson(p.request)},
            {"planner", PlannerChoiceName(p.choice)},
            {"derived", derived},
            {"info_v1_sizes", io::SizesToJson(p.info_v1)}};
  if (!p.captured) {
    j["diff"] = {{"run", false}, {"reason", p.not_diffed}};
    return j;
  }
  j["captured_sizes"] = io::SizesToJson(io::SizesOf(*p.captured));
  json diff = {{"run", true},
               {"identical", p.diff.identical()},
               {"cells_compared", p.diff.cells_compared},
               {"cells_differing", p.diff.cells_differing},
               {"first", nullptr},
               {"stores_past_end", json::array()},
               {"observed_decisions", DecisionsJson(p.observed)},
               {"reproduced_by", nullptr}};
  if (p.diff.first) {
    const io::PlanCellDifference& f = *p.diff.first;
    diff["first"] = {{"buffer", f.buffer},
                     {"index", f.index},
                     {"row", f.row},
                     {"field", f.field},
                     {"captured", f.captured},
                     {"captured_unwritten", f.captured_unwritten},
                     {"replanned", f.replanned},
                     {"text", f.text}};
  }
  for (const io::PlanStorePastEnd& s : p.diff.stores_past_end)
    diff["stores_past_end"].push_back({{"buffer", s.buffer},
                                       {"stores", s.stores},
                                       {"first_index", s.first_index},
                                       {"captured_size", s.captured_size}});
  if (p.reproduction)
    diff["reproduced_by"] = {{"input", p.reproduction->input},
                             {"value", p.reproduction->value},
                             {"was", p.reproduction->was},
                             {"decisions", DecisionsJson(p.reproduction->decisions)}};
  j["diff"] = diff;
  j["pointer_findings"] = p.pointer_findings;
  json diags = json::array();
  for (const ref::PlanDiagnostic& d : p.check.diagnostics)
    diags.push_back({{"code", ref::PlanDiagName(d.code)},
                     {"severity", d.severity == ref::Severity::kError ? "error" : "warning"},
                     {"buffer", d.buffer},
                     {"index", d.index},
                     {"tile", d.tile},
                     {"work", d.work},
                     {"message", d.message}});
  j["check"] = {{"ok", p.check.ok()}, {"diagnostics", diags}};
  return j;
}

json ScenarioJson(const ScenarioSection& s) {
  if (s.file.empty()) return nullptr;
  return {{"file", s.file},
          {"call", s.cs.call},
          {"overridden", s.cs.overridden},
          {"requests", s.cs.real_requests},
          {"padded_requests", s.cs.padded_requests},
          {"mtp_k", s.cs.scenario.mtp_k},
          {"engine", s.cs.scenario.engine.name}};
}

json ReportJson(const CheckReport& r) {
  json tensors = json::object();
  for (const io::CaseTensor& t : r.manifest.tensors)
    tensors[t.name] = {{"dtype", t.dtype},
                       {"shape", t.shape},
                       {"strides", t.strides},
                       {"nbytes", t.nbytes},
                       {"data_ptr", io::HexAddress(t.data_ptr)},
                       {"device", t.device}};
  json contracts = {
      {"checked", r.contracts.checked},
      {"reason", r.contracts.reason},
      {"contract", r.contracts.contract},
      {"kv_rows_unchecked",
       r.contracts.kv_rows_unchecked.empty() ? json() : json(r.contracts.kv_rows_unchecked)},
      {"findings", json::array()}};
  for (const io::ContractFinding& c : r.contracts.findings)
    contracts["findings"].push_back({{"tensor", c.tensor},
                                     {"access", c.access},
                                     {"first_row", c.first_row},
                                     {"end_row", c.end_row},
                                     {"rows", c.rows},
                                     {"rows_past_end", c.rows_past_end},
                                     {"rows_before_start", c.rows_before_start},
                                     {"work_items", c.work_items},
                                     {"work_item_count", c.work_item_count},
                                     {"text", c.text}});
  json fault = nullptr;
  if (r.fault.given) {
    fault = {{"address", io::HexAddress(r.fault.fault.address)},
             {"source", r.fault.fault.source},
             {"reason", r.fault.fault.reason},
             {"attributed", r.fault.attributed}};
    if (r.fault.attributed) {
      const sim::Attribution& a = r.fault.at;
      fault.update(json{{"tensor", a.buffer},
                        {"inside", a.inside},
                        {"offset", a.offset},
                        {"underflow", a.before_start},
                        {"bytes_past_end", a.bytes_past_end},
                        {"row", a.row},
                        {"head", a.head},
                        {"column", a.column},
                        {"tensor_rows", a.rows},
                        {"text", FaultSentence(r.fault)}});
    } else {
      fault["reason_not_attributed"] = r.fault.not_attributed;
    }
    fault["overrun"] = nullptr;
    if (const std::optional<OverrunHit>& h = r.fault.overrun)
      fault["overrun"] = {{"tensor", h->finding->tensor}, {"access", h->finding->access},
                          {"row", h->row}, {"head", h->head}, {"column", h->column},
                          {"text", OverrunSentence(r.fault, r.manifest.call)}};
  }
  return {{"case", r.case_dir},
          {"call", r.manifest.call},
          {"schema_version", r.manifest.schema_version},
          {"versions", r.manifest.versions},
          {"tensors", tensors},
          {"plan", PlanJson(r.plan)},
          {"contracts", contracts},
          {"fault", fault},
          {"numerics", NumericsJson(r.numerics)},
          {"scenario_out", ScenarioJson(r.scenario)},
          {"findings", r.findings},
          {"verdict", Verdict(r)}};
}

class CheckCommand final : public Command {
 public:
  explicit CheckCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Check a case directory captured with mlasim.capture: re-plan and "
                                 "diff the plan, run the plan checker, check the call against its "
                                 "kernel contract, attribute a fault address, compare the "
                                 "captured outputs with the numerics reference");
    app_->footer(
        "Exit codes: 0 no finding, 1 findings (plan differs, checker errors, a contract "
        "access outside a captured tensor, fault past a tensor's end, captured o / lse outside the "
        "numerics tolerance), 2 bad input (the message "
        "names the file and field).\n"
        "Examples: mlasim check /tmp/case --fault-log rocm.log\n"
        "          mlasim check /tmp/case --scenario-out step.json && mlasim replay step.json\n");
    app_->add_option("CASE_DIR", case_dir_, "directory holding manifest.json and the .npy files")
        ->required();
    app_->add_option("--fault-log", fault_log_,
                     "a log holding a ROCm 'Memory access fault ... on address 0x...' line, "
                     "compute-sanitizer output, or a bare 0x address")
        ->type_name("FILE");
    app_->add_option("--planner", planner_,
                     "re-plan with auto (aiter's dispatch), serial or "
                     "parallel")
        ->type_name("auto|serial|parallel")
        ->capture_default_str();
    app_->add_option("--contract", contract_,
                     "check the call with this kernel contract file (docs/contracts.md) or "
                     "built-in variant instead of config.contract / config.kernel")
        ->type_name("FILE");
    app_->add_option("--scenario-out", scenario_out_,
                     "write the engine step that reproduces the captured decode call as a "
                     "scenario (docs/scenario.md) for `mlasim replay FILE`")
        ->type_name("FILE");
    app_->add_flag("--json", json_, "print the report as JSON");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    StatusOr<ref::PlannerChoice> choice = ParsePlannerChoice(planner_);
    if (!choice.ok()) return Fail(io, choice.status());
    if (!scenario_out_.empty())
      if (Status st = CheckOutputFile("--scenario-out", scenario_out_); !st.ok())
        return Fail(io, st);
    io::DiskCaseFiles files(case_dir_);
    if (Status st = files.CheckDirectory(); !st.ok()) return Fail(io, st);
    CheckReport r;
    r.case_dir = case_dir_;
    StatusOr<io::CaseManifest> m = io::OpenCase(files);
    if (!m.ok()) return Fail(io, m.status());
    r.manifest = std::move(*m);
    if (Status st = ScenarioOutIsNoInput(r.manifest); !st.ok()) return Fail(io, st);
    StatusOr<io::CasePlanner> planner = io::ReadCasePlanner(files, r.manifest);
    if (!planner.ok()) return Fail(io, planner.status());
    if (Status st = RunPlanSection(r.manifest, files, *planner, *choice, r.plan); !st.ok())
      return Fail(io, st);
    io::CaseContractOptions copt;
    copt.contract = contract_;
    StatusOr<io::ContractCheckResult> contracts =
        io::CheckCaseContracts(files, r.manifest, *planner, copt);
    if (!contracts.ok()) return Fail(io, contracts.status());
    r.contracts = std::move(*contracts);
    if (!fault_log_.empty())
      if (Status st = RunFaultSection(r.manifest, fault_log_, r.fault); !st.ok())
        return Fail(io, st);
    AttributeToOverrun(r.manifest, r.contracts, r.fault);
    StatusOr<io::CaseNumericsResult> numerics = io::CheckCaseNumerics(
        files, r.manifest, *planner, r.plan.captured ? &*r.plan.captured : nullptr);
    if (!numerics.ok()) return Fail(io, numerics.status());
    r.numerics = std::move(*numerics);
    if (!scenario_out_.empty())
      if (Status st = WriteScenario(files, r, *planner, *choice, copt); !st.ok())
        return Fail(io, st);
    CollectFindings(r);
    if (json_)
      io.out << ReportJson(r).dump(2) << '\n';
    else
      PrintText(io.out, r);
    return r.findings.empty() ? kExitOk : kExitCheckFailed;
  }

 private:
  // --scenario-out naming a file the check reads: the case's manifest or a tensor's .npy (the
  // write replaced the captured case), --fault-log's or --contract's file.
  Status ScenarioOutIsNoInput(const io::CaseManifest& m) const {
    const std::string dir = case_dir_ + "/";
    std::vector<std::pair<std::string, std::string>> inputs = {
        {"the case's " + std::string(io::kCaseManifestName), dir + io::kCaseManifestName},
        {"--fault-log's file", fault_log_},
        {"--contract's file", contract_}};
    for (const io::CaseTensor& t : m.tensors)
      inputs.push_back({"the case's " + t.file, dir + t.file});
    return CheckOutputsAreNotInputs({{"--scenario-out", scenario_out_}}, inputs);
  }

  Status WriteScenario(const io::CaseFiles& files, CheckReport& r, const io::CasePlanner& planner,
                       ref::PlannerChoice choice, const io::CaseContractOptions& copt) {
    StatusOr<io::CaseScenario> cs = io::ScenarioFromCase(files, r.manifest, planner, choice, copt);
    if (!cs.ok()) return cs.status();
    r.scenario.cs = std::move(*cs);
    r.scenario.file = scenario_out_;
    return WriteOutputFile("--scenario-out", scenario_out_,
                           sim::ScenarioToJson(r.scenario.cs.scenario).dump(2) + "\n");
  }

  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  std::string case_dir_, fault_log_, contract_, scenario_out_;
  std::string planner_ = "auto";
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterCheck(CLI::App& app) {
  return std::make_unique<CheckCommand>(app);
}

}  // namespace mlasim::cli
