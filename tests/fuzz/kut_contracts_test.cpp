// fuzz/kut_check.h WithKutContracts: a kernel under test brings its decode and reduce contracts;
// they replace the scenario's contracts of those call kinds, and the scenario's contracts of
// other call kinds (an index fill of its own) stay.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fuzz/kut_check.h"
#include "fuzz/kut_library.h"
#include "sim/contract.h"
#include "sim/scenario.h"

namespace mlasim::fuzz {
namespace {

std::shared_ptr<const sim::Contract> Builtin(sim::CallKind call, const std::string& variant) {
  auto c = sim::BuiltinContract(call, variant, "test");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : nullptr;
}

// The first built-in contract of `call` (whatever its variant).
std::shared_ptr<const sim::Contract> AnyOf(sim::CallKind call) {
  for (const auto& c : sim::BuiltinContracts())
    if (c->call == call) return c;
  ADD_FAILURE() << "no built-in contract of kind " << sim::CallKindName(call);
  return nullptr;
}

TEST(KutContracts, TheKernelsReplaceDecodeAndReduceAndOtherKindsStay) {
  KutDescription d;
  d.decode_contract = Builtin(sim::CallKind::kDecode, "asm");
  d.reduce_contract = AnyOf(sim::CallKind::kReduce);
  const auto fill = AnyOf(sim::CallKind::kIndexFill);
  const auto own_decode = Builtin(sim::CallKind::kDecode, "hk");
  ASSERT_TRUE(d.decode_contract && d.reduce_contract && fill && own_decode);

  sim::Scenario s;
  s.contracts = {own_decode, fill};
  const sim::Scenario out = WithKutContracts(s, d);
  const std::vector<std::shared_ptr<const sim::Contract>> want = {fill, d.decode_contract,
                                                                  d.reduce_contract};
  EXPECT_EQ(out.contracts, want);
  EXPECT_EQ(s.contracts.size(), 2u);  // the scenario given is not changed

  sim::Scenario none;  // no contracts of its own: the kernel's two
  EXPECT_EQ(WithKutContracts(none, d).contracts,
            (std::vector<std::shared_ptr<const sim::Contract>>{d.decode_contract,
                                                               d.reduce_contract}));
}

}  // namespace
}  // namespace mlasim::fuzz
