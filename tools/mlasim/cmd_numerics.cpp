// File: tools/mlasim/cmd_numerics.cpp — `mlasim numerics`: run the CPU numerics reference
// (ref/numerics.h) for every decode call of a scenario's engine step at reduced sizes, and report
// plan-driven vs monolithic errors and poison findings per call. docs/cli.md, docs/numerics.md.
//
// What it does, in order:
//   1. Load the scenario (file or built-in), apply --profile / --kernel as replay does.
//   2. Reduce it (sim::ReduceForNumerics): contexts capped at max(--max-context, Q +
//      rejected_prev), top-k at --max-context; heads, K, batch, graph padding, target and engine
//      flags are kept (the plan's shape depends on them).
//   3. sim::ExpandStep, then sim::RunStepNumerics: for every decode call ref::RunPlanNumerics on
//      its plan snapshot's request and plan, with the call's kernel contract semantics
//      (invalid_index, masked_keys, empty_rows, zero_kv; --empty-rows and --zero-kv override the
//      last two) and the index values the step's fills left
//      in the slots it reads (docs/numerics.md "Contract semantics on engine steps").
//   4. Findings in padding rows are expected when the engine drops its padding rows (engine
//      profile o_padding = dropped); anything else fails, as do consumed padding rows that hold
//      poison, NaN or inf (class I). A failing call's violations that match a known bug
//      (sim/known_bugs.h) are named "known: <name> (<upstream>), fixed in <profile>";
//      --ignore-known does not fail a call whose every violation is known.
//   5. --mutant NAME breaks the plan-driven path with a numerics or semantics mutant of the
//      registry (fuzz/mutants.h; a semantics mutant replaces the contract's value); --poison
//      fills unused page-table slots with hostile page ids and keeps page 0 out of every request
//      (FlashMLA's poisoned tests); --out DIR writes a failing run as a replayable case file with
//      its reproduce command.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/mutants.h"
#include "ref/limits.h"
#include "ref/numerics.h"
#include "sim/contract.h"
#include "sim/engine.h"
#include "sim/index_values.h"
#include "sim/known_bugs.h"
#include "sim/os_error.h"
#include "sim/replay.h"
#include "sim/scenario_json.h"
#include "sim/step_numerics.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/scenario_input.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "numerics";

// One decode call's outcome: the library's numerics plus the known bugs its violations match.
struct CallResult {
  sim::DecodeNumerics n;
  std::vector<const sim::KnownBug*> known;  // per violation of n (nullptr: not a known bug)
  bool ignore_known = false;                // --ignore-known
  // Every violation matches a known bug (and there is at least one).
  bool all_known() const {
    if (n.violations.empty()) return false;
    for (const sim::KnownBug* k : known)
      if (!k) return false;
    return true;
  }
  bool passed() const {
    if (n.passed()) return true;
    // Known failures are ignored when every cause of the failure is a violation (not an
    // error or dropped findings) and each one is known.
    return ignore_known && n.error.empty() && n.rep.poison_dropped == 0 && all_known();
  }
  const char* verdict() const {
    if (!n.launched) return "not_launched";
    if (!n.error.empty()) return "error";
    if (n.passed()) return "ok";
    return passed() ? "known" : "failed";
  }
  const ref::PoisonFinding* first_padding() const {
    return n.first_padding < 0 ? nullptr : &n.rep.poison[n.first_padding];
  }
  const ref::PoisonFinding* first_real() const {
    return n.first_real < 0 ? nullptr : &n.rep.poison[n.first_real];
  }
};

int64_t MaxTensorValues() {
  return ref::Limit(ref::LimitId::kTensorValues);
}

std::string Sci(double x) {
  if (std::isnan(x)) return "nan";
  if (x == 0) return "0";
  return fmt::format("{:.2e}", x);
}

// JSON number, null for NaN/inf (nlohmann writes null for them anyway; explicit for clarity).
nlohmann::json Num(double x) {
  if (!std::isfinite(x)) return nullptr;
  return x;
}

nlohmann::json CompareJson(const ref::CompareResult& c, const ref::Tolerance& t) {
  return {
      {"max_abs", Num(c.max_abs)},
      {"max_rel", Num(c.max_rel)},
      {"cos_diff", Num(c.cos_diff)},
      {"elements", c.elements},
      {"nan_mismatches", c.nan_mismatches},
      {"inf_mismatches", c.inf_mismatches},
      {"tolerance_violations", c.tolerance_violations},
      {"passed", c.passed},
      {"tolerance", {{"atol", Num(t.atol)}, {"rtol", Num(t.rtol)}, {"cos_diff", Num(t.cos_diff)}}}};
}

