# The consumer_package test: installs the build tree's mlasim into <build>/consumer/prefix, then
# configures, builds and runs tests/consumer against it (find_package(mlasim)).
# When the Python package was built, it also imports the installed package (no build tree on the
# path) and plans the worked example with it.
# Inputs: MLASIM_BUILD_DIR, MLASIM_SOURCE_DIR, CMAKE_GENERATOR, CMAKE_CXX_COMPILER,
# MLASIM_PYTHON_EXECUTABLE and MLASIM_PYTHON_INSTALL_DIR (empty without the Python package).
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

if(MLASIM_PYTHON_EXECUTABLE)
  # A script file: a list-valued argument would split Python's semicolons into arguments.
  file(WRITE ${_root}/import_installed.py
       "import mlasim\n"
       "p = mlasim.plan(kv_lens=[300, 40, 700], cu_count=8)\n"
       "assert mlasim.__file__.startswith('${_root}/prefix/'), mlasim.__file__\n"
       "assert p.work_indptr.tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6]\n"
       "print('PASS', mlasim.__file__)\n")
  set(ENV{PYTHONPATH} ${_root}/prefix/${MLASIM_PYTHON_INSTALL_DIR})
  run(${MLASIM_PYTHON_EXECUTABLE} ${_root}/import_installed.py)
  message(STATUS "installed Python package: ${_last_output}")
  if(NOT _last_output MATCHES "PASS")
    message(FATAL_ERROR "installed Python package: ${_last_output}")
  endif()
endif()
