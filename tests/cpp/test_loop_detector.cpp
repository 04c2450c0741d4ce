// LoopDetector: period finding on op-fingerprint streams and the cut points
// it chooses.
#include <gtest/gtest.h>

#include "eager/loop_detector.h"

using torchtpu::eager::LoopDetector;

namespace {
std::vector<uint64_t> repeat(const std::vector<uint64_t>& body, int times, std::vector<uint64_t> prefix = {}) {
  for (int i = 0; i < times; ++i) prefix.insert(prefix.end(), body.begin(), body.end());
  return prefix;
}
}  // namespace

TEST(LoopDetector, FindsThePeriodOfARepeatedStep) {
  EXPECT_EQ(LoopDetector::find_period(repeat({1, 2, 3, 4, 5}, 4)), 5);
  // A prefix before the loop does not matter.
  EXPECT_EQ(LoopDetector::find_period(repeat({7, 8, 9}, 5, {42, 43})), 3);
}

TEST(LoopDetector, PrefersTheStepOverAnInnerRepeat) {
  // A step made of three identical "layers" (1,2) and a head (9): the inner
  // period covers only three layers; the step's covers the whole stream.
  std::vector<uint64_t> step = {1, 2, 1, 2, 1, 2, 9};
  EXPECT_EQ(LoopDetector::find_period(repeat(step, 4)), 7);
}

TEST(LoopDetector, NoPeriodInAStreamThatNeverRepeats) {
  std::vector<uint64_t> h;
  for (uint64_t i = 0; i < 100; ++i) h.push_back(i);
  EXPECT_EQ(LoopDetector::find_period(h), 0);
  EXPECT_EQ(LoopDetector::find_period({}), 0);
  // One and a half periods is not a loop yet.
  EXPECT_EQ(LoopDetector::find_period({1, 2, 3, 4, 1, 2}), 0);
}

TEST(LoopDetector, CutsAtTheSizeLimitThenAtWholePeriods) {
  LoopDetector d(10);
  std::vector<uint64_t> body = {1, 2, 3};
  int64_t in_graph = 0;
  std::vector<int64_t> sizes;
  std::vector<LoopDetector::Cut> kinds;
  for (int i = 0; i < 60; ++i) {
    ++in_graph;
    LoopDetector::Cut c = d.record(body[i % 3], in_graph);
    if (c != LoopDetector::Cut::kNone) {
      sizes.push_back(in_graph);
      kinds.push_back(c);
      in_graph = 0;
    }
  }
  ASSERT_GE(sizes.size(), 4u);
  EXPECT_EQ(kinds[0], LoopDetector::Cut::kSize);
  EXPECT_EQ(sizes[0], 10);
  EXPECT_EQ(d.period(), 3);
  // From then on every graph holds three whole periods (9 <= 10 ops).
  for (size_t i = 1; i < sizes.size(); ++i) {
    EXPECT_EQ(kinds[i], LoopDetector::Cut::kLoop);
    EXPECT_EQ(sizes[i], 9);
  }
}

TEST(LoopDetector, ABrokenLoopEndsLoopMode) {
  LoopDetector d(6);
  int64_t n = 0;
  for (int i = 0; i < 24; ++i) {
    ++n;
    if (d.record(i % 2, n) != LoopDetector::Cut::kNone) n = 0;
  }
  EXPECT_EQ(d.period(), 2);
  d.record(99, ++n);
  EXPECT_EQ(d.period(), 0);
}

TEST(LoopDetector, APeriodLongerThanTheLimitIsCutAtTheSamePhase) {
  LoopDetector d(4);
  std::vector<uint64_t> body = {1, 2, 3, 4, 5, 6, 7};  // 7 ops > limit 4
  int64_t n = 0;
  std::vector<int64_t> sizes;
  for (int i = 0; i < 7 * 12; ++i) {
    ++n;
    if (d.record(body[i % 7], n) != LoopDetector::Cut::kNone) {
      sizes.push_back(n);
      n = 0;
    }
  }
  ASSERT_EQ(d.period(), 7);
  // Once in loop mode the sizes repeat with the period: 4, 3, 4, 3, ...
  std::vector<int64_t> tail(sizes.end() - 6, sizes.end());
  EXPECT_EQ(tail[0] + tail[1], 7);
  EXPECT_EQ(tail[0], tail[2]);
  EXPECT_EQ(tail[1], tail[3]);
  for (int64_t s : tail) EXPECT_LE(s, 4);
}
