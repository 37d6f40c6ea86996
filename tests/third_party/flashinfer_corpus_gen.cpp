// File: tests/third_party/flashinfer_corpus_gen.cpp
//
// Writes the FlashInfer MLAPlan golden corpus: random inputs (RandomFlashInferCase) and what
// FlashInfer's own MLAPlan, compiled from the checkout named by -DMLASIM_FLASHINFER_DIR
// through the host shim, produced for each. The reference is not consulted. Built only with
// that option:
//   build/bin/flashinfer_corpus_gen --seed 20261201 --count 1200
//     --out tests/data/flashinfer-mlaplan.jsonl.gz
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/ref/dialect_corpus.h"
#include "tests/ref/flashinfer_corpus.h"
#include "tests/third_party/flashinfer_shim.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: flashinfer_corpus_gen --seed N --count N --out FILE.jsonl.gz\n");
  return 2;
}

bool ParseU64(const char* s, uint64_t* v) {
  char* end = nullptr;
  *v = std::strtoull(s, &end, 10);
  return end != s && *end == '\0' && s[0] != '-';
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mlasim;
  uint64_t seed = 0, count = 0;
  std::string out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seed" && ParseU64(argv[i + 1], &seed)) continue;
    if (flag == "--count" && ParseU64(argv[i + 1], &count) && count <= 1000000) continue;
    if (flag == "--out") {
      out = argv[i + 1];
      continue;
    }
    return Usage();
  }
  if (argc % 2 == 0 || out.empty() || count == 0) return Usage();
  test::GzipLineWriter writer(out);
  if (!writer.ok()) {
    std::fprintf(stderr, "flashinfer_corpus_gen: cannot write %s\n", out.c_str());
    return 2;
  }
  int64_t errors = 0, overflows = 0;
  for (uint64_t index = 0; index < count; ++index) {
    const test::FlashInferCase c = test::RandomFlashInferCase(seed, static_cast<int64_t>(index));
    const auto run = third_party::RunFlashInferMLAPlan(c.input, test::ImageSlackBytes(c.input));
    test::FlashInferOutcome o;
    if (run.ok) {
      o = test::OutcomeFromImage(c.input, run.plan_info, run.page_locked, run.copied_bytes);
      overflows += o.total_num_works > ref::flashinfer::kMaxTotalNumWorks;
      if (o.total_num_works > test::kCorpusMaxListedWorks) o.lists.clear();
    } else {
      o.error = test::StripFlashInferErrorLocation(run.error);
      o.error_field = test::ErrorFieldOfFlashInferMessage(run.error);
      ++errors;
    }
    const nlohmann::json record = {{"id", index},
                                   {"seed", seed},
                                   {"input", test::CaseToJson(c)},
                                   {"output", test::OutcomeToJson(o)}};
    writer.Write(record.dump());
  }
  const Status closed = writer.Close();
  if (!closed.ok()) {
    std::fprintf(stderr, "flashinfer_corpus_gen: %s\n", closed.ToString().c_str());
    return 2;
  }
  std::printf(
      "flashinfer_corpus_gen: %llu records (%lld planner errors, %lld over the work "
      "capacity) -> %s\n",
      static_cast<unsigned long long>(count), static_cast<long long>(errors),
      static_cast<long long>(overflows), out.c_str());
  return 0;
}
