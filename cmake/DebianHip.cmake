# Make CMake 3.25's HIP language work with Debian bookworm's ROCm 5.2.3 + clang-15.
# Include before enable_language(HIP). Needs the Debian packages hipcc (clang-15, ROCm 5.2.3).
if(NOT CMAKE_HIP_COMPILER AND NOT DEFINED ENV{HIPCXX})
  find_program(CMAKE_HIP_COMPILER NAMES clang++-15 REQUIRED)
endif()
if(NOT CMAKE_HIP_ARCHITECTURES)
  set(CMAKE_HIP_ARCHITECTURES gfx90a)  # nothing to auto-detect on a machine without an AMD GPU
endif()
set(_mah /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
if(EXISTS ${_mah}/cmake/hip-lang/hip-lang-config.cmake)
  # (1) A fake ROCm root whose lib/cmake/hip-lang points at Debian's multiarch directory:
  #     CMake 3.25 only looks for <root>/lib/cmake/hip-lang.
  set(_root ${CMAKE_BINARY_DIR}/debian-rocm-root)
  file(MAKE_DIRECTORY ${_root}/lib/cmake)
  file(CREATE_LINK ${_mah}/cmake/hip-lang ${_root}/lib/cmake/hip-lang SYMBOLIC)
  set(CMAKE_HIP_COMPILER_ROCM_ROOT ${_root})
  # (2) hip-lang-config's find_dependency(amd_comgr) runs in a try_compile that lacks the triplet.
  set(ENV{CMAKE_PREFIX_PATH} "${_mah}/cmake:$ENV{CMAKE_PREFIX_PATH}")  # ':' separator, not ';'
  # (3) Debian's clang-15 does not find /usr as a ROCm install on its own.
  set(CMAKE_HIP_FLAGS "${CMAKE_HIP_FLAGS} --rocm-path=/usr --rocm-device-lib-path=${_mah}/amdgcn/bitcode")
endif()
unset(_mah)
unset(_root)
