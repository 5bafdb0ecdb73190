// Checks the --flagfile files named on a command line before gflags reads
// them, so a bad line is reported as "FILE:LINE: what is wrong" (gflags
// itself names only the flag). A line is blank, a comment (# ...), or one
// flag: --name=value, --name (a bool), --noname (a bool false). Flags must
// exist in this binary and values must parse as the flag's type; nested
// --flagfile lines are checked too.
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace raftkv {

// On success fills *origin (if not null) with "FILE:LINE" for every flag a
// flag file sets, in command-line order as gflags applies them: a later
// setting (in a file, or a plain flag on the command line) replaces it.
Status CheckFlagFiles(int argc, char** argv, std::map<std::string, std::string>* origin);

}  // namespace raftkv
