// File: fuzz/draw.h
//
// The scenario generator's distributions as small values, each drawn one of two ways from the
// same description (issue 15, the simulator's throughput):
//   - through RapidCheck: `*dist.Gen()` inside rc::gen::exec, which records the draw in the
//     case's recipe so that a failing case shrinks (fuzz/search.cpp);
//   - directly: `dist.Direct(random, size)` computes the value RapidCheck's generator computes
//     from the same random source and size, without building a Gen, a Shrinkable or an Any
//     (every campaign case: a case is generated once and almost never fails).
// A Drawer picks the way, and the generator's code (fuzz/scenario_gen.cpp) is written once
// against it. Direct draws equal RapidCheck's value for value: every distribution here and whole
// scenarios are checked against rc::gen::exec in tests/fuzz/draw_test.cpp. The algorithms are
// those of the RapidCheck headers this project builds with (Debian's librapidcheck-dev):
// gen/Numeric.hpp (inRange), gen/Select.hpp (element, elementOf, weightedElement, weightedOneOf),
// gen/Transform.hpp (map, join, resize), gen/Container.hpp (container), and the exec handler's
// draw order (one `split()` of the recipe's random source per draw).
//
// Every distribution D has `using Value`, `rc::Gen<Value> Gen() const` (the generator the
// RapidCheck way draws from, built as the rc::gen factory builds it, so recipes and shrinks are
// those of that factory) and `Value Direct(const rc::Random& random, int size) const`.
#pragma once

#include <rapidcheck.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace mlasim::fuzz {

namespace draw_detail {

// rc::detail::FrequencyMap::lookup: the index i whose cumulative weight range holds x (the
// first i with x < w[0] + ... + w[i]). x < the sum of the weights.
template <typename Weights>
size_t WeightedIndex(const Weights& weights, uint64_t x) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (x < cumulative) return i;
  }
  return weights.size() - 1;  // (not reached: x < sum)
}

template <typename Weights>
uint64_t WeightSum(const Weights& weights) {
  uint64_t sum = 0;
  for (const auto w : weights) sum += w;
  return sum;
}

// The number a fresh copy of `random` draws first (RapidCheck's `Random(random).next()`).
inline uint64_t FirstNumber(const rc::Random& random) {
  return rc::Random(random).next();
}

// FirstNumber(random) % n, for n >= 1. When n is 1 the remainder is 0 whatever the number, so
// the number (one Threefish block, about a tenth of a fuzz case's CPU time) is not made: the
// value is RapidCheck's all the same, and the copy of `random` it would come from is never seen
// again.
inline uint64_t NumberBelow(const rc::Random& random, uint64_t n) {
  return n == 1 ? 0 : FirstNumber(random) % n;
}

// WeightedIndex(weights, FirstNumber(random) % WeightSum(weights)), without making the number
// when every number picks the same index (one weight holds the whole sum: a swarm that left one
// option in). The index only grows with the number, so the first and last agreeing is enough.
template <typename Weights>
size_t WeightedPick(const Weights& weights, const rc::Random& random) {
  const uint64_t sum = WeightSum(weights);
  const size_t first = WeightedIndex(weights, 0);
  if (first == WeightedIndex(weights, sum - 1)) return first;
  return WeightedIndex(weights, FirstNumber(random) % sum);
}

}  // namespace draw_detail

// rc::gen::just(value): always `value`.
template <typename T>
struct Just {
  using Value = T;
  T value;
  rc::Gen<T> Gen() const { return rc::gen::just(value); }
  T Direct(const rc::Random& /*random*/, int /*size*/) const { return value; }
};

// rc::gen::inRange<T>(min, max): uniform in [min, max) scaled by the size (the range grows to
// its whole width at rc::kNominalSize), shrinking towards min. Errors: max <= min throws
// rc::GenerationFailure, as RapidCheck's does.
template <typename T>
struct InRange {
  using Value = T;
  T min, max;
  rc::Gen<T> Gen() const { return rc::gen::inRange<T>(min, max); }
  T Direct(const rc::Random& random, int size) const {
    if (max <= min)
      throw rc::GenerationFailure("Invalid range [" + std::to_string(min) + ", " +
                                  std::to_string(max) + ")");
    const uint64_t range =
        rc::gen::detail::scaleInteger(
            static_cast<rc::Random::Number>(max) - static_cast<rc::Random::Number>(min) - 1, size) +
        1;
    return static_cast<T>(draw_detail::NumberBelow(random, range) + min);
  }
};

