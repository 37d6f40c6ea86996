// File: tools/mlasim/plan_input.h
//
// Building a planner request from command-line flags or from a JSON request file, with error
// messages that name what the user typed: a flag (`--heads`) for flags, a JSON path
// (`input.kv_indptr[3]`) for files. Shared by `mlasim plan` and later subcommands that plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ref/limits.h"
#include "ref/metadata.h"

namespace mlasim::cli {

// Where a request came from; decides how planner field names are shown.
enum class InputSource { kFlags, kRequestFile };

// The plan-defining flags, as typed (numbers are parsed by RequestFromFlags so that every error
// names its flag). Defaults are those of `mlasim plan --help`.
struct PlanFlags {
  std::string kv_lens;  // tokens per request, comma separated
  std::string qlen = "1";
  std::string heads = "16";
  std::string clusters;  // empty: the target's CU count
  std::string page_size = "1";
  std::string kv_granularity = "16";
  std::string q_dtype = "bf16";
  std::string kv_dtype = "bf16";
  std::string target = "gfx942";
  std::string revision = "2026-08";
  std::string topk = "-1";
  std::string max_split_per_batch = "-1";
  bool no_causal = false;
  // The options above, to tell which ones the user gave.
  std::vector<CLI::Option*> options;

  // Names of the flags given on the command line ("--heads", ...), in registration order.
  std::vector<std::string> GivenFlags() const;
};

// Adds the flags above to `cmd`, bound to `flags` (which must outlive the parse).
void AddPlanFlags(CLI::App& cmd, PlanFlags& flags);

// Builds the request aiter's caller would pass for these flags: kv_indptr in pages
// (ceil(len / page_size) per request), kv_last_page_lens = len - (pages-1)*page_size (page_size for
// an empty request), qo_indptr = qlen*i. Dense: qlen = max_seqlen_qo = uni_seqlen_qo = --qlen.
// Sparse (--topk >= 0): aiter's sparse convention, max_seqlen_qo = uni_seqlen_qo = 1 and sizing
// qlen = --qlen. Errors name the flag. Runs CheckRequestLimits.
StatusOr<ref::PlanRequest> RequestFromFlags(const PlanFlags& flags);

// Reads a JSON file holding a golden `input` object, or a whole golden record with an `input`
// key (decode-update keys are then accepted and ignored). Errors name "--request" (file, syntax)
// or the JSON path of the field. Runs CheckRequestLimits.
StatusOr<ref::PlanRequest> RequestFromFile(const std::string& path);

// The limits every planning path applies: one table, ref/limits.h (docs/limits.md).
using ref::CheckPlannerLimits;
using ref::CheckRequestLimits;
using ref::CheckSizesLimit;

// Shows a planner field name ("heads_per_head_k", "kv_indptr[3]") as the user knows it: the flag
// for flags ("--heads"), the JSON path for request files ("input.heads_per_head_k").
std::string DisplayField(const std::string& planner_field, InputSource source);

// "auto" | "serial" | "parallel" (field --planner; ref::kPlannerChoiceNames), blanks trimmed.
StatusOr<ref::PlannerChoice> ParsePlannerChoice(const std::string& text);

}  // namespace mlasim::cli
