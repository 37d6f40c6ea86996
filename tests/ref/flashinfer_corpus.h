// File: tests/ref/flashinfer_corpus.h
//
// The FlashInfer MLAPlan golden corpus (tests/data/flashinfer-mlaplan.jsonl.gz, see
// docs/planners.md): random inputs, their JSON form, and the outcome of one MLAPlan call in a
// form both FlashInfer (through the host shim) and the reference produce, so that the corpus
// test, the live test and the generator compare the same things.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ref/flashinfer/mla_plan.h"

namespace mlasim::test {

struct FlashInferCase {
  std::string kind;       // which part of the distribution made it ("decode", "padded", ...)
  int32_t page_size = 1;  // tokens per page: kv_indptr counts ceil(kv_len / page_size) pages
  ref::flashinfer::MLAPlanInput input;
};

// Case `index` of the stream `seed`: zero lengths, graph-padded batches (zero-length pads),
// B up to 512, SM counts 1..160, causal and not, q lengths 0..8, page sizes 1..64, workspaces
// generous, exact or too small, a few planner errors (decreasing qo_indptr) and a few batches
// past the 16384-work capacity. Never an input FlashInfer crashes on (batch 0, 0 clusters).
FlashInferCase RandomFlashInferCase(uint64_t seed, int64_t index);

nlohmann::json CaseToJson(const FlashInferCase& c);
StatusOr<FlashInferCase> CaseFromJson(const nlohmann::json& j);

// Bytes past the int workspace's allocated part where overflowing lists can land: 4 bytes
// times (q tiles at 64 rows + num_sm + 1). Images are compared over allocated + slack bytes.
int64_t ImageSlackBytes(const ref::flashinfer::MLAPlanInput& input);

// What one MLAPlan call produced, as the corpus stores it.
struct FlashInferOutcome {
  bool ok = false;
  std::string error_field;  // region name or "qo_indptr" (the input FlashInfer refused)
  std::string error;        // the message (FlashInfer's what() or the Status), not compared
  std::vector<int64_t> plan_info;
  int64_t int_allocated_bytes = 0;  // bytes cudaMemcpyAsync copies to the device
  int64_t total_num_works = 0;
  // FNV-1a 64 of the page-locked int buffer's first image_bytes = int_allocated_bytes +
  // ImageSlackBytes (zero where never written): the lists, including any overflow.
  int64_t image_bytes = 0;
  std::string image_fnv1a64;
  // Every int-workspace list by region name; empty when a list overflows (the buffer then no
  // longer holds them separately).
  std::map<std::string, std::vector<int32_t>> lists;
};

// The reference's outcome for `input` (whatever MLAPlan returned, error or plan).
FlashInferOutcome ReferenceOutcome(const ref::flashinfer::MLAPlanInput& input);
// The outcome read back from an int buffer image laid out by `plan_info`, as FlashInfer leaves
// it (used for FlashInfer's page-locked buffer): lists at their plan_info offsets.
FlashInferOutcome OutcomeFromImage(const ref::flashinfer::MLAPlanInput& input,
                                   const std::vector<int64_t>& plan_info,
                                   const std::vector<uint8_t>& image, int64_t copied_bytes);
// Maps a FlashInfer error message to the field the reference names.
std::string ErrorFieldOfFlashInferMessage(const std::string& what);
// The message without flashinfer::Error's "Error in function 'F' at FILE:LINE: " prefix (the
// checkout's path does not belong in the corpus).
std::string StripFlashInferErrorLocation(const std::string& what);

nlohmann::json OutcomeToJson(const FlashInferOutcome& o);
StatusOr<FlashInferOutcome> OutcomeFromJson(const nlohmann::json& j);

// The corpus keeps the lists of plans of at most this many works (the image digest covers
// every plan's lists bit for bit; the lists make a mismatch readable).
inline constexpr int64_t kCorpusMaxListedWorks = 100;

// Human-readable differences, empty when `actual` reproduces `expected` exactly. Lists are
// compared when `expected` has them.
std::vector<std::string> CompareOutcomes(const FlashInferOutcome& expected,
                                         const FlashInferOutcome& actual);

}  // namespace mlasim::test