// rc::gen::resize(size, dist): `dist` at a fixed size, whatever the case's.
template <typename D>
struct Resized {
  using Value = typename D::Value;
  int size;
  D dist;
  rc::Gen<Value> Gen() const { return rc::gen::resize(size, dist.Gen()); }
  Value Direct(const rc::Random& random, int /*size*/) const { return dist.Direct(random, size); }
};

// rc::gen::map(dist, f): f of what `dist` draws.
template <typename D, typename F>
struct Mapped {
  using Value = std::decay_t<std::invoke_result_t<const F&, typename D::Value>>;
  D dist;
  F f;
  rc::Gen<Value> Gen() const { return rc::gen::map(dist.Gen(), f); }
  Value Direct(const rc::Random& random, int size) const { return f(dist.Direct(random, size)); }
};
template <typename D, typename F>
Mapped<D, F> Map(D dist, F f) {
  return {std::move(dist), std::move(f)};
}

// rc::gen::element(a, b, ...): one of N values, uniform, size-independent, no shrinking.
template <typename T, size_t N>
struct Elements {
  using Value = T;
  std::array<T, N> values;
  rc::Gen<T> Gen() const {
    return rc::gen::elementOf(std::vector<T>(values.begin(), values.end()));
  }
  T Direct(const rc::Random& random, int /*size*/) const {
    return values[static_cast<size_t>(draw_detail::NumberBelow(random, N))];
  }
};
template <typename T, typename... Ts>
Elements<T, 1 + sizeof...(Ts)> Element(T first, Ts... rest) {
  return {{{first, static_cast<T>(rest)...}}};
}

// rc::gen::elementOf(*values): one of the values of a vector the caller keeps alive for the
// draw, uniform, no shrinking. Errors: an empty vector throws rc::GenerationFailure.
template <typename T>
struct ElementOf {
  using Value = T;
  const std::vector<T>* values;
  rc::Gen<T> Gen() const { return rc::gen::elementOf(*values); }
  T Direct(const rc::Random& random, int /*size*/) const {
    if (values->empty()) throw rc::GenerationFailure("Cannot pick element from empty container.");
    return (*values)[static_cast<size_t>(draw_detail::NumberBelow(random, values->size()))];
  }
};

// rc::gen::elementOf of the numbers 0 .. n - 1 (swarm masks: no table of them is built to draw
// directly).
struct IndexBelow {
  using Value = uint32_t;
  uint32_t n;
  rc::Gen<uint32_t> Gen() const {
    std::vector<uint32_t> all(n);
    for (uint32_t x = 0; x < n; ++x) all[x] = x;
    return rc::gen::elementOf(std::move(all));
  }
  uint32_t Direct(const rc::Random& random, int /*size*/) const {
    if (n == 0) throw rc::GenerationFailure("Cannot pick element from empty container.");
    return static_cast<uint32_t>(draw_detail::NumberBelow(random, n));
  }
};

// rc::gen::weightedElement({{w, v}, ...}): v with probability w / sum(w), no shrinking.
// Weights are not all 0.
template <typename T, size_t N>
struct Weighted {
  using Value = T;
  std::array<size_t, N> weights;
  std::array<T, N> values;
  rc::Gen<T> Gen() const {
    return rc::gen::detail::WeightedElementGen<T>(
        std::vector<size_t>(weights.begin(), weights.end()),
        std::vector<T>(values.begin(), values.end()));
  }
  T Direct(const rc::Random& random, int /*size*/) const {
    return values[draw_detail::WeightedPick(weights, random)];
  }
};
// rc::gen::weightedOneOf<T>({{w, dist}, ...}): a dist picked with probability w / sum(w), then
// drawn (RapidCheck's join: the pick from a first random source, the draw from the one split off
// it). Shrinks as the picked dist does.
template <typename T, typename... D>
struct OneOf {
  using Value = T;
  std::array<size_t, sizeof...(D)> weights;
  std::tuple<D...> dists;
  static_assert((std::is_same_v<typename D::Value, T> && ...), "every dist draws a T");
  rc::Gen<T> Gen() const {
    std::vector<rc::Gen<T>> gens;
    std::apply([&](const auto&... d) { (gens.push_back(d.Gen()), ...); }, dists);
    return rc::gen::join(rc::Gen<rc::Gen<T>>(rc::gen::detail::WeightedElementGen<rc::Gen<T>>(
        std::vector<size_t>(weights.begin(), weights.end()), std::move(gens))));
  }
  T Direct(const rc::Random& random, int size) const {
    rc::Random pick(random);
    const rc::Random inner = pick.split();
    return DirectAt(draw_detail::WeightedPick(weights, pick), inner, size,
                    std::index_sequence_for<D...>{});
  }

