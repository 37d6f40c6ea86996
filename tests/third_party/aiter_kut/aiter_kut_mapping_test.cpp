// tests/third_party/aiter_kut/aiter_kut_mapping_test.cpp - the aiter adapter's argument mapping
// (kernels/kut/aiter_kut.cpp, docs/kut-aiter.md "Argument mapping"), run on the host: the adapter
// is compiled for the host and linked against fake_aiter.cpp, which records what it hands
// aiter's mla_decode_stage1_asm_fwd and mla_reduce_v1. Every refusal and error return has its
// own test. Built by cmake/AiterKut.cmake when MLASIM_AITER_DIR is given.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fake_aiter.h"
#include "kernels/mlasim_kut.h"

extern "C" {
uint32_t mlasim_kut_abi_version(void);
int mlasim_kut_describe(const char* config, mlasim_kut_info* info);
int mlasim_kut_run(const mlasim_kut_call* call);
const char* mlasim_kut_last_error(void);
}

namespace {

using fake_aiter::Arg;
using fake_aiter::state;

// Distinct addresses for the buffers; the fakes never dereference them.
char g_memory[32][8];

int ElementBytes(int32_t dtype) {
  return dtype == MLASIM_KUT_FP8_E4M3FN ? 1 : (dtype == MLASIM_KUT_BF16 ? 2 : 4);
}

mlasim_kut_tensor Tensor(int slot, int64_t rows, int32_t heads, int32_t cols, int32_t dtype) {
  mlasim_kut_tensor t{};
  const int64_t e = ElementBytes(dtype);
  t.data = g_memory[slot];
  t.rows = rows;
  t.heads = heads;
  t.cols = cols;
  t.dtype = dtype;
  t.head_stride = heads > 1 ? cols * e : 0;
  t.row_stride = heads * cols * e;
  t.bytes = static_cast<uint64_t>(rows * t.row_stride);
  return t;
}

// A decode step of 2 requests (q lengths 2 and 2: 4 q rows), 16 heads, aiter's head dims, 40
// pages of 64 tokens, 80 partial rows, 81 clusters, 100 work items, 6 reduce tiles.
mlasim_kut_call Call(int32_t op) {
  mlasim_kut_call c{};
  c.abi_version = MLASIM_KUT_ABI_VERSION;
  c.struct_bytes = sizeof(mlasim_kut_call);
  c.op = op;
  c.device = 3;
  c.stream = g_memory[31];
  c.config = "";
  c.batch = 2, c.num_heads = 16, c.num_kv_heads = 1, c.head_dim_qk = 576, c.head_dim_v = 512;
  c.page_size = 64, c.num_pages = 40, c.max_seqlen_q = 2, c.causal = 1, c.topk = -1;
  c.softmax_scale = 0.0416667f, c.q_scale = 1.0f, c.kv_scale = 1.0f;
  c.q = Tensor(0, 4, 16, 576, MLASIM_KUT_BF16);
  c.kv_cache = Tensor(1, 40 * 64, 1, 576, MLASIM_KUT_BF16);
  c.kv_indices = Tensor(2, 37, 1, 1, MLASIM_KUT_INT32);
  c.kv_indptr = Tensor(4, 3, 1, 1, MLASIM_KUT_INT32);
  c.kv_last_page_lens = Tensor(5, 2, 1, 1, MLASIM_KUT_INT32);
  c.qo_indptr = Tensor(6, 3, 1, 1, MLASIM_KUT_INT32);
  c.work_indptr = Tensor(7, 82, 1, 1, MLASIM_KUT_INT32);
  c.work_info = Tensor(8, 100, 1, 8, MLASIM_KUT_INT32);
  c.reduce_indptr = Tensor(9, 7, 1, 1, MLASIM_KUT_INT32);
  c.reduce_final_map = Tensor(10, 6, 1, 2, MLASIM_KUT_INT32);
  c.reduce_partial_map = Tensor(11, 40, 1, 1, MLASIM_KUT_INT32);
  c.o = Tensor(12, 4, 16, 512, MLASIM_KUT_BF16);
  c.lse = Tensor(13, 4, 16, 1, MLASIM_KUT_FP32);
  c.lse.head_stride = 4;
  c.partial_o = Tensor(14, 80, 16, 512, MLASIM_KUT_FP32);
  c.partial_lse = Tensor(15, 80, 16, 1, MLASIM_KUT_FP32);
  c.partial_lse.head_stride = 4;
  return c;
}

std::vector<int64_t> Shape(const Arg& a) {
  return std::vector<int64_t>(a.t.shape, a.t.shape + a.t.ndim);
}
std::vector<int64_t> Strides(const Arg& a) {
  return std::vector<int64_t>(a.t.strides, a.t.strides + a.t.ndim);
}

// The view of `data` with these sizes, strides (elements) and dtype, on device 3.
void ExpectView(const Arg& a, const void* data, std::vector<int64_t> shape,
                std::vector<int64_t> strides, AiterDtype dtype) {
  ASSERT_TRUE(a.present);
  EXPECT_EQ(a.t.ptr, data);
  EXPECT_EQ(Shape(a), shape);
  EXPECT_EQ(Strides(a), strides);
  EXPECT_EQ(a.t.dtype_, dtype);
  EXPECT_EQ(a.t.device_id, 3);
  size_t numel = 1;
  for (int64_t s : shape) numel *= static_cast<size_t>(s);
  EXPECT_EQ(a.t.numel_, numel);
}

class AiterKut : public ::testing::Test {
 protected:
  void SetUp() override { fake_aiter::Reset(); }
  // Runs c and expects a refusal (UNSUPPORTED) whose message contains `why`, with no aiter call.
  void ExpectRefused(const mlasim_kut_call& c, const std::string& why) {
    EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_UNSUPPORTED);
    EXPECT_NE(std::string(mlasim_kut_last_error()).find(why), std::string::npos)
        << mlasim_kut_last_error();
    EXPECT_EQ(state().decode.calls + state().reduce.calls, 0);
  }
};

