# ASan+UBSan for the test build. The SPANK plugin opts out (see spank/CMakeLists.txt): an
# instrumented .so cannot be loaded into an uninstrumented slurmd.
set(JOBTRAIL_SANITIZER_FLAGS "")
if(JOBTRAIL_SANITIZE)
  set(JOBTRAIL_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options(${JOBTRAIL_SANITIZER_FLAGS})
  # GCC's flow analysis gives false positives under ASan (e.g. in <regex>); -Werror would
  # turn them into failures. The plain build keeps the warning.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_link_options(${JOBTRAIL_SANITIZER_FLAGS})
endif()
if(JOBTRAIL_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "JOBTRAIL_FUZZ needs clang (CXX=clang++)")
  endif()
  # -fno-sanitize-recover=all on the libraries too: UB in the code under test must stop the run.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined -fno-sanitize-recover=all)
endif()
