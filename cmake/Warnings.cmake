# Every target of ours gets the same strict warnings; third-party headers are system includes.
add_library(jobtrail_warnings INTERFACE)
target_compile_options(jobtrail_warnings INTERFACE -Wall -Wextra -Werror -Wshadow -Wnon-virtual-dtor
                                                   -Wold-style-cast -Wcast-align -Wformat=2)