TEST_F(AiterKut, DescribeDefaultIsSixteenHeadsAsmContract) {
  mlasim_kut_info info{};
  info.struct_bytes = sizeof info;
  ASSERT_EQ(mlasim_kut_describe("", &info), MLASIM_KUT_OK);
  EXPECT_EQ(mlasim_kut_abi_version(), MLASIM_KUT_ABI_VERSION);
  EXPECT_EQ(info.abi_version, MLASIM_KUT_ABI_VERSION);
  EXPECT_STREQ(info.name, "aiter-asm-mla");
  EXPECT_EQ(info.ops,
            MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_DECODE) | MLASIM_KUT_OP_BIT(MLASIM_KUT_OP_REDUCE));
  EXPECT_EQ(info.memory, MLASIM_KUT_MEMORY_DEVICE);
  const uint32_t bf16_fp8 =
      MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16) | MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_FP8_E4M3FN);
  EXPECT_EQ(info.q_dtypes, bf16_fp8);
  EXPECT_EQ(info.kv_dtypes, bf16_fp8);
  EXPECT_EQ(info.o_dtypes, MLASIM_KUT_DTYPE_BIT(MLASIM_KUT_BF16));
  EXPECT_EQ(info.heads_multiple, 16);
  EXPECT_EQ(info.max_heads, 16);
  EXPECT_EQ(info.head_dim_qk_multiple, 576);
  EXPECT_EQ(info.max_head_dim_qk, 576);
  EXPECT_EQ(info.head_dim_v_multiple, 512);
  EXPECT_EQ(info.max_head_dim_v, 512);
  EXPECT_EQ(info.dense, 1);
  EXPECT_EQ(info.sparse, 0);
  EXPECT_STREQ(info.decode_contract, "builtin:asm");
  EXPECT_STREQ(info.reduce_contract, "builtin:mla_reduce_v1");
}

TEST_F(AiterKut, DescribeHeadsAnyIsMultiplesOfEightUpTo128) {
  mlasim_kut_info info{};
  ASSERT_EQ(mlasim_kut_describe("variant=asm,heads=any", &info), MLASIM_KUT_OK);
  EXPECT_EQ(info.heads_multiple, 8);
  EXPECT_EQ(info.max_heads, 128);
}

