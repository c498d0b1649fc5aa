#pragma once

#include <string>

namespace jobtrail::test {

// CTest's SKIP_RETURN_CODE for the unit tests (tests/CMakeLists.txt): a case that could not run
// here is reported as skipped, never as passed.
constexpr int kSkipReturnCode = 77;

// True when every test must run (CI=true, as scripts/test.sh sets): a skip is then a failure, so
// CI cannot pass with a prerequisite missing.
bool skips_are_failures();

// Says why the current test case cannot run here. Where skips are failures it fails the case;
// otherwise it warns and the binary exits with kSkipReturnCode if nothing failed. The caller
// returns right after (JOBTRAIL_SKIP does both).
void skip(const std::string& why);

// How many cases said skip() in this run.
int skipped_cases();

}  // namespace jobtrail::test

#define JOBTRAIL_SKIP(why)             \
    do {                               \
        ::jobtrail::test::skip((why)); \
        return;                        \
    } while (false)
