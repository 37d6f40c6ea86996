// A consumer of the installed mlasim package: plans aiter-mla-metadata.md §6.1's worked example
// (KV lengths 300, 40, 700; qlen 1; 16 heads; 8 clusters; page 1) with mlasim::ref, checks it,
// and parses a .npy header with mlasim::io. Exit 0 only when every value is the known one.
#include <cstdio>
#include <string>
#include <vector>

#include "ref/plan_check.h"
#include "ref/planner.h"
#include "tools/io/npy_reader.h"

int main() {
  mlasim::ref::PlanRequest r;
  r.cu_count = 8;
  r.kv_indptr = {0, 300, 340, 1040};
  r.qo_indptr = {0, 1, 2, 3};
  r.kv_last_page_lens = {1, 1, 1};
  auto plan = mlasim::ref::PlanMlaMetadata(r);
  if (!plan.ok()) {
    std::printf("plan failed: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  const std::vector<int32_t> want = {0, 1, 2, 3, 4, 5, 6, 6, 6};
  const std::vector<int32_t> got(plan->work_indptr.data.begin(),
                                 plan->work_indptr.data.begin() + 9);
  const auto report = mlasim::ref::CheckPlan(r, *plan);
  const std::string npy = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                          "{'descr': '<i4', 'fortran_order': False, 'shape': (9,), }" +
                          std::string(118 - 57 - 1, ' ') + "\n";
  auto header = mlasim::io::ParseNpyHeader(npy, "work_indptr.npy");
  const bool ok = got == want && plan->num_works() == 6 && report.ok() && header.ok() &&
                  header->shape == std::vector<int64_t>{9} && header->data_offset == 128;
  std::printf("works %d, work_indptr[8] %d, checker %s, npy header %s: %s\n", plan->num_works(),
              got[8], report.ok() ? "ok" : "failed",
              header.ok() ? "ok" : header.status().ToString().c_str(), ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