TEST_F(AiterKut, DescribeRefusesOpusHkAndUnknownItems) {
  for (const char* config : {"variant=opus", "variant=hk", "heads=32", "tiling=1"}) {
    mlasim_kut_info info{};
    EXPECT_EQ(mlasim_kut_describe(config, &info), MLASIM_KUT_UNSUPPORTED) << config;
    EXPECT_NE(std::string(mlasim_kut_last_error()).find(config), std::string::npos);
  }
}

// The adapter parses its config with the shared parser (kernels/kut/kut_config.h): a key given
// twice (the last value won before), an empty item (a trailing comma was ignored), an unknown
// key, an item without '=' and a value it does not take are refused with the reason.
TEST_F(AiterKut, DescribeRefusesARepeatedKeyAnEmptyItemAndAnUnknownKey) {
  const std::string usage = "; config is variant=asm[,heads=16|any])";
  const std::pair<const char*, std::string> cases[] = {
      {"heads=any,heads=16", "heads given twice (got 'heads=any,heads=16'; each key at most once)"},
      {"variant=asm,variant=asm",
       "variant given twice (got 'variant=asm,variant=asm'; each key at most once)"},
      {"heads=any,", "empty item: a leading, trailing or doubled comma (got 'heads=any,'" + usage},
      {",heads=any", "empty item: a leading, trailing or doubled comma (got ',heads=any'" + usage},
      {"tiling=1", "unknown key 'tiling' (got 'tiling=1'" + usage},
      {"any", "'any' is not key=value (got 'any'" + usage},
      {"variant=opus",
       "unknown variant 'opus' (got 'variant=opus'; variant is asm: the only stage-1 kernel this "
       "adapter calls)"},
      {"heads=032", "unknown heads '032' (got 'heads=032'; heads is 16 or any)"}};
  for (const auto& [config, want] : cases) {
    mlasim_kut_info info{};
    EXPECT_EQ(mlasim_kut_describe(config, &info), MLASIM_KUT_UNSUPPORTED) << config;
    EXPECT_EQ(std::string(mlasim_kut_last_error()), want) << config;
  }
}

// A run parses the call's config the same way before it maps any argument.
TEST_F(AiterKut, RunRefusesARepeatedKeyBeforeCallingAiter) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.config = "heads=16,heads=any";
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_UNSUPPORTED);
  EXPECT_EQ(std::string(mlasim_kut_last_error()),
            "heads given twice (got 'heads=16,heads=any'; each key at most once)");
  EXPECT_EQ(state().decode.calls, 0);
}

TEST_F(AiterKut, DecodeMapsEveryArgumentBf16) {
  const mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  const fake_aiter::Decode& d = state().decode;
  ASSERT_EQ(d.calls, 1);
  ExpectView(d.q, c.q.data, {4, 16, 576}, {9216, 576, 1}, AITER_DTYPE_bf16);
  ExpectView(d.kv, c.kv_cache.data, {40, 64, 1, 576}, {36864, 576, 576, 1}, AITER_DTYPE_bf16);
  ExpectView(d.qo_indptr, c.qo_indptr.data, {3}, {1}, AITER_DTYPE_i32);
  ExpectView(d.kv_indptr, c.kv_indptr.data, {3}, {1}, AITER_DTYPE_i32);
  ExpectView(d.kv_page_indices, c.kv_indices.data, {37}, {1}, AITER_DTYPE_i32);
  ExpectView(d.kv_last_page_lens, c.kv_last_page_lens.data, {2}, {1}, AITER_DTYPE_i32);
  EXPECT_FALSE(d.num_kv_splits_indptr.present);  // null: aiter's persistent path
  ExpectView(d.work_indptr, c.work_indptr.data, {82}, {1}, AITER_DTYPE_i32);
  ExpectView(d.work_info_set, c.work_info.data, {100, 8}, {8, 1}, AITER_DTYPE_i32);
  ExpectView(d.split_data, c.partial_o.data, {80, 1, 16, 512}, {8192, 8192, 512, 1},
             AITER_DTYPE_fp32);
  ExpectView(d.split_lse, c.partial_lse.data, {80, 1, 16, 1}, {16, 16, 1, 1}, AITER_DTYPE_fp32);
  ExpectView(d.output, c.o.data, {4, 16, 512}, {8192, 512, 1}, AITER_DTYPE_bf16);
  ExpectView(d.lse, c.lse.data, {4, 16}, {16, 1}, AITER_DTYPE_fp32);
  EXPECT_FALSE(d.q_scale.present);  // bf16: aiter reads no scale
  EXPECT_FALSE(d.kv_scale.present);
  EXPECT_FALSE(d.g_kv_indptr.present);
  EXPECT_FALSE(d.valid_split_count.present);
  EXPECT_EQ(d.max_seqlen_q, 2);
  EXPECT_EQ(d.page_size, 64);
  EXPECT_EQ(d.nhead_kv, 1);
  EXPECT_EQ(d.softmax_scale, 0.0416667f);
  EXPECT_EQ(d.cp_world_size, 1);
  EXPECT_EQ(d.cp_rank, 0);
  EXPECT_EQ(d.use_valid_split_count_reduce, 0);
  EXPECT_EQ(d.causal, 1);
  EXPECT_EQ(d.stream, c.stream);
}

