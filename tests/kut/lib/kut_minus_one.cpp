// tests/kut/lib/kut_minus_one.cpp - example kernel under test with a deliberate bug: a -1 top-k
// entry is dereferenced as KV-cache row -1 instead of being masked. With sentinel bytes before
// the cache the row's bytes reach the output (a numerics mismatch); with a guard page before it
// the read faults.
#include "kernels/kut/cpu_kernel.h"

namespace {
mlasim::kut_cpu::Bugs MinusOneBug() {
  mlasim::kut_cpu::Bugs b;
  b.deref_minus_one = true;
  return b;
}
}  // namespace

MLASIM_KUT_CPU_LIBRARY("example-minus-one", MinusOneBug())
