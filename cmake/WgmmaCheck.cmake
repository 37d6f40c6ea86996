# cmake/WgmmaCheck.cmake - run as a script (cmake -P) after libmlasim_kut_gpu.so is built for
# sm_90a: compiles the kernel library's source once more with `ptxas -v` and fails the build when
# ptxas reports that it serialized the warpgroup mma of a kernel ("wgmma.mma_async instructions
# are serialized due to ...": info C7510-C75xx, whatever the cause - a branch, a call, registers,
# accumulator accesses; every wgmma then waits for the one before it; session 11 measured 359.8
# against 317.6 us for the decode kernel with one branch around its S^T calls, docs/kernels.md).
# Inputs: NVCC, SRC, ROOT, OUT; optional FLAGS (CMAKE_CUDA_FLAGS) and CCBIN (the host compiler),
# so that the check compiles what the library compiles.
foreach(v NVCC SRC ROOT OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "WgmmaCheck.cmake: -D${v}=... missing")
  endif()
endforeach()
separate_arguments(extra UNIX_COMMAND "${FLAGS}")
if(CCBIN)
  list(APPEND extra -ccbin ${CCBIN})
endif()
execute_process(
  COMMAND ${NVCC} ${extra} -DMLASIM_KUT_SM90A=1 -DNDEBUG -I${ROOT} -I${ROOT}/kernels -O3
          -std=c++17 -x cu -gencode=arch=compute_90a,code=sm_90a -lineinfo -Xptxas -v
          -c ${SRC} -o ${OUT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wgmma check: nvcc failed (${rc}):\n${err}")
endif()
string(REGEX MATCHALL "[^\n]*wgmma[.]mma_async instructions are serialized[^\n]*" serialized
       "${out}${err}")
if(serialized)
  string(REPLACE ";" "\n" lines "${serialized}")
  message(FATAL_ERROR "wgmma check: ptxas serialized warpgroup mma in ${SRC}:\n${lines}\n"
                      "(no wgmma may sit under a branch; see docs/kernels.md, the warpgroup-mma kernel)")
endif()
message(STATUS "wgmma check: no serialized warpgroup mma in ${SRC}")
