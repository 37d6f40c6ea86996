// tests/kut/lib/kut_q_overread.cpp - example kernel under test with a deliberate bug: a zero-KV work
// item reads one q row past its range ([qo_start, qo_end + 1)). Sentinel bytes cannot see a
// read; guard pages can: the last zero-KV item of a call faults one row past the end of q.
#include "kernels/kut/cpu_kernel.h"

namespace {
mlasim::kut_cpu::Bugs OverreadBug() {
  mlasim::kut_cpu::Bugs b;
  b.zero_kv_reads_row_past = true;
  return b;
}
}  // namespace

MLASIM_KUT_CPU_LIBRARY("example-q-overread", OverreadBug())
