# The consumer_package test: installs the build tree's mlasim into <build>/consumer/prefix, then
# configures, builds and runs tests/consumer against it (find_package(mlasim)).
# Inputs: MLASIM_BUILD_DIR, MLASIM_SOURCE_DIR, CMAKE_GENERATOR, CMAKE_CXX_COMPILER.
set(_root ${MLASIM_BUILD_DIR}/consumer)
file(REMOVE_RECURSE ${_root})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(_last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${MLASIM_BUILD_DIR} --prefix ${_root}/prefix)
run(${CMAKE_COMMAND} -S ${MLASIM_SOURCE_DIR}/tests/consumer -B ${_root}/build -G ${CMAKE_GENERATOR}
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    -DCMAKE_PREFIX_PATH=${_root}/prefix -DCMAKE_FIND_PACKAGE_PREFER_CONFIG=ON)
run(${CMAKE_COMMAND} --build ${_root}/build)
run(${_root}/build/mlasim_consumer)
message(STATUS "consumer: ${_last_output}")
if(NOT _last_output MATCHES "PASS")
  message(FATAL_ERROR "consumer output: ${_last_output}")
endif()
