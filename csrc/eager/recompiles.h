// Why each compilation happened. A graph that missed the compile cache is
// compared with the graphs compiled before from the same user site (the
// source position and op of its first op): the same ops over other shapes is
// a new shape, and the difference is named ("input 0 dim 1: 40 -> 48"); the
// same ops and shapes with other attributes (slice bounds, donations) are
// new attributes; anything else (the first graph of a site, other ops) is a
// new program. Events wait in a bounded list until the Python layer drains
// them (describing a site takes the GIL, which a compiling thread must not
// wait for). Thread-safe; torch-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "eager/slot.h"
#include "ir/graph.h"

namespace torchtpu::eager {

class RecompileLog {
 public:
  // kNewBucket: the program of a size's bucket (eager/buckets.h); kPadding:
  // a bucketed program's pad or unpad, counted only.
  // kReplayMiss is no compilation: Fused Eager stopped replaying a recorded
  // graph at this op (fused_graph.h); reported, never counted here.
  enum class Cause { kNewProgram, kNewShape, kNewAttributes, kNewBucket, kPadding, kReplayMiss };
  static const char* name(Cause c);

  struct Event {
    OpSite site;
    Cause cause;
    std::string detail;   // the difference from the site's previous graph, in words
    int64_t site_count;   // compilations at this site so far, this one included
    int64_t shape_count;  // of which for new shapes (or attributes)
  };

  // Records a compilation of `g`, issued at `site`; returns its cause.
  Cause record(const ir::Graph& g, const OpSite& site, bool padding = false, int64_t bucket = 0);

  // Fused Eager's replay stopped at `site`: why, in words.
  void replay_miss(const OpSite& site, std::string detail);
  // Compilations so far by cause.
  std::map<std::string, int64_t> counts() const;
  // The events not yet drained, oldest first (at most kMaxEvents kept).
  std::vector<Event> drain();
  // Counts start again from zero; the sites' last graphs stay known.
  void reset();
  bool has_events() const { return pending_.load(std::memory_order_relaxed) != 0; }

  static constexpr size_t kMaxEvents = 256;
  static constexpr size_t kMaxSites = 512;

 private:
  // What is kept of a site's latest graph: a hash of its structure without
  // sizes, the parameter types, every node's result dims (flattened) when
  // the graph is small enough, and a hash of its attributes and donations.
  struct Shape {
    uint64_t skeleton = 0;
    uint64_t attributes = 0;
    std::vector<ir::Type> params;
    std::vector<ir::Dims> views;  // per parameter: the shape it is first reshaped to (a flat storage's tensor shape)
    std::vector<int64_t> dims;  // empty when too large to keep
    int64_t nodes = 0;
  };
  struct Site {
    std::vector<Shape> shapes;  // most recent first, at most kShapesPerSite
    int64_t count = 0;
    int64_t shape_count = 0;
    uint64_t order = 0;
  };
  static constexpr size_t kShapesPerSite = 4;
  static Shape shape_of(const ir::Graph& g);
  static std::string difference(const Shape& before, const Shape& now);
  // Between graphs of other ops: inputs that changed dtype or became a
  // Python number or a tensor ("; input 1 dtype f32 -> bf16"), or "".
  static std::string inputs_difference(const Shape& before, const Shape& now);

  mutable std::mutex mu_;
  std::map<std::tuple<const void*, int, const char*>, Site> sites_;
  uint64_t next_order_ = 0;
  std::deque<Event> events_;
  std::atomic<size_t> pending_{0};
  int64_t by_cause_[6] = {0, 0, 0, 0, 0, 0};
};

RecompileLog& recompile_log();

}  // namespace torchtpu::eager
