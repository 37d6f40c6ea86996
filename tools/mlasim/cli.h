// File: tools/mlasim/cli.h
//
// The `mlasim` command line as a library call, so tests run it in-process. main.cpp only forwards
// argc/argv and std::cout / std::cerr here.
//
// Exit codes (every subcommand): 0 success, 1 a check ran and failed (e.g. a golden mismatch),
// 2 bad input (unknown flag, bad value, unreadable file), 3 an mlasim bug (internal error).
// Errors go to `err` as `mlasim <command>: error: FIELD: reason`, FIELD being a flag
// (`--heads`) or a JSON path (`input.kv_indptr[3]`).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace mlasim::cli {

// argv[0] is the program name, as in main().
int RunMlasim(int argc, char** argv, std::ostream& out, std::ostream& err);

// Same, with the arguments after the program name ({"plan", "--kv-lens", "300,40,700"}).
int RunMlasim(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlasim::cli
