// kernels/kut/cpu_kut.cpp - libmlasim_kut_cpu.so: mlasim's CPU kernel under test
// (kernels/kut/cpu_kernel.h) behind the C ABI of kernels/mlasim_kut.h. Host memory, any head
// dims; config "variant=asm|opus|hk" picks the zero-KV behaviour and the contract it declares.
// It lets the whole kernel-under-test path (worker processes, sentinel bytes, guard pages,
// contract predictions, numerics, shrinking) run in CI without a GPU.
#include "kernels/kut/cpu_kernel.h"

MLASIM_KUT_CPU_LIBRARY("mlasim-cpu", mlasim::kut_cpu::Bugs{})
