// File: ref/mutant.h
//
// The one injection point of every deliberately broken variant that lives in code (the mutant
// registry, fuzz/mutants.h, names them all with their bug class and the property that must kill
// them; docs/fuzzing.md "Mutants"). A site is broken when the mutant its caller's options carry
// is the one it names:
//
//   if (MLASIM_MUTANT(options.mutant, kNoTailRule)) ...
//
// `active` is an enum class value (PlannerMutant, NumericsMutant, DecodeUpdateRequest::Mutant,
// CampaignMutant, FaultMutant): explicit state passed by the caller, never a global or a static
// counter, so a mutant run is as deterministic as the real one. `grep -rn "MLASIM_MUTANT("` lists
// every site; each mutant has exactly one.
#pragma once

#include <type_traits>

#define MLASIM_MUTANT(active, Id) ((active) == std::decay_t<decltype(active)>::Id)
