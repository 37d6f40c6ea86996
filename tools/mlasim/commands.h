// File: tools/mlasim/commands.h
//
// Subcommands of `mlasim`. Each lives in its own cmd_<name>.cpp and exposes one Register<Name>
// function; cli.cpp lists them in kCommands. To add a subcommand (replay, explain-fault,
// numerics, fuzz, mutants): write cmd_<name>.cpp with a Command subclass, declare its Register
// function here and add it to the table in cli.cpp.
#pragma once

#include <memory>
#include <ostream>
#include <string>

#include <CLI/CLI.hpp>

#include "ref/status.h"

namespace mlasim::cli {

// Exit codes shared by every subcommand (documented in docs/cli.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitCheckFailed = 1,  // a check ran and found a difference (golden mismatch, violation)
  kExitBadInput = 2,     // the user's flags, files or values are wrong; the message says which
  kExitInternal = 3,     // an mlasim invariant broke: a bug
};

struct Streams {
  std::ostream& out;
  std::ostream& err;
};

// A registered subcommand. Register<Name> adds its CLI::App (with flags bound to the Command's
// members) to the top-level app; RunMlasim calls Run on the one the user picked, after parsing.
class Command {
 public:
  virtual ~Command() = default;
  virtual CLI::App* app() const = 0;
  virtual int Run(const Streams& io) = 0;
};

// Writes `mlasim <command>: error: FIELD: reason` (or without FIELD when empty) to `err`.
void PrintError(std::ostream& err, const std::string& command, const std::string& field,
                const std::string& reason);

// Exit code for a non-ok planner Status: kInternal -> 3, everything else (bad input) -> 2.
int ExitCodeFor(const Status& status);

// Validator for unsigned 64-bit options (seeds): decimal digits only, at most 2^64 - 1. CLI11
// alone would turn "-1" into 18446744073709551615 and saturate larger values.
CLI::Validator UnsignedInteger();

std::unique_ptr<Command> RegisterPlan(CLI::App& app);
std::unique_ptr<Command> RegisterReplay(CLI::App& app);
std::unique_ptr<Command> RegisterExplainFault(CLI::App& app);
std::unique_ptr<Command> RegisterFuzz(CLI::App& app);
std::unique_ptr<Command> RegisterMutants(CLI::App& app);
std::unique_ptr<Command> RegisterNumerics(CLI::App& app);
std::unique_ptr<Command> RegisterCheck(CLI::App& app);
std::unique_ptr<Command> RegisterEffectiveness(CLI::App& app);
std::unique_ptr<Command> RegisterTriage(CLI::App& app);

}  // namespace mlasim::cli
