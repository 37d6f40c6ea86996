// File: tools/mlasim/cmd_replay.cpp — `mlasim replay`: expand one engine step of a scenario, run
// every call's access contract over the simulated address space, report. docs/cli.md, docs/scenario.md.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/gpu_api.h"
#include "kernels/semantics.h"
#include "ref/numerics.h"
#include "ref/planner.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/report_html.h"
#include "sim/scenario_json.h"
#include "tools/mlasim/commands.h"
#include "tools/mlasim/html_output.h"
#include "tools/mlasim/scenario_input.h"

namespace mlasim::cli {
namespace {

constexpr const char* kName = "replay";

// ---- `--gpu`: the same trace on the device (kernels/gpu_api.h) ------------------------------
// Per plan the decode calls use: the GPU planner against the reference planner (every defined
// cell). Per decode call: the decode + reduce kernels against the CPU plan-driven run of the same
// plan over the real rows (ref::RunPlanDriven, tolerances ref::DeriveTolerances; the distance to
// the monolithic truth is reported too), and the sentinel tails / access log against the
// simulator's out-of-bounds violations of that call and its reduce (same buffers, same rows).
// A call whose request the numerics cannot model (the CPU report's finding) is not run.
// Guard mode does all of that and then runs each call once per guarded buffer (q, o) in a child
// process (fork + exec of this binary, which does its own device init), so a fault is caught and
// attributed to the guarded buffer instead of ending the run. Results are collected in a
// GpuReport and printed as text or, with --json, as the report's "gpu" object.

struct RowRange {
  int64_t first = -1, last = -1;
  bool any() const { return first >= 0; }
  std::string str() const {
    return any() ? std::to_string(first) + ".." + std::to_string(last) : "none";
  }
  nlohmann::json json() const {
    return any() ? nlohmann::json{{"first", first}, {"last", last}} : nlohmann::json();
  }
  bool operator==(const RowRange& o) const { return first == o.first && last == o.last; }
};

struct GpuPlanCheck {
  std::string plan;
  bool compared = false;  // false: the reference planner refuses the request (note says why)
  std::string note, kernel;
  int64_t mismatches = 0;
  std::string first_mismatch;
};

struct GpuGuardRun {
  std::string buffer;         // "q" or "o": the buffer that ends at an unmapped page
  bool faulted = false;       // the device call failed in the child
  bool child_failed = false;  // the child neither ran clean nor faulted (detail says how)
  std::string detail;         // the child's last line
  RowRange predicted;         // the simulator's rows past the end of `buffer`
  bool agree = false;
};

struct GpuCallCheck {
  int32_t index = 0, q_rows = 0, plan_rows = 0;
  std::string step, name;
  bool refused = false;  // the engine's guard refused the call: not run
  // Why the call is not run on the GPU, not compared: the engine hands it a request the numerics
  // cannot model (a decreasing kv_indptr, a short kv_last_page_lens), or a plan the runner
  // refuses (indptrs past its own buffers, class D) -- findings the CPU report already names.
  std::string not_modelled;
  std::string error;   // the CPU reference failed on a request it accepted (a real failure)
  std::string kernel;  // the decode kernel that ran
  int64_t rows_compared = 0;
  // Agreement: the GPU against the CPU plan-driven run of the same plan (what the simulator says
  // the kernel computes); information: the GPU against the monolithic truth (a broken plan's
  // wrong answers show here, as in `mlasim numerics`).
  ref::CompareResult o, lse, o_truth, lse_truth;
  ref::OutputTolerances tol;
  // (row, head) pairs the plan-driven run marks poisoned (the plan reads undefined or
  // out-of-range data there: no defined value to agree on); excluded from the agreement.
  int64_t poisoned_pairs = 0;
  // Poison whose rows are unknown (or findings dropped): no output of the call is defined, so
  // the numerics are not compared at all.
  bool numerics_undefined = false;
  RowRange q_seen, q_pred, o_seen, lse_seen, o_pred;
  int64_t q_read_min = -1, q_read_max = -1;
  std::vector<std::string> other_tails;  // damaged tails the simulator does not predict
  std::vector<GpuGuardRun> guards;
  bool numerics_ok() const { return numerics_undefined || (o.passed && lse.passed); }
  bool q_agree() const { return q_seen == q_pred; }
  bool o_agree() const { return o_seen == o_pred && lse_seen == o_pred; }
  bool truth_ok() const { return o_truth.passed && lse_truth.passed; }
  bool agree() const {
    if (refused || !not_modelled.empty()) return true;
    bool ok = error.empty() && numerics_ok() && q_agree() && o_agree() && other_tails.empty();
    for (const GpuGuardRun& g : guards) ok = ok && g.agree;
    return ok;
  }
};

struct GpuReport {
  std::string device, mode, device_error;
  std::vector<GpuPlanCheck> plans;
  std::vector<GpuCallCheck> calls;
  int calls_run = 0;
  bool agree() const {
    bool ok = device_error.empty();
    for (const GpuPlanCheck& p : plans) ok = ok && p.mismatches == 0;
    for (const GpuCallCheck& c : calls) ok = ok && c.agree();
    return ok;
  }
};

ref::AttentionPrecision KernelPrecision() {  // what the kernel does: fp32 accumulate, P and o bf16
  ref::AttentionPrecision p;
  p.accumulate = ref::Accumulate::kFp32;
  p.p_format = ref::NumFormat::kBf16;
  p.out_format = ref::NumFormat::kBf16;
  return p;
}

// The simulator's predicted out-of-bounds rows of `buffer`/`access` for decode call `c` (and the
// reduce call right after it on the same plan).
RowRange Predicted(const sim::ReplayReport& r, const sim::Call& c, const std::string& buffer,
                   sim::Access access) {
  RowRange out;
  const auto& calls = r.trace.calls;
  for (const sim::Violation& v : r.result.violations) {
    const bool own = v.call_index == c.index;
    const bool reduce =
        v.call_index == c.index + 1 && c.index + 1 < static_cast<int32_t>(calls.size()) &&
        calls[c.index + 1].kind == sim::CallKind::kReduce && calls[c.index + 1].plan == c.plan;
    if (!(own || reduce) || v.kind != sim::ViolationKind::kOutOfBounds) continue;
    if (v.buffer != buffer || v.access != access) continue;
    out.first = out.any() ? std::min(out.first, v.first_row) : v.first_row;
    out.last = std::max(out.last, v.last_row);
  }
  return out;
}

// Runs decode call `c` on the device as the engine allocated q and o (c.q_rows rows each).
gpu::DecodeResult RunCall(const sim::ReplayReport& r, const sim::Call& c, const ref::MlaInputs& in,
                          const std::string& guard) {
  const sim::PlanSnapshot& snap = r.trace.plans.at(c.plan);
  gpu::DecodeOptions opt;
  opt.variant = gpu::ZeroKvVariantOf(c.contract->semantics);
  opt.q_alloc_rows = c.q_rows;
  opt.o_alloc_rows = c.q_rows;
  opt.tail_rows = std::max<int64_t>(16, int64_t{snap.q_rows_covered} - c.q_rows + 1);
  opt.guard_buffer = guard;
  return gpu::run_mla_decode(in, snap.plan, opt);
}

// Inputs in the kernel's q layout (KernelRequest), seeded as `mlasim numerics` does.
StatusOr<ref::MlaInputs> InputsOf(const sim::ReplayReport& r, const sim::Call& c) {
  ref::NumericsOptions no;
  no.seed = 7;
  no.precision = KernelPrecision();
  return ref::BuildMlaInputs(KernelRequest(r.trace.plans.at(c.plan).request), no);
}

int64_t CountPlanMismatches(const gpu::GpuPlan& g, const ref::Plan& want, std::string* where) {
  const std::pair<const std::vector<int32_t>*, const ref::Int32Buffer*> bufs[] = {
      {&g.work_indptr, &want.work_indptr},
      {&g.work_info, &want.work_info},
      {&g.reduce_indptr, &want.reduce_indptr},
      {&g.reduce_final_map, &want.reduce_final_map},
      {&g.reduce_partial_map, &want.reduce_partial_map}};
  const char* names[] = {"work_indptr", "work_info", "reduce_indptr", "reduce_final_map",
                         "reduce_partial_map"};
  int64_t bad = 0;
  for (int i = 0; i < 5; ++i) {
    const auto& a = *bufs[i].first;
    const auto& b = *bufs[i].second;
    if (static_cast<int64_t>(a.size()) != b.size()) {
      if (bad++ == 0)
        *where = std::string(names[i]) + " size " + std::to_string(a.size()) + " vs " +
                 std::to_string(b.size());
      continue;
    }
    for (int64_t j = 0; j < b.size(); ++j) {
      if (b.cells[j] == ref::Cell::kUndefined || a[j] == b.data[j]) continue;
      if (bad++ == 0)
        *where = std::string(names[i]) + "[" + std::to_string(j) + "]: gpu " +
                 std::to_string(a[j]) + " reference " + std::to_string(b.data[j]);
    }
  }
  if (g.num_tiles != want.derived.num_tiles || g.payload != want.derived.payload ||
      g.oob_stores != 0 || g.walk_failed) {
    if (bad++ == 0) *where = "num_tiles/payload/stores differ";
  }
  return bad;
}

// The GPU planner against the reference planner, once per plan snapshot a decode call uses.
std::vector<GpuPlanCheck> CheckPlans(const sim::ReplayReport& r) {
  std::vector<GpuPlanCheck> out;
  std::vector<bool> seen(r.trace.plans.size(), false);
  for (const sim::Call& c : r.trace.calls) {
    if (c.kind != sim::CallKind::kDecode || c.plan < 0 || seen[c.plan]) continue;
    seen[c.plan] = true;
    const sim::PlanSnapshot& snap = r.trace.plans[c.plan];
    GpuPlanCheck pc;
    pc.plan = snap.name;
    auto want = ref::PlanMlaMetadata(snap.request);
    if (!want.ok()) {
      pc.note = "the reference planner refuses its request (" + want.status().message() +
                "); not compared";
      out.push_back(pc);
      continue;
    }
    const gpu::GpuPlan g = gpu::plan_mla_metadata(snap.request, ref::PlannerChoice::kAiterDispatch);
    pc.compared = true;
    pc.kernel = g.parallel ? "parallel" : "serial";
    pc.mismatches = CountPlanMismatches(g, *want, &pc.first_mismatch);
    out.push_back(pc);
  }
  return out;
}

// Sentinel run of one decode call: the outputs of the real rows against the CPU plan-driven run
// (and the truth), the rows past q / o against the simulator.
void SentinelCall(const sim::ReplayReport& r, const sim::Call& c, GpuCallCheck& k) {
  const sim::PlanSnapshot& snap = r.trace.plans.at(c.plan);
  const ref::PlanRequest req = KernelRequest(snap.request);
  auto in = InputsOf(r, c);
  if (!in.ok()) {
    k.not_modelled = "the numerics cannot model the request the engine hands this call (" +
                     in.status().ToString() + ")";
    return;
  }
  gpu::DecodeResult g;
  try {
    g = RunCall(r, c, *in, "");
  } catch (const std::invalid_argument& e) {
    // The runner refuses what it cannot launch safely, e.g. a plan whose indptrs point past its
    // own buffers (a class-D overflow the CPU report names): not run, not a disagreement.
    k.not_modelled = std::string("the GPU runner refuses the plan (") + e.what() + ")";
    return;
  }
  k.kernel = g.kernel;
  auto mono = ref::RunMonolithic(*in, KernelPrecision());
  if (!mono.ok()) {
    k.error = "CPU monolithic run failed: " + mono.status().ToString();
    return;
  }
  ref::PlanExecOptions exec;
  exec.precision = KernelPrecision();
  exec.empty_rows = gpu::EmptyRowPolicyOf(c.contract->semantics);
  auto driven = ref::RunPlanDriven(*in, req, snap.plan, exec);
  if (!driven.ok()) {
    k.error = "CPU plan-driven run failed: " + driven.status().ToString();
    return;
  }
  k.tol = ref::TolerancesFor(*in, *mono, KernelPrecision());
  // real rows only: the rows of padding requests are the engine's to discard
  const int64_t out_rows = static_cast<int64_t>(g.lse.size()) / in->num_heads;
  k.rows_compared = std::min(out_rows, FirstPaddingRow(req, snap.real_requests));
  const int64_t n_lse = k.rows_compared * in->num_heads, n_o = n_lse * in->head_dim_v;
  const ref::AttentionOutput& want = driven->out;
  std::vector<uint8_t> skip_pairs =
      ref::PoisonPairMask(driven->poison, in->q_rows(), in->num_heads);
  skip_pairs.resize(static_cast<size_t>(n_lse));
  for (uint8_t f : skip_pairs) k.poisoned_pairs += f;
  for (const ref::PoisonFinding& f : driven->poison)
    k.numerics_undefined =
        k.numerics_undefined || (f.output == ref::NumericsBuffer::kO && f.row_begin < 0);
  k.numerics_undefined = k.numerics_undefined || driven->poison_dropped > 0;
  std::vector<uint8_t> skip_o(static_cast<size_t>(n_o));
  for (size_t i = 0; i < skip_o.size(); ++i) skip_o[i] = skip_pairs[i / in->head_dim_v];
  k.o = ref::CompareTensors(g.o.data(), want.o.data(), n_o, k.tol.o, skip_o.data());
  k.lse = ref::CompareTensors(g.lse.data(), want.lse.data(), n_lse, k.tol.lse, skip_pairs.data());
  k.o_truth = ref::CompareTensors(g.o.data(), mono->o.data(), n_o, k.tol.o);
  k.lse_truth = ref::CompareTensors(g.lse.data(), mono->lse.data(), n_lse, k.tol.lse);
  k.q_read_min = g.q_rows_read_min;
  k.q_read_max = g.q_rows_read_max;
  if (g.q_rows_read_max >= c.q_rows) k.q_seen = {c.q_rows, g.q_rows_read_max};
  for (const gpu::TailDamage& t : g.tails) {
    if (t.buffer == "o")
      k.o_seen = {t.first_row, t.last_row};
    else if (t.buffer == "lse")
      k.lse_seen = {t.first_row, t.last_row};
    else
      k.other_tails.push_back(fmt::format("{} rows {}..{}", t.buffer, t.first_row, t.last_row));
  }
}

std::string CallText(const GpuCallCheck& k) {
  if (k.refused)
    return fmt::format("  call {} {}: refused by the engine's guard, not run\n", k.index, k.step);
  std::string s =
      fmt::format("  call {} {} {}: q/o {} rows, plan covers {}{}\n", k.index, k.step, k.name,
                  k.q_rows, k.plan_rows, k.kernel.empty() ? "" : ", kernel " + k.kernel);
  if (!k.not_modelled.empty())
    return s + "    not run: " + k.not_modelled + "; the CPU report covers it\n";
  if (!k.error.empty()) return s + "    " + k.error + "\n";
  if (k.numerics_undefined)
    s += "    numerics not compared: the plan-driven run reports poison whose rows are unknown "
         "(the plan reads "
         "outside its metadata), so no output of this call is defined\n";
  else
    s += fmt::format(
        "    numerics vs CPU plan-driven ({} real rows{}): o max_abs {:.3g} (atol {:.3g} rtol "
        "{:.3g}) cos_diff {:.3g}, "
        "lse max_abs {:.3g}: {}\n",
        k.rows_compared,
        k.poisoned_pairs == 0
            ? ""
            : fmt::format(", {} poisoned (row, head) pairs skipped", k.poisoned_pairs),
        k.o.max_abs, k.tol.o.atol, k.tol.o.rtol, k.o.cos_diff, k.lse.max_abs,
        k.numerics_ok() ? "within tolerance" : "OUTSIDE TOLERANCE");
  if (!k.truth_ok())
    s += fmt::format(
        "    vs the truth (monolithic): o max_abs {:.3g} cos_diff {:.3g}, NaN mismatches {}: the "
        "plan's answer is "
        "wrong (a finding, not a disagreement)\n",
        k.o_truth.max_abs, k.o_truth.cos_diff,
        k.o_truth.nan_mismatches + k.lse_truth.nan_mismatches);
  s += fmt::format(
      "    q read past the end:    gpu rows {} (access log: read {}..{}), simulator rows {}: {}\n",
      k.q_seen.str(), k.q_read_min, k.q_read_max, k.q_pred.str(),
      k.q_agree() ? "agree" : "DISAGREE");
  s += fmt::format(
      "    o written past the end: gpu rows {} (sentinel tail; lse tail {}), simulator rows {}: "
      "{}\n",
      k.o_seen.str(), k.lse_seen.str(), k.o_pred.str(), k.o_agree() ? "agree" : "DISAGREE");
  if (!k.other_tails.empty()) {
    s += "    other sentinel tails damaged (not predicted):";
    for (const std::string& t : k.other_tails) s += " " + t;
    s += "\n";
  }
  for (const GpuGuardRun& g : k.guards) {
    if (g.child_failed)
      s += fmt::format("    guard {}: the child failed: {}\n", g.buffer, g.detail);
    else if (g.faulted)
      s += fmt::format(
          "    guard {}: FAULT caught in the child ({}) -> attributed to {}, the only guarded "
          "buffer "
          "(it ends at the end of its mapped range); simulator: {} {} rows {}: {}\n",
          g.buffer, g.detail, g.buffer, g.buffer, g.buffer == "q" ? "read" : "write",
          g.predicted.str(), g.agree ? "agree" : "DISAGREE");
    else
      s += fmt::format(
          "    guard {}: no fault ({}); simulator: {}: {}\n", g.buffer, g.detail,
          g.predicted.any() ? "rows " + g.predicted.str() + " past the end" : "in bounds",
          g.agree ? "agree" : "DISAGREE");
  }
  return s;
}

std::string GpuText(const GpuReport& g) {
  std::string s = fmt::format("\ngpu ({}, mode {}):\n", g.device, g.mode);
  for (const GpuPlanCheck& p : g.plans) {
    if (!p.compared)
      s += fmt::format("  plan {}: {}\n", p.plan, p.note);
    else
      s += fmt::format(
          "  plan {}: GPU planner ({} kernel) vs reference planner: {}\n", p.plan, p.kernel,
          p.mismatches == 0
              ? "bit-identical"
              : fmt::format("{} MISMATCHES, first {}", p.mismatches, p.first_mismatch));
  }
  for (const GpuCallCheck& k : g.calls) s += CallText(k);
  if (!g.device_error.empty()) s += "  device error: " + g.device_error + "\n";
  s += fmt::format("gpu verdict: {} ({} decode calls run)\n",
                   g.agree() ? "agrees with the simulator" : "DISAGREES with the simulator",
                   g.calls_run);
  return s;
}

nlohmann::json CompareJson(const ref::CompareResult& c, const ref::Tolerance& t) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  return {{"max_abs", num(c.max_abs)},
          {"cos_diff", num(c.cos_diff)},
          {"elements", c.elements},
          {"tolerance_violations", c.tolerance_violations},
          {"nan_mismatches", c.nan_mismatches},
          {"inf_mismatches", c.inf_mismatches},
          {"passed", c.passed},
          {"atol", num(t.atol)},
          {"rtol", num(t.rtol)}};
}

nlohmann::json GpuJson(const GpuReport& g) {
  using nlohmann::json;
  json plans = json::array(), calls = json::array();
  for (const GpuPlanCheck& p : g.plans) {
    json j = {{"plan", p.plan}, {"compared", p.compared}};
    if (!p.compared)
      j["note"] = p.note;
    else {
      j["kernel"] = p.kernel;
      j["mismatches"] = p.mismatches;
      j["first_mismatch"] = p.mismatches == 0 ? json() : json(p.first_mismatch);
    }
    plans.push_back(j);
  }
  for (const GpuCallCheck& k : g.calls) {
    json j = {{"index", k.index},
              {"step", k.step},
              {"call", k.name},
              {"run", !k.refused},
              {"agree", k.agree()}};
    if (k.refused) {
      calls.push_back(j);
      continue;
    }
    j["q_rows"] = k.q_rows;
    j["plan_rows"] = k.plan_rows;
    if (!k.not_modelled.empty() || !k.error.empty()) {
      if (!k.not_modelled.empty()) j["not_modelled"] = k.not_modelled;
      if (!k.error.empty()) j["error"] = k.error;
      calls.push_back(j);
      continue;
    }
    j["kernel"] = k.kernel;
    j["numerics"] = {{"rows_compared", k.rows_compared},
                     {"poisoned_pairs_skipped", k.poisoned_pairs},
                     {"undefined", k.numerics_undefined},
                     {"o", CompareJson(k.o, k.tol.o)},
                     {"lse", CompareJson(k.lse, k.tol.lse)},
                     {"passed", k.numerics_ok()},
                     {"truth",
                      {{"o", CompareJson(k.o_truth, k.tol.o)},
                       {"lse", CompareJson(k.lse_truth, k.tol.lse)},
                       {"passed", k.truth_ok()}}}};
    j["q_read_past_end"] = {{"gpu", k.q_seen.json()},
                            {"simulator", k.q_pred.json()},
                            {"agree", k.q_agree()},
                            {"access_log", {{"first", k.q_read_min}, {"last", k.q_read_max}}}};
    j["o_written_past_end"] = {{"gpu", k.o_seen.json()},
                               {"lse_gpu", k.lse_seen.json()},
                               {"simulator", k.o_pred.json()},
                               {"agree", k.o_agree()}};
    j["unpredicted_tails"] = k.other_tails;
    json guards = json::array();
    for (const GpuGuardRun& gr : k.guards)
      guards.push_back({{"buffer", gr.buffer},
                        {"faulted", gr.faulted},
                        {"child_failed", gr.child_failed},
                        {"detail", gr.detail},
                        {"simulator", gr.predicted.json()},
                        {"agree", gr.agree}});
    if (!k.guards.empty()) j["guard"] = guards;
    calls.push_back(j);
  }
  json out = {{"device", g.device},       {"mode", g.mode},
              {"plans", plans},           {"calls", calls},
              {"calls_run", g.calls_run}, {"verdict", g.agree() ? "agrees" : "disagrees"}};
  if (!g.device_error.empty()) out["device_error"] = g.device_error;
  return out;
}

std::string ReadAll(int fd) {
  std::string s;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) s.append(buf, static_cast<size_t>(n));
  return s;
}

