# The sanitizer build's settings, for `cmake -C`: CI's test build (scripts/test.sh) and the
# mutation run's --sanitize (tests/mutation/mutate.py) both load this file, so a mutant is
# judged by the same build CI runs the tests in.
# -O1 -g1 (line tables), as the sanitizers' own documentation advises: stack traces keep
# file:line, and the build takes about half of -O2 -g's time (sender_test.cpp: 42 s -> 22 s).
# _GLIBCXX_ASSERTIONS: an index past a std::array or vector inside an object, which ASan
# cannot see.
# FORCE: a build directory configured before takes a change made here (a -D after -C still wins).
set(JOBTRAIL_SANITIZE ON CACHE BOOL "" FORCE)
set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "" FORCE)
set(CMAKE_CXX_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG -D_GLIBCXX_ASSERTIONS" CACHE STRING "" FORCE)
set(CMAKE_C_FLAGS_RELWITHDEBINFO "-O1 -g1 -DNDEBUG" CACHE STRING "" FORCE)
