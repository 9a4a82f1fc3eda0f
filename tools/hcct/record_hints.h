// Why `hcct record` found no profile after a run: what can be known from the program's file and its
// end, instead of a guess.
#pragma once

#include <string>

namespace hcct::cli {

// The reason, as the end of "hcct: no profile was written to DIR/; <reason>". `program` is PROG as
// given (found in PATH as execvp would), `wait_status` its status from waitpid.
std::string explain_missing_profile(const std::string &program, int wait_status);

}  // namespace hcct::cli