nlohmann::json FindingJson(const ref::PoisonFinding* f) {
  if (!f) return nullptr;
  return {{"kind", ref::PoisonKindName(f->kind)},
          {"output", ref::NumericsBufferName(f->output)},
          {"row_begin", f->row_begin},
          {"row_end", f->row_end},
          {"head_begin", f->head_begin},
          {"head_end", f->head_end},
          {"source", ref::NumericsBufferName(f->source)},
          {"source_index", f->source_index},
          {"work", f->work},
          {"tile", f->tile},
          {"text", f->ToString()}};
}

class NumericsCommand final : public Command {
 public:
  explicit NumericsCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Run the CPU numerics reference for every decode call of "
                                 "a scenario's step at reduced sizes: plan-driven vs "
                                 "monolithic errors and poison findings per call");
    app_->footer(
        "Exit codes: 0 every call within tolerance and no poison in real rows, 1 otherwise,\n"
        "2 bad input (the message names the flag or JSON path).\n"
        "Examples: mlasim numerics --builtin seed\n"
        "          mlasim numerics case.json --max-context 256 --json\n");
    scenario_.Add(*app_);
    app_->add_option("--max-context", max_context_,
                     "cap every context at N tokens (at least Q + rejected_prev, so the step "
                     "stays valid) and top-k at N; default 512")
        ->type_name("N");
    dims_opt_ = app_->add_flag("--small-dims,!--full-dims", small_dims_,
                               "head dims 64 latent + 16 rope (default) or the model's (576/512)");
    app_->add_option("--seed", seed_, "input seed (SplitMix64), default 1")
        ->type_name("N")
        ->check(UnsignedInteger());
    app_->add_option("--accumulate", accumulate_, "fp32 (default) or fp64")->type_name("TYPE");
    app_->add_option(
            "--empty-rows", empty_rows_,
            "replace the decode contract's empty_rows (what a row with no visible key "
            "holds): write-zero (o = 0, lse = -inf), write-zero-pos-inf (o = 0, lse = +inf: "
            "FlashMLA), nan (0/0) or skip (nothing); "
            "default: the contract's")
        ->type_name("POLICY");
    app_->add_option("--zero-kv", zero_kv_,
                     "replace the decode contract's zero_kv (what a zero-KV work item does): run "
                     "(its rows are written as empty rows) or skip (nothing, as OPUS and HK); "
                     "default: the contract's")
        ->type_name("POLICY");
    app_->add_option("--mutant", mutant_,
                     "break the plan-driven path with this numerics or semantics mutant of the "
                     "registry (mlasim mutants --list, kinds numerics and semantics)")
        ->type_name("NAME");
    app_->add_flag("--poison", poison_,
                   "poison like FlashMLA's tests: unused page-table slots hold hostile page ids "
                   "(-1, past the cache, 2147480000, INT_MAX) and page 0 (NaN) is never used");
    app_->add_option("--out", out_dir_,
                     "when a call fails, write the case (the scenario before reduction) with its "
                     "reproduce command into DIR")
        ->type_name("DIR");
    app_->add_flag("--ignore-known", ignore_known_,
                   "a call whose every violation is a known bug (sim/known_bugs.h) does not fail");
    app_->add_flag("--json", json_, "print the report as JSON");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    ref::NumericsOptions opt;
    sim::SemanticsOverride over;
    if (Status st = ParseOptions(opt, over); !st.ok()) return Fail(io, st);
    StatusOr<sim::Scenario> s = scenario_.Load();
    if (!s.ok()) return Fail(io, s.status());
    const sim::Scenario original = *s;
    opt.q_scale_mode = static_cast<ref::NumericsOptions::QScaleMode>(s->engine.q_fp8_scale);
    sim::NumericsReduction red = sim::ReduceForNumerics(*s, max_context_, small_dims_);
    opt.head_dim_qk = red.head_dim_qk;
    opt.head_dim_v = red.head_dim_v;

    sim::ReplayReport step;  // the step, for known-bug matching (sim/known_bugs.h)
    step.scenario = *s;
    auto trace = sim::ExpandStep(*s);  // the reduced scenario: its values are not the file's
    if (!trace.ok()) return Fail(io, scenario_.InFile(trace.status(), ReducedBy()));
    step.trace = std::move(*trace);
    red.index_values_left_out = sim::UnplacedIndexValues(*s, step.trace);
    if (Status st = CheckTensorSizes(step.trace, opt); !st.ok()) return Fail(io, st);
    const std::vector<CallResult> results = RunCalls(step, opt, over);

    bool all_passed = true;
    for (const CallResult& r : results) all_passed = all_passed && r.passed();
    std::string written;
    if (!all_passed && !out_dir_.empty()) written = WriteCase(original, red);
    if (json_) {
      nlohmann::json j = ToJson(*s, red, opt, results, all_passed);
      if (!written.empty()) j["case_file"] = written;
      io.out << j.dump(2) << '\n';
    } else {
      io.out << ToText(*s, red, opt, results, all_passed);
      if (!written.empty()) io.out << "case written: " << written << '\n';
    }
    return all_passed ? kExitOk : kExitCheckFailed;
  }

 private:
  // The flags into the numerics options and the semantics override. Errors: InvalidArgument
  // naming the flag (--full-dims, --max-context, --accumulate, --mutant, --empty-rows, --zero-kv,
  // --out).
  Status ParseOptions(ref::NumericsOptions& opt, sim::SemanticsOverride& over) const {
    {  // --small-dims and --full-dims together: refuse rather than let the last one win
      bool small = false, full = false;
      for (const std::string& v : dims_opt_->results())
        (v == "-1" || v == "false" ? full : small) = true;
      if (small && full)
        return InvalidArgumentError("--full-dims", "contradicts --small-dims; give one of them");
    }
    if (max_context_ < 1 || max_context_ > (1 << 20))
      return InvalidArgumentError("--max-context", "must be in [1, 1048576]");
    opt.seed = seed_;
    if (accumulate_ == "fp32")
      opt.precision.accumulate = ref::Accumulate::kFp32;
    else if (accumulate_ == "fp64")
      opt.precision.accumulate = ref::Accumulate::kFp64;
    else
      return InvalidArgumentError("--accumulate", "must be fp32 or fp64");
    MLASIM_RETURN_IF_ERROR(ApplyMutant(opt, over));
    MLASIM_RETURN_IF_ERROR(ApplyPolicyOverrides(over));
    if (poison_) {
      opt.hostile_table_slots = 4;  // -1, past the cache, 2147480000, INT_MAX
      opt.reserve_page_zero = true;
    }
    if (!out_dir_.empty())  // must exist and take files (a read-only one is refused now)
      MLASIM_RETURN_IF_ERROR(sim::PrepareOutputFolder("--out", out_dir_, /*create=*/false));
    return OkStatus();
  }

  // How the scenario was reduced (sim::ReduceForNumerics), for an error of its expansion.
  std::string ReducedBy() const {
    return "the scenario reduced to contexts and top-k of at most --max-context " +
           std::to_string(max_context_) + (small_dims_ ? " and small head dims" : "");
  }

  // Too large to hold even after the reduction: the user's sizes (exit 2, naming --max-context,
  // or --full-dims with the model's head dims).
  Status CheckTensorSizes(const sim::Trace& trace, const ref::NumericsOptions& opt) const {
    for (const sim::Call& call : trace.calls) {
      if (call.kind != sim::CallKind::kDecode || call.guard_refused || call.plan < 0 ||
          call.plan >= static_cast<int32_t>(trace.plans.size()))
        continue;
      const int64_t too_big =
          sim::NumericsTensorValues(KernelRequest(trace.plans[call.plan].request), opt);
      if (too_big > MaxTensorValues())
        return InvalidArgumentError(
            small_dims_ ? "--max-context" : "--full-dims",
            "call " + std::to_string(call.index) + " (" + call.name + " at " + call.step +
                ") needs " + std::to_string(too_big) +
                " values in one tensor, more than the numerics limit of " +
                std::to_string(MaxTensorValues()) +
                (small_dims_ ? "; lower --max-context"
                             : "; lower --max-context or use --small-dims"));
    }
    return OkStatus();
  }

  // The step numerics of every decode call of `step`, with the known bugs its violations match.
  std::vector<CallResult> RunCalls(const sim::ReplayReport& step, const ref::NumericsOptions& opt,
                                   const sim::SemanticsOverride& over) const {
    sim::StepNumericsOptions so;
    so.numerics = opt;
    so.override = over;
    std::vector<CallResult> results;
    for (sim::DecodeNumerics& n : sim::RunStepNumerics(step.scenario, step.trace, so)) {
      CallResult r;
      r.n = std::move(n);
      r.ignore_known = ignore_known_;
      for (const sim::Violation& v : r.n.violations) r.known.push_back(sim::MatchKnownBug(v, step));
      results.push_back(std::move(r));
    }
    return results;
  }

  // The violations of one call, each with the known bug it matches.
  static nlohmann::json ViolationsJson(const CallResult& r) {
    using nlohmann::json;
    json vs = json::array();
    for (size_t i = 0; i < r.n.violations.size(); ++i) {
      const sim::Violation& v = r.n.violations[i];
      json x = {{"kind", sim::ViolationKindName(v.kind)},
                {"class", sim::ClassLabel(v)},
                {"buffer", v.buffer},
                {"detail", v.detail}};
      if (const sim::KnownBug* k = r.known[i])
        x["known"] = {{"name", k->name},
                      {"upstream", k->upstream},
                      {"fixed_in", k->fixed_in.empty() ? json() : json(k->fixed_in)}};
      vs.push_back(std::move(x));
    }
    return vs;
  }

  // The results of a call the numerics ran, into its JSON object `j`.
  static void AddRunJson(const CallResult& r, nlohmann::json& j) {
    const ref::NumericsReport& p = r.n.rep;
    j["q_rows"] = p.q_rows;
    j["rows_compared"] = p.rows_compared;
    j["real_requests"] = r.n.snap->real_requests;
    j["heads"] = p.num_heads;
    j["fold_ratio"] = p.fold_ratio;
    j["max_keys"] = p.max_keys;
    j["works_run"] = p.works_run;
    j["tiles_reduced"] = p.tiles_reduced;
    j["partial_rows_without_key"] = p.partial_rows_without_key;
    j["q_format"] = ref::NumFormatName(p.q_format);
    j["kv_format"] = ref::NumFormatName(p.kv_format);
    j["o"] = CompareJson(p.o_unpoisoned, p.tolerance.o);
    j["lse"] = CompareJson(p.lse_unpoisoned, p.tolerance.lse);
    j["within_tolerance"] = r.n.rep.ok;
    j["unexplained_nan"] = p.unexplained_nan;
    j["monolithic_nan"] = p.monolithic_nan;
    j["poison"] = {{"findings", static_cast<int64_t>(p.poison.size())},
                   {"dropped", p.poison_dropped},
                   {"padding_row_findings", r.n.padding_findings},
                   {"padding_row_pairs", r.n.padding_rows},
                   {"real_row_findings", r.n.real_findings},
                   {"first_padding", FindingJson(r.first_padding())},
                   {"first_real", FindingJson(r.first_real())}};
    j["padding"] = {{"o_nonfinite", p.padding_o_nonfinite},
                    {"lse_bad", p.padding_lse_bad},
                    {"poisoned_pairs", p.padding_poisoned_pairs},
                    {"consumed_and_bad", r.n.padding_consumed_bad()}};
    j["invalid_index"] = InvalidIndexText(r.n.invalid_index);
    j["masked_keys"] = r.n.read_masked_keys ? "read_then_mask" : "never_read";
    j["empty_rows"] = EmptyRowsText(r.n.empty_rows);
    j["zero_kv"] = ZeroKvText(r.n.zero_kv);
    j["index_values"] = r.n.index_values;
    j["violations"] = ViolationsJson(r);
    j["q_scale"] = Num(p.q_scale);
    j["q_scale_real_rows"] = Num(p.q_scale_real);
  }

  // One call's JSON object (docs/cli.md "mlasim numerics").
  static nlohmann::json CallJson(const CallResult& r) {
    const sim::Call& c = *r.n.call;
    nlohmann::json j = {{"index", c.index},         {"step", c.step},
                        {"call", c.name},           {"row", c.table_row},
                        {"kernel", c.kernel},       {"plan", r.n.snap->name},
                        {"launched", r.n.launched}, {"verdict", r.verdict()}};
    if (!r.n.error.empty()) j["error"] = r.n.error;
    if (r.n.launched && r.n.error.empty()) AddRunJson(r, j);
    return j;
  }

  static nlohmann::json ReductionJson(const sim::NumericsReduction& red) {
    return {{"max_context", red.max_context},
            {"requests", red.requests},
            {"contexts_capped", red.contexts_capped},
            {"longest_context_before", red.longest_before},
            {"longest_context_after", red.longest_after},
            {"topk_before", red.topk_before},
            {"topk_after", red.topk_after},
            {"head_dim_qk", red.head_dim_qk},
            {"head_dim_v", red.head_dim_v},
            {"small_dims", red.small_dims},
            {"index_values_left_out", red.index_values_left_out}};
  }

  // failed, known_bugs_only or within_tolerance.
  static const char* VerdictName(const std::vector<CallResult>& results, bool all_passed) {
    if (!all_passed) return "failed";
    return std::any_of(results.begin(), results.end(),
                       [](const CallResult& r) { return !r.n.passed(); })
               ? "known_bugs_only"
               : "within_tolerance";
  }

  nlohmann::json ToJson(const sim::Scenario& s, const sim::NumericsReduction& red,
                        const ref::NumericsOptions& opt, const std::vector<CallResult>& results,
                        bool all_passed) const {
    using nlohmann::json;
    json calls = json::array();
    int64_t padding_findings = 0, real_findings = 0;
    for (const CallResult& r : results) {
      if (r.n.launched && r.n.error.empty()) {
        padding_findings += r.n.padding_findings;
        real_findings += r.n.real_findings;
      }
      calls.push_back(CallJson(r));
    }
    return {{"case", s.name},
            {"profile", s.engine.name},
            {"target", ref::ArchName(s.target)},
            {"kernel", sim::DecodeVariant(s)},
            {"seed", opt.seed},
            {"accumulate", opt.precision.accumulate == ref::Accumulate::kFp64 ? "fp64" : "fp32"},
            {"empty_rows", empty_rows_.empty() ? "contract" : empty_rows_},
            {"zero_kv", zero_kv_.empty() ? "contract" : zero_kv_},
            {"mutant", mutant_.empty() ? nlohmann::json() : nlohmann::json(mutant_)},
            {"poison", poison_},
            {"ignore_known", ignore_known_},
            {"padding",
             {{"o", sim::PaddingName(s.engine.o_padding)},
              {"lse", sim::PaddingName(s.engine.lse_padding)}}},
            {"q_fp8_scale", sim::QScaleName(s.engine.q_fp8_scale)},
            {"reduction", ReductionJson(red)},
            {"calls", std::move(calls)},
            {"padding_row_findings", padding_findings},
            {"real_row_findings", real_findings},
            {"verdict", VerdictName(results, all_passed)}};
  }

  // The lines above the table: case, reduction, padding, semantics, what the errors compare.
  std::string HeaderText(const sim::Scenario& s, const sim::NumericsReduction& red,
                         const ref::NumericsOptions& opt,
                         const std::vector<CallResult>& results) const {
    std::ostringstream o;
    o << fmt::format("case {}  profile {}  target {}  kernel {}  seed {}  accumulate {}\n", s.name,
                     s.engine.name, ref::ArchName(s.target), sim::DecodeVariant(s), opt.seed,
                     opt.precision.accumulate == ref::Accumulate::kFp64 ? "fp64" : "fp32");
    o << fmt::format(
        "reduced: contexts capped at {} tokens ({} of {} requests; longest {} -> {}), top-k {} -> "
        "{}, head dims {}/{} ({})\n",
        red.max_context, red.contexts_capped, red.requests, red.longest_before, red.longest_after,
        red.topk_before, red.topk_after, red.head_dim_qk, red.head_dim_v,
        red.small_dims ? "--small-dims" : "--full-dims");
    if (!red.index_values_left_out.empty()) {
      std::string which;
      for (const int32_t i : red.index_values_left_out)
        which += (which.empty() ? "" : ", ") + fmt::format("$.kv_cache.index_values[{}]", i);
      o << fmt::format(
          "left out: {} of {} index value(s) name a slot past the reduced step's contexts or "
          "top-k: {} (raise --max-context to keep them)\n",
          red.index_values_left_out.size(), s.kv_cache.index_values.size(), which);
    }
    o << fmt::format(
        "padding: o {}, lse {} (engine profile; consumed padding rows must be "
        "finite and poison-free){}{}\n",
        sim::PaddingName(s.engine.o_padding), sim::PaddingName(s.engine.lse_padding),
        poison_ ? "; inputs poisoned (--poison)" : "",
        mutant_.empty() ? "" : "; mutant " + mutant_);
    o << SemanticsLine(results);
    o << "errors: plan-driven vs monolithic over real rows (poison rows skipped); tolerance "
         "derived per call (docs/numerics.md)\n\n";
    return o.str();
  }

  // The table of calls: one row each, columns as wide as their longest value.
  static std::string TableText(const std::vector<CallResult>& results) {
    std::ostringstream o;
    size_t step_w = 4, name_w = 4, row_w = 3, plan_w = 4;
    for (const CallResult& r : results) {
      step_w = std::max(step_w, r.n.call->step.size());
      name_w = std::max(name_w, r.n.call->name.size());
      row_w = std::max(row_w, r.n.call->table_row.size());
      plan_w = std::max(plan_w, r.n.snap->name.size());
    }
    const auto head = [&](const std::string& index, const std::string& step,
                          const std::string& name, const std::string& row,
                          const std::string& plan) {
      return fmt::format("{:>4}  {:<{}}  {:<{}}  {:<{}}  {:<{}}", index, step, step_w, name, name_w,
                         row, row_w, plan, plan_w);
    };
    o << head("call", "step", "name", "row", "plan")
      << fmt::format(
             "  {:>5} {:>5} {:>5} {:>5} {:>5}  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:>6} "
             "{:>7}  {}\n",
             "rows", "heads", "keys", "works", "tiles", "o_abs", "o_rel", "o_cos", "lse_abs",
             "o_atol", "poison", "padding", "verdict");
    for (const CallResult& r : results) {
      const sim::Call& c = *r.n.call;
      o << head(std::to_string(c.index), c.step, c.name, c.table_row, r.n.snap->name);
      o << TableCells(r);
    }
    o << '\n';
    return o.str();
  }

  // A table row's cells after the call's name and plan.
  static std::string TableCells(const CallResult& r) {
    if (!r.n.launched) return "  not launched (the engine's plan-rows guard refused it)\n";
    if (!r.n.error.empty()) return "  ERROR (the numerics refuse this call's request; see below)\n";
    const ref::NumericsReport& p = r.n.rep;
    return fmt::format(
        "  {:>5} {:>5} {:>5} {:>5} {:>5}  {:>9} {:>9} {:>9} {:>9}  {:>9}  {:>6} {:>7}  {}\n",
        p.q_rows, p.num_heads, p.max_keys, p.works_run, p.tiles_reduced,
        Sci(p.o_unpoisoned.max_abs), Sci(p.o_unpoisoned.max_rel), Sci(p.o_unpoisoned.cos_diff),
        Sci(p.lse_unpoisoned.max_abs), Sci(p.tolerance.o.atol), r.n.real_findings,
        r.n.padding_findings,
        r.n.passed() ? "ok"
        : r.passed() ? "known"
                     : "FAILED");
  }

  // The notes of one launched call: findings, padding, tolerance, known bugs.
  std::string CallNotesText(const CallResult& r) const {
    std::ostringstream o;
    const sim::Call& c = *r.n.call;
    if (!r.n.error.empty())
      return fmt::format(
          "call {} ({}): the numerics refuse the request the engine hands this "
          "call: {}\n",
          c.index, c.step, r.n.error);
    const ref::NumericsReport& p = r.n.rep;
    if (r.first_padding())
      o << fmt::format(
          "call {} ({}): {} padding-row finding(s), {} (row, head) pairs, expected "
          "(rows of padding requests, which the engine discards); first: {}\n",
          c.index, c.step, r.n.padding_findings, r.n.padding_rows, r.first_padding()->ToString());
    if (r.first_real())
      o << fmt::format("call {} ({}): {} poison finding(s) in real rows; first: {}\n", c.index,
                       c.step, r.n.real_findings, r.first_real()->ToString());
    if (r.n.padding_consumed_bad())
      o << fmt::format(
          "call {} ({}): class I: the engine consumes padding rows and they hold {} poison "
          "finding(s), {} non-finite o values, {} NaN/+inf lse values\n",
          c.index, c.step, r.n.padding_findings, p.padding_o_nonfinite, p.padding_lse_bad);
    if (p.poison_dropped > 0)
      o << fmt::format("call {} ({}): {} further findings dropped (not classified)\n", c.index,
                       c.step, p.poison_dropped);
    if (!p.ok)
      o << fmt::format(
          "call {} ({}): outside tolerance: o: {} elements beyond atol {} + rtol {} |y|, "
          "cos_diff {} (limit {}); lse: {} beyond atol {}; NaN/inf position mismatches o {} "
          "lse {}; unexplained NaN {}; monolithic NaN {}\n",
          c.index, c.step, p.o_unpoisoned.tolerance_violations, Sci(p.tolerance.o.atol),
          Sci(p.tolerance.o.rtol), Sci(p.o_unpoisoned.cos_diff), Sci(p.tolerance.o.cos_diff),
          p.lse_unpoisoned.tolerance_violations, Sci(p.tolerance.lse.atol),
          p.o_unpoisoned.nan_mismatches + p.o_unpoisoned.inf_mismatches,
          p.lse_unpoisoned.nan_mismatches + p.lse_unpoisoned.inf_mismatches, p.unexplained_nan,
          p.monolithic_nan);
    for (size_t i = 0; i < r.n.violations.size(); ++i)
      if (const sim::KnownBug* k = r.known[i])
        o << fmt::format("call {} ({}): class {} {}: {}{}\n", c.index, c.step,
                         sim::ClassLabel(r.n.violations[i]),
                         sim::ViolationKindName(r.n.violations[i].kind), sim::KnownBugText(*k),
                         ignore_known_ ? "; ignored (--ignore-known)" : "");
    return o.str();
  }

  // The last line: the verdict and how many launched calls passed.
  static std::string VerdictText(const std::vector<CallResult>& results, bool all_passed) {
    int32_t ok = 0, launched = 0, known = 0;
    for (const CallResult& r : results) {
      if (!r.n.launched) continue;
      ++launched;
      ok += r.passed();
      known += r.passed() && !r.n.passed();
    }
    return fmt::format("verdict: {} ({}/{} decode calls ok{})\n",
                       !all_passed ? "FAILED"
                       : known > 0 ? "within tolerance but for known bugs (--ignore-known)"
                                   : "within tolerance",
                       ok - known, launched,
                       known > 0 ? fmt::format(", {} failing only with known bugs", known) : "");
  }

  std::string ToText(const sim::Scenario& s, const sim::NumericsReduction& red,
                     const ref::NumericsOptions& opt, const std::vector<CallResult>& results,
                     bool all_passed) const {
    std::string o = HeaderText(s, red, opt, results) + TableText(results);
    for (const CallResult& r : results)
      if (r.n.launched) o += CallNotesText(r);
    return o + VerdictText(results, all_passed);
  }

  // --empty-rows and --zero-kv: explicit replacements of the decode contracts' values (applied
  // after a semantics mutant's). Errors: InvalidArgument naming the flag.
  Status ApplyPolicyOverrides(sim::SemanticsOverride& over) const {
    if (!empty_rows_.empty()) {
      if (empty_rows_ == "write-zero")
        over.empty_rows = ref::EmptyRowPolicy::kWriteZero;
      else if (empty_rows_ == "nan")
        over.empty_rows = ref::EmptyRowPolicy::kNan;
      else if (empty_rows_ == "skip")
        over.empty_rows = ref::EmptyRowPolicy::kSkip;
      else if (empty_rows_ == "write-zero-pos-inf")
        over.empty_rows = ref::EmptyRowPolicy::kWriteZeroPosInfLse;
      else
        return InvalidArgumentError("--empty-rows",
                                    "must be write-zero, write-zero-pos-inf, nan or skip");
    }
    if (!zero_kv_.empty()) {
      if (zero_kv_ == "run")
        over.zero_kv = ref::ZeroKvPolicy::kRun;
      else if (zero_kv_ == "skip")
        over.zero_kv = ref::ZeroKvPolicy::kSkip;
      else
        return InvalidArgumentError("--zero-kv", "must be run or skip");
    }
    return OkStatus();
  }

  // --mutant: a registry entry with a numerics variant (fuzz/mutants.h MutantSpec::numerics).
  Status ApplyMutant(ref::NumericsOptions& opt, sim::SemanticsOverride& over) const {
    if (mutant_.empty()) return OkStatus();
    const fuzz::MutantSpec* m = fuzz::FindMutant(mutant_);
    if (!m || !m->numerics) {
      std::string known;
      for (const fuzz::MutantSpec& x : fuzz::MutantRegistry())
        if (x.numerics) known += (known.empty() ? "" : ", ") + x.name;
      return InvalidArgumentError("--mutant", "no numerics mutant named '" + mutant_ +
                                                  "' (numerics and semantics mutants: " + known +
                                                  ")");
    }
    opt.mutant = m->numerics->mutant;
    over = fuzz::SemanticsOf(*m->numerics);
    return OkStatus();
  }

  // The command line that reproduces this run on the written case file.
  std::string ReproduceCommand(const std::string& file, const sim::NumericsReduction& red) const {
    std::string cmd =
        fmt::format("mlasim numerics {} --max-context {} --seed {} --accumulate {}{}", file,
                    red.max_context, seed_, accumulate_, small_dims_ ? "" : " --full-dims");
    if (!empty_rows_.empty()) cmd += " --empty-rows " + empty_rows_;
    if (!zero_kv_.empty()) cmd += " --zero-kv " + zero_kv_;
    if (poison_) cmd += " --poison";
    if (!mutant_.empty()) cmd += " --mutant " + mutant_;
    if (ignore_known_) cmd += " --ignore-known";
    return cmd;
  }

  // The scenario before reduction as a case file in --out (profile, kernel and contracts
  // applied), named after the case and the mutant. Returns the path, or a note when it failed.
  // The case's name is the scenario's own text: its first 128 characters, each outside
  // [A-Za-z0-9_-] as '-' (as triage names its examples), so the file stays a plain name in --out
  // (a name "x/../../../f" wrote f three folders above it).
  std::string WriteCase(const sim::Scenario& s, const sim::NumericsReduction& red) const {
    std::string name = s.name.empty() ? std::string("case") : s.name.substr(0, 128);
    for (char& ch : name)
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_')) ch = '-';
    const std::string stem = "numerics-" + name + (mutant_.empty() ? "" : "-" + mutant_);
    const std::string path = (std::filesystem::path(out_dir_) / (stem + ".json")).string();
    nlohmann::json doc = sim::ScenarioToJson(s);
    doc["name"] = stem;
    doc["description"] = "mlasim numerics counterexample" +
                         (mutant_.empty() ? std::string() : " of mutant " + mutant_) +
                         "; reproduce: " + ReproduceCommand(path, red);
    const Status st = sim::WriteTextFile("--out", path, doc.dump(2) + "\n");
    return st.ok() ? path : "(" + st.message() + ")";
  }

  static const char* InvalidIndexText(ref::InvalidIndexUse u) {
    switch (u) {
      case ref::InvalidIndexUse::kMasked: return "masked";
      case ref::InvalidIndexUse::kFault: return "fault";
      case ref::InvalidIndexUse::kClampToZero: return "clamp_to_zero";
      case ref::InvalidIndexUse::kWrap: return "wrap";
      case ref::InvalidIndexUse::kMinusOneMasked: return "minus_one_masked";
    }
    return "?";
  }

  // The semantics the decode calls ran with (their contract's, or a semantics mutant's) and the
  // explicit index values their page tables hold.
  static std::string SemanticsLine(const std::vector<CallResult>& results) {
    for (const CallResult& r : results) {
      if (!r.n.launched || !r.n.error.empty()) continue;
      return fmt::format(
          "semantics: invalid_index {}, masked_keys {}, empty_rows {}, zero_kv {} (decode contract "
          "{}); {} index value(s) from the step's fills in the slots the kernel reads\n",
          InvalidIndexText(r.n.invalid_index),
          r.n.read_masked_keys ? "read_then_mask" : "never_read", EmptyRowsText(r.n.empty_rows),
          ZeroKvText(r.n.zero_kv), r.n.call->contract ? r.n.call->contract->name : "none",
          r.n.index_values);
    }
    return "";
  }

  static const char* EmptyRowsText(ref::EmptyRowPolicy p) {
    switch (p) {
      case ref::EmptyRowPolicy::kWriteZero: return "write-zero";
      case ref::EmptyRowPolicy::kSkip: return "skip";
      case ref::EmptyRowPolicy::kNan: return "nan";
      case ref::EmptyRowPolicy::kWriteZeroPosInfLse: return "write-zero-pos-inf";
    }
    return "?";
  }

  static const char* ZeroKvText(ref::ZeroKvPolicy p) {
    return p == ref::ZeroKvPolicy::kRun ? "run" : "skip";
  }

  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }

  CLI::App* app_ = nullptr;
  ScenarioArgs scenario_;
  std::string accumulate_ = "fp32";
  std::string empty_rows_, zero_kv_;  // empty: the decode contract's
  int64_t max_context_ = 512;         // 64 bits: 2^31 reaches the range check
  bool small_dims_ = true;
  uint64_t seed_ = 1;
  CLI::Option* dims_opt_ = nullptr;
  std::string mutant_, out_dir_;
  bool poison_ = false;
  bool ignore_known_ = false;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterNumerics(CLI::App& app) {
  return std::make_unique<NumericsCommand>(app);
}

}  // namespace mlasim::cli
