// File: sim/report_html.h
//
// The replay report as one self-contained HTML page (`mlasim replay --html FILE`,
// docs/pictures.md): the step's shape and verdict, the call table (one row per call with its
// verdict), the violations, for `--gpu` runs the GPU's observation against the simulator's
// prediction, a memory map around each out-of-bounds violation (sim/memory_map_svg.h) and a plan
// timeline per plan snapshot a kernel call consumes (sim/plan_svg.h, the violating work items
// red and labelled). Inline SVG and one stylesheet; no script, no
// external asset; every string from the input is HTML-escaped. Pure functions: the same report
// gives the same bytes. The section writers are public so that pages holding several cases
// (`mlasim check --html`) reuse them.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/plan_svg.h"
#include "sim/replay.h"

namespace mlasim::sim {

struct ReplayHtmlOptions {
  // The "gpu" object of `mlasim replay --gpu --json` (tools/mlasim/cmd_replay.cpp, GpuJson:
  // device, mode, plans[], calls[] with numerics / q_read_past_end / o_written_past_end /
  // guard[], calls_run, verdict), or null for a simulator-only page.
  const nlohmann::json* gpu = nullptr;
  std::string command;  // the command line that made the page, shown under the title ("" none)
  // Prefix of the section's element ids (headings: calls, violations, memory, plans, gpu), for
  // pages holding several sections ("case3-"); a page of one replay leaves it empty.
  std::string id_prefix;
};

// Bounds of one page: memory maps drawn (one per out-of-bounds violation) and violation rows
// listed; the page says how many more there were.
inline constexpr int32_t kMaxMemoryMaps = 32;
inline constexpr int32_t kMaxViolationRows = 500;

// The whole page.
std::string ReplayHtml(const ReplayReport& r, const ReplayHtmlOptions& o = {});
// Everything but the page shell: one <section class="replay"> (title, summary, every part below).
std::string ReplaySectionHtml(const ReplayReport& r, const ReplayHtmlOptions& o = {});

// <table class="calls">: call, step, table row, name, kind, kernel, q/o rows, plan, plan rows,
// verdict ("clean" or the violations' consequences).
std::string CallTableHtml(const ReplayReport& r);
// <table class="violations">: kind, class, call, buffer, access, rows, past the end, work items,
// consequence, detail.
std::string ViolationTableHtml(const ReplayReport& r);
// A memory map (<svg class="memory-map">) per out-of-bounds violation, in report order.
std::string MemoryMapsHtml(const ReplayReport& r);
// One picture per plan snapshot that a decode or reduce call consumes or a violation names
// (Trace::plans order). Marks: the work items of each violation of a call on that snapshot
// (decode and plan calls list work items; a reduce lists tiles, drawn as the tile's pieces).
std::vector<PlanPicture> ReplayPlanPictures(const ReplayReport& r);
std::string PlanTimelinesHtml(const ReplayReport& r);
// The GPU part from the "gpu" JSON object (see ReplayHtmlOptions::gpu): the verdict, the plan
// comparison, per decode call the rows past q / o the GPU touched against the rows the
// simulator predicts (an SVG, <svg class="gpu-rows">) and a table with numerics and guard runs.
// Missing keys read as absent values; a non-object gives one line saying so.
std::string GpuSectionHtml(const nlohmann::json& gpu);

}  // namespace mlasim::sim
