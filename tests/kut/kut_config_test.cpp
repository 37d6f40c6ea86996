// The one parser of a kernel under test's --kernel-config (kernels/kut/kut_config.h) and the keys
// of mlasim's three kernels (CPU, GPU, aiter adapter): every error return with its exact message,
// and the boundaries of each key (first and last word, 0 / limit / limit + 1 of an integer). The
// kernels themselves: KutLibrary.CpuKernelRefusesAConfigItDoesNotKnow (through the loader),
// kut_aiter.AiterKut.DescribeRefuses* (the aiter adapter against fakes), and the GPU kernels' own
// mapping (kernels/kut/gpu_config.h, what gpu_kut.hip runs) below.
#include "kernels/kut/kut_config.h"

#include "kernels/kut/gpu_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mlasim::kut_config {
namespace {

// The values of `text`, or the error message prefixed with "error: ".
std::string Values(const char* text, const std::vector<ConfigKey>& keys) {
  std::vector<int64_t> v;
  std::string why;
  if (!Parse(text, keys, &v, &why)) return "error: " + why;
  std::string out;
  for (int64_t x : v) out += (out.empty() ? "" : ",") + std::to_string(x);
  return out;
}

const std::string kCpuUsage = "config is variant=asm|opus|hk|self[,order=forward|reverse]";
const std::string kGpuUsage = "config is variant=asm|opus|hk[,tiling=0..10]";
const std::string kAiterUsage = "config is variant=asm[,heads=16|any]";

TEST(KutConfig, UsageOfEachKernelIsItsKeysAndValues) {
  EXPECT_EQ("config is " + Usage(CpuKeys()), kCpuUsage);
  EXPECT_EQ("config is " + Usage(GpuKeys()), kGpuUsage);
  EXPECT_EQ("config is " + Usage(AiterKeys()), kAiterUsage);
}

TEST(KutConfig, EmptyOrNullTextIsEveryDefault) {
  EXPECT_EQ(Values("", CpuKeys()), "0,0");
  EXPECT_EQ(Values(nullptr, CpuKeys()), "0,0");
  EXPECT_EQ(Values("", GpuKeys()), "0,0");
  EXPECT_EQ(Values("", AiterKeys()), "0,0");
}

TEST(KutConfig, EveryWordOfEveryKeyIsItsIndex) {
  EXPECT_EQ(Values("variant=asm", CpuKeys()), "0,0");
  EXPECT_EQ(Values("variant=self", CpuKeys()), "3,0");              // the last word
  EXPECT_EQ(Values("order=reverse,variant=hk", CpuKeys()), "2,1");  // keys in any order
  EXPECT_EQ(Values("variant=opus,tiling=3", GpuKeys()), "1,3");
  EXPECT_EQ(Values("variant=hk", GpuKeys()), "2,0");
  EXPECT_EQ(Values("variant=asm,heads=any", AiterKeys()), "0,1");
  EXPECT_EQ(Values("heads=16", AiterKeys()), "0,0");
}

TEST(KutConfig, IntegerBoundaries) {
  EXPECT_EQ(Values("tiling=0", GpuKeys()), "0,0");   // 0
  EXPECT_EQ(Values("tiling=1", GpuKeys()), "0,1");   // 1
  EXPECT_EQ(Values("tiling=10", GpuKeys()), "0,10");  // the limit
  EXPECT_EQ(Values("tiling=06", GpuKeys()), "0,6");  // decimal: a leading zero is not octal
  EXPECT_EQ(Values("tiling=11", GpuKeys()),          // limit + 1
            "error: tiling 11 is out of range (got 'tiling=11'; tiling is 0 to 10)");
}

TEST(KutConfig, IntegerBelowAPositiveMinimumIsOutOfRange) {
  const std::vector<ConfigKey> keys = {{"n", {}, 1, 3, 1}};
  EXPECT_EQ(Values("n=0", keys), "error: n 0 is out of range (got 'n=0'; n is 1 to 3)");
  EXPECT_EQ(Values("n=1", keys), "1");
  EXPECT_EQ(Values("n=3", keys), "3");
  EXPECT_EQ(Values("n=4", keys), "error: n 4 is out of range (got 'n=4'; n is 1 to 3)");
}

TEST(KutConfig, IntegerOfMoreDigitsThanInt64IsOutOfRangeNotWrapped) {
  // 2^64 + 6 would wrap to 6 in 64 bits; 2^63 to a negative number.
  EXPECT_EQ(Values("tiling=18446744073709551622", GpuKeys()),
            "error: tiling 18446744073709551622 is out of range (got "
            "'tiling=18446744073709551622'; tiling is 0 to 10)");
  const std::vector<ConfigKey> wide = {{"n", {}, 0, INT64_MAX, 0}};
  EXPECT_EQ(Values("n=9223372036854775807", wide), "9223372036854775807");  // 2^63 - 1: the limit
  EXPECT_EQ(Values("n=9223372036854775808", wide),                          // 2^63
            "error: n 9223372036854775808 is out of range (got 'n=9223372036854775808'; n is 0 "
            "to 9223372036854775807)");
}

TEST(KutConfig, IntegerThatIsNotDecimalDigitsIsRefused) {
  for (const char* v : {"0x3", "+3", "-1", " 3", "3 ", "3.0", "1e0", "", "٣"}) {
    const std::string text = std::string("tiling=") + v;
    EXPECT_EQ(Values(text.c_str(), GpuKeys()), "error: tiling '" + std::string(v) +
                                                   "' is not a decimal integer (got '" + text +
                                                   "'; tiling is 0 to 10)");
  }
}

TEST(KutConfig, WordTheKeyDoesNotTakeIsRefused) {
  EXPECT_EQ(Values("variant=fast", CpuKeys()),
            "error: unknown variant 'fast' (got 'variant=fast'; variant is asm, opus, hk or self)");
  EXPECT_EQ(Values("variant=self", GpuKeys()),  // the CPU kernel's word, not the GPU kernel's
            "error: unknown variant 'self' (got 'variant=self'; variant is asm, opus or hk)");
  EXPECT_EQ(Values("variant=ASM", GpuKeys()),  // words are case-sensitive
            "error: unknown variant 'ASM' (got 'variant=ASM'; variant is asm, opus or hk)");
  EXPECT_EQ(Values("variant=hk,order=", CpuKeys()),  // an empty value
            "error: unknown order '' (got 'variant=hk,order='; order is forward or reverse)");
  EXPECT_EQ(Values("variant=opus", AiterKeys()),  // a key's note says why
            "error: unknown variant 'opus' (got 'variant=opus'; variant is asm: the only stage-1 "
            "kernel this adapter calls)");
  EXPECT_EQ(Values("heads=32", AiterKeys()),
            "error: unknown heads '32' (got 'heads=32'; heads is 16 or any)");
}

TEST(KutConfig, KeyGivenTwiceIsRefusedInEveryKernel) {
  EXPECT_EQ(Values("variant=asm,variant=hk", CpuKeys()),
            "error: variant given twice (got 'variant=asm,variant=hk'; each key at most once)");
  EXPECT_EQ(Values("tiling=1,variant=hk,tiling=2", GpuKeys()),
            "error: tiling given twice (got 'tiling=1,variant=hk,tiling=2'; each key at most "
            "once)");
  EXPECT_EQ(Values("variant=asm,variant=asm", GpuKeys()),  // the same value twice too
            "error: variant given twice (got 'variant=asm,variant=asm'; each key at most once)");
  EXPECT_EQ(Values("heads=any,heads=16", AiterKeys()),
            "error: heads given twice (got 'heads=any,heads=16'; each key at most once)");
}

TEST(KutConfig, EmptyItemIsRefusedWherevertheCommaIs) {
  const std::string why = "error: empty item: a leading, trailing or doubled comma (got '";
  EXPECT_EQ(Values("variant=asm,", GpuKeys()), why + "variant=asm,'; " + kGpuUsage + ")");
  EXPECT_EQ(Values(",variant=asm", GpuKeys()), why + ",variant=asm'; " + kGpuUsage + ")");
  EXPECT_EQ(Values("variant=asm,,tiling=1", GpuKeys()),
            why + "variant=asm,,tiling=1'; " + kGpuUsage + ")");
  EXPECT_EQ(Values(",", AiterKeys()), why + ",'; " + kAiterUsage + ")");
  EXPECT_EQ(Values("heads=any,", AiterKeys()), why + "heads=any,'; " + kAiterUsage + ")");
  EXPECT_EQ(Values("variant=hk,", CpuKeys()), why + "variant=hk,'; " + kCpuUsage + ")");
}

TEST(KutConfig, ItemWithoutEqualsIsRefused) {
  EXPECT_EQ(Values("hk", CpuKeys()), "error: 'hk' is not key=value (got 'hk'; " + kCpuUsage + ")");
  EXPECT_EQ(Values("variant=asm,tiling", GpuKeys()),
            "error: 'tiling' is not key=value (got 'variant=asm,tiling'; " + kGpuUsage + ")");
}

TEST(KutConfig, KeyTheKernelDoesNotHaveIsRefused) {
  EXPECT_EQ(Values("variant=hk,speed=2", CpuKeys()),
            "error: unknown key 'speed' (got 'variant=hk,speed=2'; " + kCpuUsage + ")");
  EXPECT_EQ(Values("tiling=1", AiterKeys()),  // the GPU kernel's key, not the aiter adapter's
            "error: unknown key 'tiling' (got 'tiling=1'; " + kAiterUsage + ")");
  EXPECT_EQ(Values("order=reverse", GpuKeys()),  // the CPU kernel's key
            "error: unknown key 'order' (got 'order=reverse'; " + kGpuUsage + ")");
  EXPECT_EQ(Values("=asm", GpuKeys()), "error: unknown key '' (got '=asm'; " + kGpuUsage + ")");
  EXPECT_EQ(Values("Variant=asm", GpuKeys()),  // keys are case-sensitive
            "error: unknown key 'Variant' (got 'Variant=asm'; " + kGpuUsage + ")");
  EXPECT_EQ(Values("variant =asm", GpuKeys()),  // no spaces around '='
            "error: unknown key 'variant ' (got 'variant =asm'; " + kGpuUsage + ")");
  EXPECT_EQ(Values("var=asm", GpuKeys()),  // a prefix of a key is not the key
            "error: unknown key 'var' (got 'var=asm'; " + kGpuUsage + ")");
}

TEST(KutConfig, SecondEqualsIsPartOfTheValue) {
  EXPECT_EQ(Values("variant=asm=hk", GpuKeys()),
            "error: unknown variant 'asm=hk' (got 'variant=asm=hk'; variant is asm, opus or hk)");
}

// The GPU kernels' config (gpu_config.h, what gpu_kut.hip's describe and run parse): each word
// maps to its zero-KV behaviour, tiling to DecodeOptions::tiling.
TEST(GpuKernelConfig, EachVariantAndTilingMapToTheKernelsOptions) {
  using gpu::ZeroKvVariant;
  const struct {
    const char* text;
    const char* variant;
    ZeroKvVariant zero_kv;
    int tiling;
  } cases[] = {{"", "asm", ZeroKvVariant::kAsm, 0},
               {"variant=asm", "asm", ZeroKvVariant::kAsm, 0},
               {"variant=opus", "opus", ZeroKvVariant::kOpus, 0},
               {"variant=hk,tiling=6", "hk", ZeroKvVariant::kHk, 6},
               {"tiling=5,variant=opus", "opus", ZeroKvVariant::kOpus, 5}};
  for (const auto& c : cases) {
    gpu::kut::GpuConfig cfg;
    std::string why;
    ASSERT_TRUE(gpu::kut::ParseGpuConfig(c.text, &cfg, &why)) << c.text << ": " << why;
    EXPECT_EQ(cfg.variant, c.variant) << c.text;
    EXPECT_EQ(cfg.zero_kv, c.zero_kv) << c.text;
    EXPECT_EQ(cfg.tiling, c.tiling) << c.text;
  }
}

// What the GPU kernels took before round 8 (the last of two values; a trailing comma ignored) is
// refused, and the config is left as it was.
TEST(GpuKernelConfig, RefusesARepeatedKeyAnEmptyItemAndAnIntegerOutsideItsRange) {
  const std::pair<const char*, std::string> cases[] = {
      {"variant=asm,variant=hk",
       "variant given twice (got 'variant=asm,variant=hk'; each key at most once)"},
      {"tiling=1,tiling=1", "tiling given twice (got 'tiling=1,tiling=1'; each key at most once)"},
      {"variant=hk,",
       "empty item: a leading, trailing or doubled comma (got 'variant=hk,'; " + kGpuUsage + ")"},
      {"tiling=11", "tiling 11 is out of range (got 'tiling=11'; tiling is 0 to 10)"},
      {"tiling=0x3", "tiling '0x3' is not a decimal integer (got 'tiling=0x3'; tiling is 0 to 10)"},
      {"heads=any", "unknown key 'heads' (got 'heads=any'; " + kGpuUsage + ")"}};
  for (const auto& [text, want] : cases) {
    gpu::kut::GpuConfig cfg;
    cfg.variant = "opus";
    cfg.zero_kv = gpu::ZeroKvVariant::kOpus;
    cfg.tiling = 3;
    std::string why;
    EXPECT_FALSE(gpu::kut::ParseGpuConfig(text, &cfg, &why)) << text;
    EXPECT_EQ(why, want);
    EXPECT_EQ(cfg.variant, "opus") << text;
    EXPECT_EQ(cfg.tiling, 3) << text;
  }
}

}  // namespace
}  // namespace mlasim::kut_config