TEST_F(AiterKut, DecodeWorkMetadataHoldsThePlanPointersAndIsAllocatedOnce) {
  const mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK);
  const int mallocs = state().mallocs;
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK);
  EXPECT_EQ(state().mallocs, mallocs);  // per-device scratch, reused (0 on a warm device)
  const Arg& meta = state().decode.work_meta_data;
  ASSERT_TRUE(meta.present);
  EXPECT_EQ(Shape(meta), std::vector<int64_t>{10});
  EXPECT_EQ(meta.t.dtype_, AITER_DTYPE_u64);
  const uint64_t* slots = static_cast<const uint64_t*>(meta.t.ptr);
  EXPECT_EQ(slots[0], reinterpret_cast<uint64_t>(c.work_indptr.data));
  EXPECT_EQ(slots[1], reinterpret_cast<uint64_t>(c.work_info.data));
  for (int i = 2; i < 10; ++i) EXPECT_EQ(slots[i], 0u) << i;
}

TEST_F(AiterKut, DecodeFp8PassesBothScalesAsDeviceFloats) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.q = Tensor(0, 4, 16, 576, MLASIM_KUT_FP8_E4M3FN);
  c.kv_cache = Tensor(1, 40 * 64, 1, 576, MLASIM_KUT_FP8_E4M3FN);
  c.q_scale = 0.5f, c.kv_scale = 0.25f;
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  const fake_aiter::Decode& d = state().decode;
  EXPECT_EQ(d.q.t.dtype_, AITER_DTYPE_fp8);
  ExpectView(d.kv, c.kv_cache.data, {40, 64, 1, 576}, {36864, 576, 576, 1}, AITER_DTYPE_fp8);
  ASSERT_TRUE(d.q_scale.present && d.kv_scale.present);
  EXPECT_EQ(Shape(d.q_scale), std::vector<int64_t>{1});
  EXPECT_EQ(*static_cast<const float*>(d.q_scale.t.ptr), 0.5f);
  EXPECT_EQ(*static_cast<const float*>(d.kv_scale.t.ptr), 0.25f);
}

TEST_F(AiterKut, DecodeBf16QFp8KvPassesKvScaleOnly) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.kv_cache = Tensor(1, 40 * 64, 1, 576, MLASIM_KUT_FP8_E4M3FN);
  c.kv_scale = 2.0f;
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  EXPECT_FALSE(state().decode.q_scale.present);
  ASSERT_TRUE(state().decode.kv_scale.present);
  EXPECT_EQ(*static_cast<const float*>(state().decode.kv_scale.t.ptr), 2.0f);
}

TEST_F(AiterKut, DecodeWithoutLsePassesNull) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.lse = mlasim_kut_tensor{};
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  EXPECT_FALSE(state().decode.lse.present);
}

