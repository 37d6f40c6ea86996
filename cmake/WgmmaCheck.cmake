# cmake/WgmmaCheck.cmake - run as a script (cmake -P) after libmlasim_kut_gpu.so is built for
# sm_90a: compiles the kernel library's source once more with `ptxas -v` and fails the build when
# ptxas reports that it serialized the warpgroup mma of a kernel (info C7520 / C7510: every wgmma
# then waits for the one before it; session 11 measured 359.8 against 317.6 us for the decode
# kernel with one branch around its S^T calls, docs/kernels.md). Inputs: NVCC, SRC, ROOT, OUT.
foreach(v NVCC SRC ROOT OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "WgmmaCheck.cmake: -D${v}=... missing")
  endif()
endforeach()
execute_process(
  COMMAND ${NVCC} -DMLASIM_KUT_SM90A=1 -I${ROOT} -I${ROOT}/kernels -O3 -std=c++17 -x cu
          -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -c ${SRC} -o ${OUT}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "wgmma check: nvcc failed (${rc}):\n${err}")
endif()
string(REGEX MATCHALL "[^\n]*(C7510|C7520)[^\n]*" serialized "${out}${err}")
if(serialized)
  string(REPLACE ";" "\n" lines "${serialized}")
  message(FATAL_ERROR "wgmma check: ptxas serialized warpgroup mma in ${SRC}:\n${lines}\n"
                      "(no wgmma may sit under a branch; see docs/kernels.md, the warpgroup-mma kernel)")
endif()
message(STATUS "wgmma check: no serialized warpgroup mma in ${SRC}")
