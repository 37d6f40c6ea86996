# cmake/AiterKutSignature.cmake - the kut_aiter_signature test (docs/kut-aiter.md): compares the
# parameter types of a C function as aiter defines it with the declaration the adapter makes.
#
#   cmake -DFUNC=mla_decode_stage1_asm_fwd -DDEFINITION=<aiter>/csrc/py_itfs_cu/asm_mla.cu
#         -DDECLARATION=kernels/kut/aiter_kut.cpp -P cmake/AiterKutSignature.cmake
#
# aiter's stage-1 entry point has C linkage and no header, so neither the compiler nor the
# linker sees a parameter list that drifted (dlsym / C symbols carry no types). This script
# takes the first "FUNC(" ... ")" in each file, drops // comments, splits the parameters at
# commas, keeps each one's type (everything before its last identifier) with whitespace
# normalised, and fails with both lists when they differ in count or in any type.
# -DDROP_PARAM=N (a mutant, for the test that shows the check fails): parameter N (from 0) is
# removed from the declaration's list before the comparison; -DRETYPE_PARAM=N: its type is
# replaced by bool (the same count, one type wrong).
foreach(v FUNC DEFINITION DECLARATION)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "AiterKutSignature.cmake: -D${v}=... is required")
  endif()
endforeach()

# The parameter types of the first FUNC(...) in FILE, as a CMake list, into OUT.
function(param_types file out)
  if(NOT EXISTS ${file})
    message(FATAL_ERROR "${file}: not found")
  endif()
  file(READ ${file} text)
  string(REGEX REPLACE "//[^\n]*" "" text "${text}")
  string(FIND "${text}" "${FUNC}(" at)
  if(at LESS 0)
    message(FATAL_ERROR "${file}: no ${FUNC}( in it")
  endif()
  string(LENGTH "${FUNC}(" skip)
  math(EXPR at "${at} + ${skip}")
  string(SUBSTRING "${text}" ${at} -1 text)
  string(FIND "${text}" ")" end)
  string(SUBSTRING "${text}" 0 ${end} params)
  string(REGEX REPLACE "[ \t\r\n]+" " " params "${params}")
  string(REPLACE ";" "" params "${params}")
  string(REPLACE "," ";" params "${params}")
  set(types "")
  foreach(p IN LISTS params)
    string(STRIP "${p}" p)
    string(REGEX REPLACE "[A-Za-z_][A-Za-z0-9_]*$" "" t "${p}")  # drop the parameter's name
    string(REGEX REPLACE " *\\* *" "*" t "${t}")
    string(STRIP "${t}" t)
    list(APPEND types "${t}")
  endforeach()
  set(${out} "${types}" PARENT_SCOPE)
endfunction()

param_types(${DEFINITION} defined)
param_types(${DECLARATION} declared)
if(DEFINED DROP_PARAM)
  list(REMOVE_AT declared ${DROP_PARAM})
endif()
if(DEFINED RETYPE_PARAM)
  list(REMOVE_AT declared ${RETYPE_PARAM})
  list(INSERT declared ${RETYPE_PARAM} bool)
endif()
list(LENGTH defined n_def)
list(LENGTH declared n_decl)
if(NOT n_def EQUAL n_decl OR NOT "${defined}" STREQUAL "${declared}")
  string(REPLACE ";" "\n  " d1 "${defined}")
  string(REPLACE ";" "\n  " d2 "${declared}")
  message(FATAL_ERROR "${FUNC}: ${n_def} parameters in ${DEFINITION}:\n  ${d1}\n"
                      "but ${n_decl} in ${DECLARATION}:\n  ${d2}")
endif()
message(STATUS "${FUNC}: ${n_def} parameter types agree")