TEST_F(AiterKut, ReduceMapsEveryArgument) {
  const mlasim_kut_call c = Call(MLASIM_KUT_OP_REDUCE);
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  const fake_aiter::Reduce& r = state().reduce;
  ASSERT_EQ(r.calls, 1);
  EXPECT_EQ(state().decode.calls, 0);
  ExpectView(r.partial_output, c.partial_o.data, {80, 16, 512}, {8192, 512, 1}, AITER_DTYPE_fp32);
  ExpectView(r.partial_lse, c.partial_lse.data, {80, 16}, {16, 1}, AITER_DTYPE_fp32);
  ExpectView(r.reduce_indptr, c.reduce_indptr.data, {7}, {1}, AITER_DTYPE_i32);
  ExpectView(r.reduce_final_map, c.reduce_final_map.data, {6, 2}, {2, 1}, AITER_DTYPE_i32);
  ExpectView(r.reduce_partial_map, c.reduce_partial_map.data, {40}, {1}, AITER_DTYPE_i32);
  ExpectView(r.final_output, c.o.data, {4, 16, 512}, {8192, 512, 1}, AITER_DTYPE_bf16);
  ExpectView(r.final_lse, c.lse.data, {4, 16}, {16, 1}, AITER_DTYPE_fp32);
  EXPECT_EQ(r.max_seqlen_q, 2);
  EXPECT_EQ(r.num_kv_splits, 0);  // auto: aiter sizes its split scratch from the CU count
  EXPECT_EQ(r.current_stream, c.stream);
  EXPECT_EQ(state().device_syncs, 1);
}

TEST_F(AiterKut, ReduceWithoutLsePassesNoFinalLse) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_REDUCE);
  c.lse = mlasim_kut_tensor{};
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK);
  EXPECT_FALSE(state().reduce.final_lse.present);
}

TEST_F(AiterKut, ReduceOfNoTilesCallsNothingAndOneTileCallsAiter) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_REDUCE);
  c.reduce_indptr.rows = 1;  // 0 tiles
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK);
  EXPECT_EQ(state().reduce.calls, 0);
  c.reduce_indptr.rows = 2;  // 1 tile
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK);
  EXPECT_EQ(state().reduce.calls, 1);
  EXPECT_EQ(Shape(state().reduce.reduce_indptr), std::vector<int64_t>{2});
}

TEST_F(AiterKut, HeadsAnyPassesOtherCountsAndDefaultRefusesThem) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.num_heads = 32;
  c.q = Tensor(0, 4, 32, 576, MLASIM_KUT_BF16);
  c.o = Tensor(12, 4, 32, 512, MLASIM_KUT_BF16);
  c.partial_o = Tensor(14, 80, 32, 512, MLASIM_KUT_FP32);
  ExpectRefused(c, "num_heads must be 16");
  c.config = "heads=any";
  ASSERT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  EXPECT_EQ(Shape(state().decode.q), (std::vector<int64_t>{4, 32, 576}));
}

TEST_F(AiterKut, HeadsAnyBoundaries) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.config = "heads=any";
  for (int heads : {0, 12, 136}) {
    c.num_heads = heads;
    ExpectRefused(c, "multiple of 8 up to 128");
  }
}

TEST_F(AiterKut, RefusesSparseCalls) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.topk = 0;
  ExpectRefused(c, "dense calls only");
}

TEST_F(AiterKut, RefusesTwoKvHeads) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.num_kv_heads = 2;
  ExpectRefused(c, "num_kv_heads must be 1");
}

TEST_F(AiterKut, RefusesOtherHeadDims) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.head_dim_qk = 512;
  ExpectRefused(c, "576 / 512");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.head_dim_v = 576;
  ExpectRefused(c, "576 / 512");
}

TEST_F(AiterKut, PageSizeMustBeAPowerOfTwo) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  for (int page : {0, 3, 48}) {
    c.page_size = page;
    ExpectRefused(c, "power of two");
  }
  c.page_size = 1;
  c.num_pages = 40 * 64;
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  EXPECT_EQ(Shape(state().decode.kv), (std::vector<int64_t>{2560, 1, 1, 576}));
}

TEST_F(AiterKut, RefusesNoQRows) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.max_seqlen_q = 0;
  ExpectRefused(c, "max_seqlen_q");
}

TEST_F(AiterKut, RefusesDtypesAiterDoesNotRun) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.q.dtype = MLASIM_KUT_FP16;
  ExpectRefused(c, "q must be bf16 or fp8");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.kv_cache.dtype = MLASIM_KUT_FP32;
  ExpectRefused(c, "KV must be bf16 or fp8");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.q = Tensor(0, 4, 16, 576, MLASIM_KUT_FP8_E4M3FN);
  ExpectRefused(c, "fp8 q needs fp8 KV");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.o = Tensor(12, 4, 16, 512, MLASIM_KUT_FP32);
  ExpectRefused(c, "o must be bf16");
}

