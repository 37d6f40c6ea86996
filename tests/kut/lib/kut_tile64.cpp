// tests/kut/lib/kut_tile64.cpp - example kernel under test with a deliberate bug: it stores whole
// 64-row tiles (rows past a work item's qo_end, up to the end of its last 64-row tile, get
// zeros), as a kernel whose epilogue has no row mask. A campaign must find it (o / partial rows
// written past what the contract predicts) and shrink it (tests/kut/kut_campaign_test.cpp).
#include "kernels/kut/cpu_kernel.h"

namespace {
mlasim::kut_cpu::Bugs TileBug() {
  mlasim::kut_cpu::Bugs b;
  b.store_tile64 = true;
  return b;
}
}  // namespace

MLASIM_KUT_CPU_LIBRARY("example-tile64", TileBug())
