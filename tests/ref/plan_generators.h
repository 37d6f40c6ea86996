// RapidCheck generators of planner requests, shared by the planner's property tests.
#pragma once

#include <rapidcheck.h>

#include <utility>
#include <vector>

#include "ref/metadata.h"
#include "tests/ref/plan_builders.h"

namespace mlasim::ref::test {

// KV lengths with weight on the edges: 0, 1, tails shorter than qlen, multiples of 16 and 64,
// and long contexts up to 64k tokens.
inline rc::Gen<int32_t> GenKvTokens(int32_t qlen) {
  return rc::gen::weightedOneOf<int32_t>(
      {{2, rc::gen::just<int32_t>(0)},
       {2, rc::gen::just<int32_t>(1)},
       {2, rc::gen::inRange<int32_t>(0, qlen + 1)},
       {2, rc::gen::map(rc::gen::inRange<int32_t>(1, 64), [](int32_t k) { return 16 * k; })},
       // Just past a split boundary: the tail rule's territory.
       {3, rc::gen::map(
               rc::gen::pair(rc::gen::inRange<int32_t>(1, 400), rc::gen::inRange<int32_t>(1, 8)),
               [](std::pair<int32_t, int32_t> p) { return 16 * p.first + p.second; })},
       {2, rc::gen::map(rc::gen::inRange<int32_t>(1, 64), [](int32_t k) { return 64 * k; })},
       {4, rc::gen::inRange<int32_t>(0, 4096)},
       {1, rc::gen::inRange<int32_t>(0, 65537)}});
}

inline rc::Gen<PlanRequest> GenRequest() {
  return rc::gen::exec([] {
    const auto target = *rc::gen::element(Arch::kGfx942, Arch::kGfx950, Arch::kSm90);
    const int32_t heads = *rc::gen::element(16, 16, 32, 48, 64, 96, 128, 8, 24);
    const int32_t qlen = *rc::gen::weightedElement<int32_t>(
        {{4, 1}, {2, 2}, {1, 3}, {3, 4}, {1, 5}, {1, 6}, {1, 7}, {1, 8}});
    const int32_t page = *rc::gen::element(1, 1, 16, 64);
    const int32_t batch =
        *rc::gen::weightedOneOf<int32_t>({{6, rc::gen::inRange<int32_t>(1, 9)},
                                          {3, rc::gen::inRange<int32_t>(1, 65)},
                                          {1, rc::gen::inRange<int32_t>(1, 513)}});
    const auto kv =
        *rc::gen::container<std::vector<int32_t>>(static_cast<size_t>(batch), GenKvTokens(qlen));
    const int32_t clusters = *rc::gen::weightedOneOf<int32_t>(
        {{2, rc::gen::just<int32_t>(0)}, {3, rc::gen::inRange<int32_t>(2, 17)}});
    PlanRequest r =
        test::DenseRequest(target, heads, qlen, kv, clusters, page, *rc::gen::element(16, 16, 32));
    if (*rc::gen::weightedElement<bool>({{1, true}, {4, false}})) {
      r.topk = *rc::gen::element(64, 2048);
      r.max_seqlen_qo = r.uni_seqlen_qo = 1;
    }
    r.q_dtype = *rc::gen::element(DType::kBf16, DType::kFp8);
    r.kv_dtype = *rc::gen::element(r.q_dtype, r.q_dtype, DType::kBf16, DType::kFp8);
    r.is_causal = *rc::gen::weightedElement<bool>({{6, true}, {1, false}});
    r.max_split_per_batch = *rc::gen::element(-1, -1, 1, 4, 16, 32);
    r.revision =
        *rc::gen::weightedElement<Revision>({{5, Revision::k2026_08}, {1, Revision::k2026_03}});
    return r;
  });
}

}  // namespace mlasim::ref::test
