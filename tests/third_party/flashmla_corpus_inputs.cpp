// File: tests/third_party/flashmla_corpus_inputs.cpp
//
// Writes the FlashMLA scheduler corpus inputs (RandomFlashMlaCase) as gzip JSONL, one launch
// per line with the revisions it runs at; tools/gpu/flashmla_corpus.sh runs FlashMLA's kernels
// on them on the H200. Host only, no FlashMLA code:
//   build/bin/flashmla_corpus_inputs --seed 20261201 --count 1200
//     --out tests/data/flashmla-sched-inputs.jsonl.gz
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/ref/dialect_corpus.h"
#include "tests/ref/flashmla_corpus.h"

namespace {

int Usage() {
  std::fprintf(stderr, "usage: flashmla_corpus_inputs --seed N --count N --out FILE.jsonl.gz\n");
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
    std::fprintf(stderr, "flashmla_corpus_inputs: cannot write %s\n", out.c_str());
    return 2;
  }
  for (uint64_t index = 0; index < count; ++index) {
    const test::FlashMlaCase c = test::RandomFlashMlaCase(seed, static_cast<int64_t>(index));
    nlohmann::json revisions = nlohmann::json::array();
    for (auto r : c.Revisions()) revisions.push_back(ref::flashmla::RevisionName(r));
    writer.Write(
        nlohmann::json{{"id", index}, {"revisions", revisions}, {"input", test::CaseToJson(c)}}
            .dump());
  }
  const Status closed = writer.Close();
  if (!closed.ok()) {
    std::fprintf(stderr, "flashmla_corpus_inputs: %s\n", closed.ToString().c_str());
    return 2;
  }
  std::printf("flashmla_corpus_inputs: %llu launches -> %s\n",
              static_cast<unsigned long long>(count), out.c_str());
  return 0;
}
