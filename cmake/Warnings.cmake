# Every target of ours gets the same strict warnings; third-party headers are system includes.
add_library(jobtrail_warnings INTERFACE)
target_compile_options(jobtrail_warnings INTERFACE -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor
                                                   -Wold-style-cast -Wcast-align -Wformat=2)
# GCC 12 at -O3 reports impossible overlaps inside std::string (GCC bug 105329); it is not ours.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(jobtrail_warnings INTERFACE -Wno-restrict)
endif()