// Runs `args` (argv[0] = this binary) in a child; returns its wait status and stdout + stderr.
int RunChild(const std::vector<std::string>& args, std::string* output) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  close(fds[1]);
  *output = ReadAll(fds[0]);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

constexpr int kChildFault = 4;  // the guard child's exit code when the device call failed

class ReplayCommand final : public Command {
 public:
  explicit ReplayCommand(CLI::App& parent) {
    app_ = parent.add_subcommand(kName,
                                 "Replay one engine step (verify + MTP drafts) of a "
                                 "scenario and report every access outside a buffer");
    app_->footer(
        "Exit codes: 0 clean, 1 violations, 2 bad input (the message names the JSON path).\n"
        "Examples: mlasim replay --builtin seed\n"
        "          mlasim replay case.json --profile atom-2026-11 --json\n");
    scenario_.Add(*app_);
    app_->add_flag("--json", json_, "print the report as JSON");
    app_->add_option("--layout-out", layout_out_,
                     "write the address-space layout (persistent buffers + the tensors of the "
                     "first call with a violation) as JSON, for `mlasim explain-fault`")
        ->type_name("FILE");
    app_->add_option("--html", html_out_,
                     "also write the report as one self-contained HTML page (call table, "
                     "memory maps, plan timelines; with --gpu the GPU's rows; docs/pictures.md)")
        ->type_name("FILE");
    gpu_opt_ =
        app_->add_option("--gpu", gpu_mode_,
                         "also run the decode calls on the GPU and compare with the simulator: "
                         "sentinel (default: sentinel tails + access log, GPU planner, numerics) "
                         "or guard (guard pages, each call in a child process); exit 1 on "
                         "any disagreement, 2 in a build without a GPU backend")
            ->expected(0, 1)
            ->type_name("[sentinel|guard]");
    app_->add_option("--gpu-child-call", child_call_, "internal: the guard-mode child")->group("");
    app_->add_option("--gpu-child-guard", child_guard_, "internal: the guard-mode child")
        ->group("");
    app_->add_option("--mutant", mutant_,
                     "replay with a registered simulator mutant switched on (a case written by "
                     "`mlasim mutants --out` shows its violation only with it)")
        ->type_name("NAME");
    app_->add_option("--scenario-out", scenario_out_,
                     "write the scenario as canonical JSON (every field spelled out; cu_count only "
                     "when set, 0 = the target's CUs)")
        ->type_name("FILE");
  }