 private:
  template <size_t... I>
  T DirectAt(size_t i, const rc::Random& random, int size, std::index_sequence<I...>) const {
    T out{};
    ((I == i ? void(out = std::get<I>(dists).Direct(random, size)) : void()), ...);
    return out;
  }
};

// rc::gen::container<std::vector<V>>(dist): a vector of 0 .. size values of `dist` (the count
// from a first random source, each value from one more split of the rest).
template <typename D>
struct VectorOf {
  using Value = std::vector<typename D::Value>;
  D dist;
  rc::Gen<Value> Gen() const { return rc::gen::container<Value>(dist.Gen()); }
  Value Direct(const rc::Random& random, int size) const {
    rc::Random r(random);
    const size_t count =
        static_cast<size_t>(draw_detail::NumberBelow(r.split(), static_cast<uint64_t>(size) + 1));
    Value out;
    out.reserve(count);
    for (size_t i = 0; i < count; ++i) out.push_back(dist.Direct(r.split(), size));
    return out;
  }
};

// Draws a distribution one of the two ways (the file comment). A Drawer is one case's source of
// draws: not shared between threads. The direct way touches no RapidCheck state (only
// rc::Random's value methods), so direct Drawers on different threads need no lock.
class Drawer {
 public:
  // Through RapidCheck: only while rc::gen::exec runs the generator (its handler records the
  // draws).
  Drawer() = default;
  // Directly from `random` at `size`: the draws rc::gen::exec(...)(random, size) makes, value for
  // value.
  Drawer(const rc::Random& random, int size) : direct_(true), stream_(random), size_(size) {}

  template <typename D>
  typename D::Value operator()(const D& dist) {
    if (!direct_) return *dist.Gen();
    return dist.Direct(stream_.split(), size_);
  }

 private:
  bool direct_ = false;
  rc::Random stream_;
  int size_ = 0;
};

// ---------------------------------------------------------------------------------------------

namespace draw_detail {

template <size_t N, typename T>
void FillWeighted(Weighted<T, N>& /*out*/, size_t /*i*/) {}

template <size_t N, typename T, typename U, typename... Ts>
void FillWeighted(Weighted<T, N>& out, size_t i, size_t w, U v, Ts... rest) {
  out.weights[i] = w;
  out.values[i] = static_cast<T>(v);
  FillWeighted<N, T>(out, i + 1, rest...);
}

}  // namespace draw_detail

// WeightedElement(w0, v0, w1, v1, ...): Weighted of those pairs (rc::gen::weightedElement's
// order).
template <typename T, typename... Ts>
Weighted<T, 1 + sizeof...(Ts) / 2> WeightedElement(size_t w, T v, Ts... rest) {
  static_assert(sizeof...(Ts) % 2 == 0, "weights and values come in pairs");
  Weighted<T, 1 + sizeof...(Ts) / 2> out{};
  draw_detail::FillWeighted<1 + sizeof...(Ts) / 2, T>(out, 0, w, v, rest...);
  return out;
}

// rc::gen::weightedOneOf<T>({{weights[0], dists[0]}, ...}).
template <typename T, typename... D>
OneOf<T, D...> WeightedOneOf(std::array<size_t, sizeof...(D)> weights, D... dists) {
  return {weights, std::tuple<D...>(std::move(dists)...)};
}

// Draws the dist of `options` at `i` alone: one draw, of that dist (swarm's choice among the
// options a case left in, fuzz/scenario_gen.cpp).
template <typename T, typename... D>
T DrawAlternative(Drawer& d, const OneOf<T, D...>& options, size_t i) {
  T out{};
  std::apply(
      [&](const auto&... dist) {
        size_t k = 0;
        ((k++ == i ? void(out = d(dist)) : void()), ...);
      },
      options.dists);
  return out;
}

}  // namespace mlasim::fuzz