TEST_F(AiterKut, RefusesScalesAiterWouldDrop) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.q_scale = 2.0f;
  ExpectRefused(c, "scale must be 1");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.kv_cache = Tensor(1, 40 * 64, 1, 576, MLASIM_KUT_FP8_E4M3FN);
  c.q_scale = 2.0f;  // bf16 q with fp8 KV: aiter passes kv_scale only
  ExpectRefused(c, "scale must be 1");
  c = Call(MLASIM_KUT_OP_DECODE);
  c.kv_scale = 0.5f;  // bf16 KV
  ExpectRefused(c, "scale must be 1");
}

TEST_F(AiterKut, RefusesRowsWithGaps) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.q.row_stride += 64;
  ExpectRefused(c, "contiguous");
  c = Call(MLASIM_KUT_OP_REDUCE);
  c.partial_o.head_stride += 4;
  ExpectRefused(c, "contiguous");
}

TEST_F(AiterKut, RefusesFp8OnGfx94xOnly) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.kv_cache = Tensor(1, 40 * 64, 1, 576, MLASIM_KUT_FP8_E4M3FN);
  state().arch = "gfx942:sramecc+:xnack-";
  ExpectRefused(c, "e4m3fnuz");
  state().arch = "gfx950";
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_OK) << mlasim_kut_last_error();
  fake_aiter::Reset();
  state().arch = "gfx942";
  EXPECT_EQ(mlasim_kut_run(&(c = Call(MLASIM_KUT_OP_DECODE))), MLASIM_KUT_OK);  // bf16 runs
}

TEST_F(AiterKut, RefusesOtherVariantsAndUnknownOps) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.config = "variant=hk";
  ExpectRefused(c, "variant=hk");
  c = Call(7);
  ExpectRefused(c, "unknown op 7");
}

TEST_F(AiterKut, ErrorsOnAnotherAbiOrStructSize) {
  mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  c.abi_version = MLASIM_KUT_ABI_VERSION + 1;
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_ERROR);
  c = Call(MLASIM_KUT_OP_DECODE);
  c.struct_bytes -= 8;
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_ERROR);
  EXPECT_EQ(mlasim_kut_run(nullptr), MLASIM_KUT_ERROR);
  EXPECT_EQ(state().decode.calls, 0);
}

TEST_F(AiterKut, ErrorsWhenTheDeviceCannotBeSelected) {
  state().set_device_fails = true;
  const mlasim_kut_call c = Call(MLASIM_KUT_OP_DECODE);
  EXPECT_EQ(mlasim_kut_run(&c), MLASIM_KUT_ERROR);
  EXPECT_STREQ(mlasim_kut_last_error(), "hipSetDevice failed");
}

TEST_F(AiterKut, ErrorsOnALaunchErrorAfterEitherStage) {
  state().launch_error = true;
  const mlasim_kut_call d = Call(MLASIM_KUT_OP_DECODE);
  EXPECT_EQ(mlasim_kut_run(&d), MLASIM_KUT_ERROR);
  EXPECT_STREQ(mlasim_kut_last_error(), "stage 1: fake HIP error");
  const mlasim_kut_call r = Call(MLASIM_KUT_OP_REDUCE);
  EXPECT_EQ(mlasim_kut_run(&r), MLASIM_KUT_ERROR);
  EXPECT_STREQ(mlasim_kut_last_error(), "reduce: fake HIP error");
}

TEST_F(AiterKut, AnAiterCheckThatThrowsBecomesAnError) {
  state().aiter_throws = "[AITER] asm_mla.cu:1002 cannot find suitable kernel";
  const mlasim_kut_call d = Call(MLASIM_KUT_OP_DECODE);
  EXPECT_EQ(mlasim_kut_run(&d), MLASIM_KUT_ERROR);
  EXPECT_STREQ(mlasim_kut_last_error(),
               "aiter: [AITER] asm_mla.cu:1002 cannot find suitable kernel");
  const mlasim_kut_call r = Call(MLASIM_KUT_OP_REDUCE);
  EXPECT_EQ(mlasim_kut_run(&r), MLASIM_KUT_ERROR);
}

}  // namespace