  CLI::App* app() const override { return app_; }

  int Run(const Streams& io) override {
    StatusOr<sim::Scenario> s = scenario_.Load();
    if (!s.ok()) return Fail(io, s.status());
    const bool gpu = gpu_opt_->count() > 0;
    if (gpu) {
      if (gpu_mode_.empty()) gpu_mode_ = "sentinel";
      if (gpu_mode_ != "sentinel" && gpu_mode_ != "guard")
        return Fail(io, InvalidArgumentError(
                            "--gpu", "must be sentinel or guard (got '" + gpu_mode_ + "')"));
      if (!gpu::available()) {
        std::string why = "no GPU device is visible";
        try {
          if (gpu::device_name() == "none")
            why =
                "this mlasim was built without a GPU backend (GPU_BACKEND=NONE); rebuild with "
                "-DGPU_BACKEND=CUDA or HIP to run the trace on a device";
        } catch (const std::exception& e) {  // a GPU build on a machine without a usable driver
          why += std::string(" (") + e.what() + ")";
        }
        PrintError(io.err, kName, "--gpu", why);
        return kExitBadInput;
      }
    }
    sim::ExecuteOptions exec;
    if (!mutant_.empty()) {
      bool known = false;
      for (int m = 1; m < static_cast<int>(sim::SimMutant::kCount); ++m) {
        if (mutant_ == sim::SimMutantName(static_cast<sim::SimMutant>(m))) {
          exec.mutant = static_cast<sim::SimMutant>(m);
          known = true;
        }
      }
      if (!known)
        return Fail(io, InvalidArgumentError("--mutant", "no simulator mutant named '" + mutant_ +
                                                             "' (see mlasim mutants --list)"));
    }
    const bool html = app_->count("--html") > 0 && child_call_ < 0;
    if (html)
      if (Status st = CheckOutputFile("--html", html_out_); !st.ok()) return Fail(io, st);
    auto report = sim::Replay(*s, exec);
    if (!report.ok()) return Fail(io, report.status());
    if (gpu && child_call_ >= 0) return GuardChild(io, *report);
    if (!layout_out_.empty() && !WriteJson(io, "--layout-out", layout_out_, report->result.layout))
      return kExitBadInput;
    if (!scenario_out_.empty() &&
        !WriteJson(io, "--scenario-out", scenario_out_, sim::ScenarioToJson(*s)))
      return kExitBadInput;
    bool gpu_agrees = true;
    nlohmann::json gpu_json;
    if (json_) {
      nlohmann::json j = sim::ReportJson(*report);
      if (gpu) {
        const GpuReport g = GpuRun(*report);
        gpu_agrees = g.agree();
        j["gpu"] = gpu_json = GpuJson(g);
      }
      io.out << j.dump(2) << '\n';
    } else {
      io.out << sim::ReportText(*report);
      io.out.flush();
      if (gpu) {
        const GpuReport g = GpuRun(*report);
        gpu_agrees = g.agree();
        gpu_json = GpuJson(g);
        io.out << GpuText(g);
      }
    }
    if (html) {
      sim::ReplayHtmlOptions ho;
      ho.gpu = gpu ? &gpu_json : nullptr;
      const Status st = WriteOutputFile("--html", html_out_, sim::ReplayHtml(*report, ho));
      if (!st.ok()) return Fail(io, st);
    }
    if (!gpu_agrees) return kExitCheckFailed;
    return report->clean() ? kExitOk : kExitCheckFailed;
  }

