// The k orders of the lock-step kernels that read fp8 operands straight from shared memory
// (kernels/decode/fragments.h) against the PTX ISA's mma fragment layouts, on the CPU: each map
// must be a permutation (every dim and key enters each sum once), the A and B sides of an mma
// must hold the same physical k, and the loads must stay aligned.
#include "kernels/decode/fragments.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

namespace mlasim::gpu::decode {
namespace {

constexpr int kD = 576, kHalf = kD / 2;  // MLA's head dim, two dimension halves

// m16n8k16 (f16): lane tq's B fragment holds logical k {2 tq, 2 tq + 1} (b0) and {2 tq + 8,
// 2 tq + 9} (b1), A the same k of its two rows; the kernel's 32-bit word of 4 dims d .. d + 3
// supplies them in that order. Over the 18 k16 steps of a half, (step, logical k) -> dim must be
// a bijection onto the half's 288 dims.
TEST(DirectFragments, F16StepsCoverEveryDimOfAHalfOnce) {
  for (int kh = 0; kh < 2; ++kh) {
    std::set<int> dims;
    std::set<std::pair<int, int>> step_k;
    for (int st = 0; st < kHalf / 16; ++st)
      for (int tq = 0; tq < 4; ++tq) {
        const int d = direct_dim(kD, kh, st, tq);
        EXPECT_EQ(d % 4, 0) << "a 4-byte word per step: st " << st << " tq " << tq;
        const int logical[4] = {2 * tq, 2 * tq + 1, 2 * tq + 8, 2 * tq + 9};
        for (int i = 0; i < 4; ++i) {
          EXPECT_TRUE(dims.insert(d + i).second) << "dim " << d + i << " twice (half " << kh << ")";
          EXPECT_TRUE(step_k.insert({st, logical[i]}).second);
        }
      }
    ASSERT_EQ(dims.size(), size_t{kHalf});
    EXPECT_EQ(*dims.begin(), kh * kHalf);
    EXPECT_EQ(*dims.rbegin(), kh * kHalf + kHalf - 1);
    EXPECT_EQ(step_k.size(), size_t{kHalf});  // every (step, k) slot filled once
  }
}

// m16n8k32 (e4m3): lane tq's b0 holds logical k 4 tq .. 4 tq + 3, b1 16 + 4 tq .. (A alike); the
// kernel hands it the words of k16 steps 2 j and 2 j + 1, so those must be the 8 consecutive
// dims d .. d + 7 (one 8-byte q load per row, 8-byte aligned) and the 9 k32 steps must cover the
// half once.
TEST(DirectFragments, E4m3StepsCoverEveryDimOfAHalfOnceWithTheF16Words) {
  for (int kh = 0; kh < 2; ++kh) {
    std::set<int> dims;
    for (int j = 0; j < kHalf / 32; ++j)
      for (int tq = 0; tq < 4; ++tq) {
        const int d = direct_dim_k32(kD, kh, j, tq);
        EXPECT_EQ(d % 8, 0) << "8-byte q loads: j " << j << " tq " << tq;
        EXPECT_EQ(direct_dim(kD, kh, 2 * j, tq), d);  // b0: the word of step 2 j
        EXPECT_EQ(direct_dim(kD, kh, 2 * j + 1, tq), d + 4);  // b1: the word of step 2 j + 1
        for (int i = 0; i < 8; ++i)
          EXPECT_TRUE(dims.insert(d + i).second) << "dim " << d + i << " twice (half " << kh << ")";
      }
    ASSERT_EQ(dims.size(), size_t{kHalf});
    EXPECT_EQ(*dims.begin(), kh * kHalf);
    EXPECT_EQ(*dims.rbegin(), kh * kHalf + kHalf - 1);
  }
}

// The K loads: a block's 16 bytes start at the word of its first step (w = 0) and hold the
// words of steps 4 blk .. 4 blk + 3 in order; the tail's 8 bytes those of steps 16 and 17.
TEST(DirectFragments, KLoadsHoldTheWordsOfConsecutiveSteps) {
  for (int tq = 0; tq < 4; ++tq) {
    for (int blk = 0; blk < 4; ++blk) {
      EXPECT_EQ(direct_dim(kD, 0, 4 * blk, tq) % 16, 0);  // 16-byte loads
      for (int w = 0; w < 4; ++w)
        EXPECT_EQ(direct_dim(kD, 0, 4 * blk + w, tq), direct_dim(kD, 0, 4 * blk, tq) + 4 * w);
    }
    EXPECT_EQ(direct_dim(kD, 0, 16, tq) % 8, 0);
    EXPECT_EQ(direct_dim(kD, 0, 17, tq), direct_dim(kD, 0, 16, tq) + 4);
  }
}

// S's keys: tile nt's column gq is key 2 gq + nt, so lane tq's C columns 2 tq + c hold keys
// 4 tq + e (e = 2 c + nt); every key of a quarter once.
TEST(DirectFragments, SKeysOfAQuarterOnceAndLaneMajor) {
  std::set<int> keys;
  for (int nt = 0; nt < 2; ++nt)
    for (int n = 0; n < 8; ++n) EXPECT_TRUE(keys.insert(direct_s_key(nt, n)).second);
  EXPECT_EQ(keys.size(), 16u);
  EXPECT_EQ(*keys.rbegin(), 15);
  EXPECT_TRUE(direct_s_keys_are_4tq_plus_e());
}

// P V: lane tq's A fragment (P) holds logical k {2 tq, 2 tq + 1, 2 tq + 8, 2 tq + 9}, i.e. the S
// columns of those indices; they must be the keys of the V rows it loads (direct_pv_key) in the
// order its B fragments pair them: (word 0, word 1) in b0, (word 2, word 3) in b1. And the
// softmax's column -> key map is the store's inverse over a whole chunk.
TEST(DirectFragments, PvKeysMatchTheColumnsPIsStoredIn) {
  for (int tq = 0; tq < 4; ++tq) {
    const int logical[4] = {2 * tq, 2 * tq + 1, 2 * tq + 8, 2 * tq + 9};
    for (int j = 0; j < 4; ++j) {
      EXPECT_EQ(direct_key_of_column(logical[j]), direct_pv_key(tq, j)) << "tq " << tq << " j " << j;
      EXPECT_EQ(direct_s_column(direct_pv_key(tq, j)), logical[j]);
    }
  }
  std::set<int> cols;
  for (int key = 0; key < 64; ++key) {
    const int col = 16 * (key / 16) + direct_s_column(key % 16);
    EXPECT_TRUE(cols.insert(col).second) << "column " << col << " twice";
    EXPECT_EQ(direct_key_of_column(col), key);
  }
  EXPECT_EQ(cols.size(), 64u);
  EXPECT_EQ(*cols.rbegin(), 63);
}

}  // namespace
}  // namespace mlasim::gpu::decode
