// libFuzzer harness: case directories (tools/io/case_dir.h, case_plan.h, npy_reader.h), the input
// of `mlasim check`. Input: chunks, each a 2-byte little-endian length and that many bytes; the
// first chunk is manifest.json, the next ones are the .npy files of the manifest's tensors in
// name order (a tensor without a chunk gets the last one). Runs the manifest and header checks,
// the planner read, the layout and, for small requests, the plan checker on the captured
// buffers. Seeds: tests/fuzz/corpus/case_dir/ (docs/cli.md's worked example).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/harness_chunks.h"
#include "ref/plan_check.h"
#include "tools/io/case_dir.h"
#include "tools/io/case_plan.h"
#include "tools/io/npy_reader.h"
#include "tools/io/plan_buffers.h"

namespace {

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> chunks = Chunks(data, size);
  if (chunks.empty()) return 0;
  for (size_t i = 1; i < chunks.size(); ++i) (void)mlasim::io::ParseNpyHeader(chunks[i], "x.npy");
  auto parsed = mlasim::io::ParseCaseManifest(chunks[0], "manifest.json");
  if (!parsed.ok()) return 0;
  mlasim::io::MemoryCaseFiles files;
  files.files["manifest.json"] = chunks[0];
  for (size_t i = 0; i < parsed->tensors.size(); ++i)
    files.files[parsed->tensors[i].file] = chunks[std::min(i + 1, chunks.size() - 1)];
  auto m = mlasim::io::OpenCase(files);
  if (!m.ok()) return 0;
  (void)mlasim::io::CaseLayout(*m);
  auto planner = mlasim::io::ReadCasePlanner(files, *m);
  if (!planner.ok() || !planner->request || !planner->buffers) return 0;
  const auto& r = *planner->request;
  if (r.kv_indptr.size() > 600 || r.cu_count > 2048 || r.heads_per_head_k > 256 ||
      r.num_heads_k > 8 || r.max_seqlen_qo > 64 || r.kv_indptr.back() > (1 << 20) ||
      r.qo_indptr.empty() || r.qo_indptr.back() - r.qo_indptr.front() > (1 << 16))
    return 0;
  auto plan = mlasim::io::PlanFromBuffers(r, planner->views(), mlasim::io::kDefaultUnwrittenValue);
  if (plan.ok()) (void)mlasim::ref::CheckPlan(r, *plan);
  return 0;
}
