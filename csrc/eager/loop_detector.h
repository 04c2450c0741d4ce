// Loop detection for Fused Eager (DESIGN decision 8). Every op recorded is
// one fingerprint (the structural key of the op's own graph). When a graph
// reaches the size limit, the detector looks for the period of the recent
// op stream (a training step, a layer loop); from then on it cuts a graph
// after as many whole periods as fit the size limit (a period longer than the
// limit at multiples of the limit inside it), always at the same phase, so each cut graph repeats exactly and hits the
// compile cache. An op that breaks the period ends loop mode.
#pragma once

#include <cstdint>
#include <vector>

namespace torchtpu::eager {

class LoopDetector {
 public:
  explicit LoopDetector(int64_t max_ops) : max_ops_(max_ops) {}
  void set_max_ops(int64_t n) { max_ops_ = n; }
  int64_t max_ops() const { return max_ops_; }

  enum class Cut { kNone, kLoop, kSize };
  // Records one op; `ops_in_graph` counts it. Says whether to cut after it.
  Cut record(uint64_t fingerprint, int64_t ops_in_graph);
  // The period in ops (0 when not in loop mode).
  int64_t period() const { return period_; }
  void reset();

  // The smallest period p of the end of `h` whose periodic stretch is
  // longest and covers at least two periods; 0 if there is none.
  static int64_t find_period(const std::vector<uint64_t>& h);

 private:
  int64_t max_ops_;
  std::vector<uint64_t> history_;
  int64_t total_ = 0;   // ops recorded; history_ holds the last ones
  int64_t period_ = 0;
  int64_t anchor_ = 0;  // total_ at the first cut of loop mode
};

}  // namespace torchtpu::eager
