// File: sim/index_values.h — whether the scenario's explicit index values (kv_cache.index_values)
// reach the index buffer. The engine's index fills place value i at element indptr[token] +
// position of each fill whose token regions hold it (sim/engine.cpp FillContent); a value no fill
// of the step places would be dropped without a word, so a scenario file holding one is refused
// (the value itself may be anything in int32: -1, past the cache and INT_MAX are the hostile
// indices the model carries, issue 10 §3).
#pragma once

#include <vector>

#include "ref/status.h"
#include "sim/scenario.h"
#include "sim/trace.h"

namespace mlasim::sim {

// OK when every kv_cache.index_values[i] of `s` is placed by at least one index fill of `t` (the
// step ExpandStep(s) made): its token below the fill's tokens and its position below that token's
// region (sparse: the token's top-k slots; dense: the request's pages). Errors:
// InvalidArgument("$.kv_cache.index_values[i]") for the first value none places, naming the token
// or position, the largest fill's tokens or the token's region, and the fill.
Status CheckIndexValuesPlaced(const Scenario& s, const Trace& t);

// The indices i of the kv_cache.index_values[i] of `s` that no index fill of `t` places (as
// CheckIndexValuesPlaced judges), in order: what a reduced step (mlasim numerics) leaves out.
std::vector<int32_t> UnplacedIndexValues(const Scenario& s, const Trace& t);

// `s` without a second value for a (token, position) slot: the first entry of each slot is kept
// (a scenario file stating two is refused by ParseScenario; a generator may draw a slot twice).
void DropRepeatedIndexSlots(Scenario& s);

// `s` without the index values no fill of its step places (a generated scenario's: the generator
// draws positions without the regions' lengths), and without repeated slots
// (DropRepeatedIndexSlots, whether or not the step expands). `s` otherwise unchanged when its
// step does not expand.
void DropUnplacedIndexValues(Scenario& s);

}  // namespace mlasim::sim
