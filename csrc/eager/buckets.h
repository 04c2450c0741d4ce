// Bucketed programs (DESIGN decision 17): a Fused program, a graph
// torch.compile captured, or a Strict op (at the same place in the op
// stream, Task::place), whose graph was seen before with other sizes (the
// same ops; sizes that vary as one size v does, ops/bucket.h), runs as its
// bucket's program, with the true v as an
// argument; so one program compiles per bucket instead of one per size.
// Storages keep their exact values. A padded input comes from the padded
// twin an earlier bucketed program left beside the exact value (slot.h),
// else from a small upload's host bytes padded on the host, else from one
// small pad program; the padded outputs stay as twins of the exact values,
// which one small cut-back program fills only when something reads them.
// A graph seen once, one whose exact program is already compiled, or one
// with an op that declares no rule for padded dims runs as it is. Buckets:
// powers of two from 16 by default, an explicit list, or none. Thread-safe.
// A new bucket whose plan has a compiled program of a larger bucket (within
// kStandInRatio and the device's free memory) compiles in the background
// while its runs use that larger program, so a step does not wait for a
// compilation it can do without (Strict and Fused Eager and captured
// graphs; Debug Eager compiles at once).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "eager/executor.h"
#include "ops/bucket.h"

namespace torchtpu::eager {

class Buckets {
 public:
  // The tasks that compute what `task` computes, in submission order.
  std::vector<std::unique_ptr<Task>> apply(std::unique_ptr<Task> task);

  struct Program {  // one bucket's program of one plan (opaque to callers)
    std::shared_ptr<const ir::Graph> graph;
    int64_t bucket = 0;
    ops::bucket::Padded ports;  // its graph moved out
    std::atomic<bool> compiling{false};  // in the background, not runnable without waiting
    int64_t bytes = 0;                    // of its outputs
  };
  // A larger bucket's program stands in for a compiling one up to this
  // many times the bucket's size, and while its outputs take at most half
  // the device's free memory (a padded run must not fail for memory where
  // the bucket's own program would fit).
  static constexpr int64_t kStandInRatio = 8;
  // A graph's bucket program (compiled) and the graph's true v.
  struct Bucketed {
    std::shared_ptr<const Program> program;
    int64_t v = 0;
    // While `program` is a larger bucket's standing in: the bucket's own,
    // compiling in the background.
    std::shared_ptr<const Program> own;
    bool fresh = false;  // its first run is counted already (a stand-in's)
  };
  // A kept choice (a torch.compile graph's), before each run: it takes the
  // bucket's own program once that has compiled (else the run counts as a
  // stand-in's).
  void settle(Bucketed& b);
  // The bucket program for `g` (attributed to `site` when it compiles), or
  // nullopt: run `g` as it is.
  // `args`: the graph's arguments, whose twins tell the unit of v (a graph
  // that sees only [4n] measures n when its input is laid out as [4, n]).
  // `place`: a Strict op's place in the op stream (Task::place), or 0.
  // `device`: where it runs.
  std::optional<Bucketed> choose(const ir::Graph& g, const OpSite* site, const std::vector<Task::Arg>& args,
                                 uint64_t place = 0, int device = 0);
  // The tasks that compute what `task` (a run of the graph `b` was chosen
  // for) computes: one pad program for its padded inputs, the bucket's
  // program, one unpad program for its padded outputs.
  std::vector<std::unique_ptr<Task>> expand(std::unique_ptr<Task> task, const Bucketed& b);

  // Empty: no bucketing; {0}: powers of two from 16; else the sizes, ascending.
  void set_sizes(std::vector<int64_t> sizes);
  // Fills the padding with NaN (floats) or large values (integers) instead
  // of zeros, to show that no result reads it (tests).
  void set_poison(bool on) { poison_ = on; }
  // The bucket of size v, or nullopt when v is past the largest.
  std::optional<int64_t> bucket_of(int64_t v) const;

  struct Stats {
    int64_t programs = 0;  // bucketed programs queued
    int64_t refused = 0;   // graphs with a varying size that ran at exact sizes
    int64_t stand_ins = 0;  // runs of a larger bucket's program while theirs compiled
    int64_t compiling = 0;  // bucket programs compiling in the background now
    int64_t exact_elements = 0, padded_elements = 0;  // of the bucketed programs' padded inputs and outputs
    std::string last_refusal;
  };
  Stats stats() const;
  void reset_stats();

  // Device bytes held by padded twins (beside the exact values), now and at
  // their peak since reset_padding_peak().
  int64_t padding_bytes(int device) const;
  int64_t padding_peak_bytes(int device) const;
  void reset_padding_peak(int device);

 private:
  struct Fitted {  // one plan of a skeleton, with its bucket programs
    ops::bucket::Plan plan;
    std::string refused;  // why the plan's graphs do not bucket
    std::map<int64_t, std::shared_ptr<Program>> programs;  // by bucket
    uint64_t used = 0;
  };
  struct State {
    std::vector<ops::bucket::Sizes> seen;  // distinct sizes, the latest last (kSeen at most)
    std::vector<Fitted> plans;              // kPlans at most
    uint64_t used = 0;
  };
  // The sizes a skeleton remembers, and the plans it keeps (least recently
  // used dropped): a decode loop over prompts keeps one plan per position,
  // so up to kPlans positions keep theirs across prompts.
  static constexpr size_t kSeen = 96, kPlans = 48;
  static uint64_t key_of(const ops::bucket::Sizes& sizes, uint64_t place);
  // The state of `skeleton`, marked used; or null after remembering `sizes`
  // as its first. Called with mu_ held.
  State* known(uint64_t skeleton, ops::bucket::Sizes& sizes);
  // Remembers the sizes of `g` (run at its exact sizes from the cache) as a
  // run of its state, so the next size fits a plan as after a compilation.
  void observe(const ir::Graph& g, uint64_t place);
  // Adds `sizes` to what `s` has seen (as its latest). Called with mu_ held.
  static void remember(State& s, ops::bucket::Sizes sizes);
  // A twin of `bytes` on `device`, counted while it lives.
  std::shared_ptr<const Slot::Twin> counted_twin(Slot::Twin t, int device, int64_t bytes);
  static constexpr int kCountedDevices = 64;
  std::atomic<int64_t> padding_[kCountedDevices] = {}, padding_peak_[kCountedDevices] = {};
  // The bucket's program for `g` (compiled, attributed to `site`) and its
  // v, or null: run `g` as it is.
  // `own`: set when the program returned stands in for the bucket's own.
  std::shared_ptr<Program> program_for(const ir::Graph& g, int64_t* v, const OpSite* site,
                                       const std::vector<Task::Arg>& args, uint64_t place, int device,
                                       std::shared_ptr<const Program>* own);
  // Runs of the plan of `skeleton` that holds `held` stay at exact sizes:
  // its bucket's program did not compile (`why`).
  void refuse(uint64_t skeleton, const std::string& why, const Program* held);
  // A background compilation of `prog` ended (with `error`, or null).
  void compiled(uint64_t skeleton, const std::shared_ptr<Program>& prog, std::exception_ptr error);
  mutable std::mutex mu_;
  std::map<uint64_t, State> states_;  // by skeleton (and place)
  uint64_t clock_ = 0;
  std::vector<int64_t> sizes_{0};
  bool poison_ = false;
  Stats stats_;
};

Buckets& buckets();

}  // namespace torchtpu::eager
