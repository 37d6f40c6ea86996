// File: tools/mlasim/html_output.h
//
// Output files of the picture flags (`replay --html`, `fuzz --html`, `plan --svg`;
// docs/pictures.md): checked before the command does its work, so a bad path costs nothing and
// prints nothing else, and written in full at the end. Errors name the flag (exit 2).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ref/status.h"

namespace mlasim::cli {

// OK when `path` can be written: not a directory, and opening it for appending succeeds (which
// creates a missing file, empty, and leaves an existing one as it is). Errors: InvalidArgument
// (flag) naming the cause (sim/os_error.h): "PATH is a directory, not a file", "cannot write
// PATH: the folder D does not exist", "... D is on a read-only file system".
Status CheckOutputFile(const std::string& flag, const std::string& path);

// OK when no two of `outputs` ({flag, path}, "" = not given) name one file (compared as
// weakly canonical paths: "a/../r.html" is "r.html"). Error: InvalidArgument(later flag,
// "PATH is also EARLIER-FLAG's output (each output needs a file of its own)"): the later write
// would replace the earlier file, and of the reports asked for one would be left.
Status CheckDistinctOutputs(const std::vector<std::pair<std::string, std::string>>& outputs);

// OK when no output of `outputs` ({flag, path}, "" = not given) is a file the command reads,
// one of `inputs` ({what, path}: "the scenario", "--contract's file", "the case's
// manifest.json"): the write would replace the input the report was made from (`check CASE
// --scenario-out CASE/manifest.json` overwrote the captured case). Compared by file identity
// (std::filesystem::equivalent: a link or a second name of the input is the input); an output
// or input that does not exist is no clash. Error: InvalidArgument(flag, "PATH is WHAT, which
// this command reads (an output needs a file of its own)").
Status CheckOutputsAreNotInputs(const std::vector<std::pair<std::string, std::string>>& outputs,
                                const std::vector<std::pair<std::string, std::string>>& inputs);

// Writes `text` to `path` (truncating it). Errors: InvalidArgument (flag) as above, or when a
// write fails ("no space left on the device (the disk is full)": a full disk, /dev/full).
Status WriteOutputFile(const std::string& flag, const std::string& path, const std::string& text);

}  // namespace mlasim::cli
