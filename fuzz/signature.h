// File: fuzz/signature.h
//
// How campaigns name a bug: the signature "step|call|buffer|access|class" of a violation, and the
// violation as a finding file records it. These are the only places fuzz/ reads sim::Violation's
// fields for campaigns and findings, so a change of that struct (enums for class, consequence
// and access) is absorbed here.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/executor.h"

namespace mlasim::fuzz {

// "step|call|buffer|access|class": how campaigns deduplicate findings.
std::string Signature(const sim::Violation& v);

// The distinct signatures of `violations`, sorted (the campaign's targets for one case).
std::vector<std::string> Signatures(const std::vector<sim::Violation>& violations);

// The first violation with signature `signature`, or nullptr.
const sim::Violation* FindSignature(const std::vector<sim::Violation>& violations,
                                    const std::string& signature);

// The violation as a finding file's `finding.violation` object: kind, class, step, call, buffer,
// access, rows_past_end, detail.
nlohmann::json ViolationJson(const sim::Violation& v);

// A violation carrying `signature` ("step|call|buffer|access|class"; missing parts stay empty)
// and `detail`: synthetic properties in tests build their violations with it.
sim::Violation ViolationWithSignature(const std::string& signature, const std::string& detail);

// The violation's one-sentence description.
std::string ViolationDetail(const sim::Violation& v);

}  // namespace mlasim::fuzz