 private:
  int Fail(const Streams& io, const Status& st) {
    PrintError(io.err, kName, st.field(), st.message());
    return ExitCodeFor(st);
  }
  bool WriteJson(const Streams& io, const char* flag, const std::string& path,
                 const nlohmann::json& j) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      PrintError(io.err, kName, flag, path + " is a directory");
      return false;
    }
    std::ofstream f(path);
    if (f) {
      f << j.dump(2) << '\n';
      f.flush();
    }
    if (!f) {  // could not open, or the write failed (a full disk, /dev/full)
      PrintError(io.err, kName, flag, "cannot write " + path);
      return false;
    }
    return true;
  }

  // Runs the decode calls on the device (both modes: plans, numerics, sentinel tails; guard mode
  // adds the guarded child runs). A device error ends the run and is reported, not thrown.
  GpuReport GpuRun(const sim::ReplayReport& r) {
    GpuReport g;
    g.device = gpu::device_name();
    g.mode = gpu_mode_;
    try {
      g.plans = CheckPlans(r);
      for (const sim::Call& c : r.trace.calls) {
        if (c.kind != sim::CallKind::kDecode) continue;
        GpuCallCheck k;
        k.index = c.index;
        k.step = c.step;
        k.name = c.name;
        k.q_rows = c.q_rows;
        k.plan_rows = r.trace.plans.at(c.plan).q_rows_covered;
        k.refused = c.guard_refused;
        k.q_pred = Predicted(r, c, "q", sim::Access::kRead);
        k.o_pred = Predicted(r, c, "o", sim::Access::kWrite);
        if (!k.refused) {
          ++g.calls_run;
          SentinelCall(r, c, k);
          if (gpu_mode_ == "guard" && k.error.empty() && k.not_modelled.empty()) GuardRuns(c, k);
        }
        g.calls.push_back(std::move(k));
      }
    } catch (const std::exception& e) {
      g.device_error = e.what();
    }
    return g;
  }

  // Guard mode: the call once with q guarded and once with o guarded, each in a child.
  void GuardRuns(const sim::Call& c, GpuCallCheck& k) {
    for (const char* buf : {"q", "o"}) {
      std::vector<std::string> args = {"mlasim", "replay"};
      if (!scenario_.case_file.empty())
        args.push_back(scenario_.case_file);
      else
        args.insert(args.end(), {"--builtin", scenario_.builtin});
      if (!scenario_.profile.empty()) args.insert(args.end(), {"--profile", scenario_.profile});
      if (!scenario_.kernel.empty()) args.insert(args.end(), {"--kernel", scenario_.kernel});
      if (!mutant_.empty()) args.insert(args.end(), {"--mutant", mutant_});
      args.insert(args.end(), {"--gpu", "guard", "--gpu-child-call", std::to_string(c.index),
                               "--gpu-child-guard", buf});
      std::string child_out;
      const int st = RunChild(args, &child_out);
      GpuGuardRun gr;
      gr.buffer = buf;
      gr.faulted =
          st != -1 && (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) == kChildFault));
      const bool clean = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
      gr.predicted = gr.buffer == "q" ? k.q_pred : k.o_pred;
      std::string line = child_out;
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      if (const auto nl = line.rfind('\n'); nl != std::string::npos) line = line.substr(nl + 1);
      gr.detail = line;
      if (!gr.faulted && !clean) {
        gr.child_failed = true;
        gr.detail = "status " + std::to_string(st) + ": " + line;
      }
      gr.agree = !gr.child_failed && gr.faulted == gr.predicted.any();
      k.guards.push_back(gr);
    }
  }

  // The guard-mode child: one call with one guarded buffer; one line of output.
  int GuardChild(const Streams& io, const sim::ReplayReport& r) {
    if (child_call_ >= static_cast<int>(r.trace.calls.size()) ||
        (child_guard_ != "q" && child_guard_ != "o")) {
      io.out << "bad child arguments\n";
      return kExitBadInput;
    }
    const sim::Call& c = r.trace.calls[child_call_];
    auto in = InputsOf(r, c);
    if (!in.ok()) {
      io.out << "inputs: " << in.status().message() << "\n";
      return kExitInternal;
    }
    try {
      const gpu::DecodeResult g = RunCall(r, c, *in, child_guard_);
      io.out << fmt::format(
          "ran clean: {} {} bytes, mapped {} bytes, guard granule {} bytes; q rows read {}..{}, o "
          "rows written {}..{}\n",
          child_guard_, g.guard.bytes, g.guard.mapped_bytes, g.guard.granularity, g.q_rows_read_min,
          g.q_rows_read_max, g.o_rows_written_min, g.o_rows_written_max);
      return kExitOk;
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (const auto p = what.find(" failed: "); p != std::string::npos) what = what.substr(p + 9);
      io.out << what << "\n";
      io.out.flush();
      return kChildFault;
    }
  }

  CLI::App* app_ = nullptr;
  CLI::Option* gpu_opt_ = nullptr;
  std::string gpu_mode_, child_guard_;
  int child_call_ = -1;
  ScenarioArgs scenario_;
  std::string mutant_, layout_out_, scenario_out_, html_out_;
  bool json_ = false;
};

}  // namespace

std::unique_ptr<Command> RegisterReplay(CLI::App& app) {
  return std::make_unique<ReplayCommand>(app);
}

}  // namespace mlasim::cli
