// Structural graph keys: a 128-bit fingerprint of op kinds, attributes,
// operand edges, result types, outputs and donations, computed without
// printing. Two graphs with equal keys print the same StableHLO.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/graph.h"

namespace torchtpu::ir {

struct GraphKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const GraphKey& o) const { return hi == o.hi && lo == o.lo; }
  std::string hex() const;
};

struct GraphKeyHash {
  size_t operator()(const GraphKey& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL)); }
};

// Incremental 128-bit hasher: two independent 64-bit lanes, each a
// multiply-rotate round per word (xxHash64's round in the first), mixed
// together at the end.
class Hasher {
 public:
  void u64(uint64_t v) {
    a_ = rotl(a_ + v * 0xC2B2AE3D27D4EB4FULL, 31) * 0x9E3779B185EBCA87ULL;
    b_ = rotl(b_ ^ (v * 0x85EBCA77C2B2AE63ULL), 27) * 0x165667B19E3779F9ULL + 0x27D4EB2F165667C5ULL;
  }
  void bytes(const void* data, size_t n);
  void str(const char* s);
  GraphKey key() const;

 private:
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  uint64_t a_ = 0x243F6A8885A308D3ULL, b_ = 0x13198A2E03707344ULL;
};

// Key of the graph; `salt` carries what else selects the executable
// (platform, compile options, optimization level).
GraphKey graph_key(const Graph& g, const GraphKey& salt);

}  // namespace torchtpu::ir
