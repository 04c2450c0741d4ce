#include "eager/loop_detector.h"

#include <algorithm>

namespace torchtpu::eager {

int64_t LoopDetector::find_period(const std::vector<uint64_t>& h) {
  // Z-function of the reversed stream: z[p] is how far the stream, read
  // backwards from its end, agrees with itself shifted by p, so the last
  // z[p] + p ops are p-periodic.
  const int64_t n = static_cast<int64_t>(h.size());
  if (n < 2) return 0;
  auto at = [&](int64_t i) { return h[n - 1 - i]; };
  std::vector<int64_t> z(n, 0);
  int64_t l = 0, r = 0;
  for (int64_t i = 1; i < n; ++i) {
    if (i < r) z[i] = std::min(r - i, z[i - l]);
    while (i + z[i] < n && at(z[i]) == at(i + z[i])) ++z[i];
    if (i + z[i] > r) {
      l = i;
      r = i + z[i];
    }
  }
  int64_t best = 0, best_extent = 0;
  for (int64_t p = 1; p <= n / 2; ++p) {
    int64_t extent = z[p] + p;
    if (extent >= 2 * p && extent > best_extent) {
      best = p;
      best_extent = extent;
    }
  }
  return best;
}

LoopDetector::Cut LoopDetector::record(uint64_t fp, int64_t ops_in_graph) {
  history_.push_back(fp);
  ++total_;
  const int64_t n = static_cast<int64_t>(history_.size());
  Cut cut = Cut::kNone;
  if (period_ > 0) {
    if (n <= period_ || history_[n - 1 - period_] != fp) {
      period_ = 0;  // the loop ended
    } else {
      // A graph holds as many whole periods as fit in the size limit; a
      // period longer than the limit is cut at multiples of the limit.
      const int64_t unit = period_ <= max_ops_ ? period_ * (max_ops_ / period_) : period_;
      const int64_t phase = (total_ - anchor_) % unit;
      if (phase == 0 || (unit > max_ops_ && phase % max_ops_ == 0)) cut = Cut::kLoop;
    }
  }
  if (period_ == 0 && ops_in_graph >= max_ops_) {
    period_ = find_period(history_);
    anchor_ = total_;
    cut = Cut::kSize;
  }
  // Keep enough history to see a period twice at the largest graph size.
  const size_t keep = static_cast<size_t>(std::max<int64_t>(4 * max_ops_, 2 * period_ + 1));
  if (history_.size() > 2 * keep) history_.erase(history_.begin(), history_.end() - keep);
  return cut;
}

void LoopDetector::reset() {
  history_.clear();
  total_ = period_ = anchor_ = 0;
}

}  // namespace torchtpu::eager
