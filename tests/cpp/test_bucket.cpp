// Bucketing plans and rewrites (ops/bucket.h): which sizes vary, and the
// padded program's structure. Results against exact programs are checked
// end to end in tests/test_buckets.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "ops/bucket.h"

namespace ir = torchtpu::ir;
namespace bucket = torchtpu::ops::bucket;

namespace {

// flat [4*n*3] -> [4, n, 3] -> sum over n -> [4, 3]; and x[:, 1:] summed.
ir::Graph graph(int64_t n) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value p = g.parameter({ir::DType::kF32, {4 * n * 3}});
  ir::Value x = b.reshape(p, {4, n, 3});
  ir::Value tail = b.slice(x, {0, 1, 0}, {4, n, 3});
  g.outputs = {b.reduce_sum(x, {1}), b.reduce_sum(tail, {1}), b.reshape(b.exp(x), {4 * n * 3})};
  return g;
}

int count(const ir::Graph& g, const char* op) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [&](const ir::Node& n) { return std::strcmp(n.op, op) == 0; }));
}

}  // namespace

TEST(Bucket, PlanFitsAffineSizesOfOneVariable) {
  auto plan = bucket::Plan::fit(bucket::sizes_of(graph(5)), bucket::sizes_of(graph(7)));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->v_of(bucket::sizes_of(graph(11))), 11);
  EXPECT_EQ(plan->v_of(bucket::sizes_of(graph(1))), 1);
  EXPECT_EQ(plan->v_of(bucket::sizes_of(graph(7))), 7);
  // Nothing varies: no plan. Another structure: no plan.
  EXPECT_FALSE(bucket::Plan::fit(bucket::sizes_of(graph(5)), bucket::sizes_of(graph(5))).has_value());
  ir::Graph other;
  other.outputs = {other.parameter({ir::DType::kF32, {3}})};
  EXPECT_FALSE(bucket::Plan::fit(bucket::sizes_of(graph(5)), bucket::sizes_of(other)).has_value());
}

TEST(Bucket, PaddedProgramMasksReductionsAndTakesTheTrueSize) {
  auto plan = bucket::Plan::fit(bucket::sizes_of(graph(5)), bucket::sizes_of(graph(7)));
  ASSERT_TRUE(plan.has_value());
  std::string why;
  auto padded = bucket::pad(graph(7), *plan, 7, 16, &why);
  ASSERT_TRUE(padded.has_value()) << why;
  const ir::Graph& g = padded->graph;
  ASSERT_GE(padded->v_index, 0);
  EXPECT_EQ(g.parameter_type(padded->v_index).dtype, ir::DType::kS64);
  EXPECT_EQ(g.parameter_type(padded->v_index == 0 ? 1 : 0).dims, ir::Dims({4 * 16 * 3}));
  EXPECT_EQ(count(g, "stablehlo.select"), 2);  // one per reduction over the padded dim
  ASSERT_EQ(padded->inputs.size(), 1u);
  ASSERT_EQ(padded->outputs.size(), 1u);  // only the exp's flat value is padded
  EXPECT_EQ(padded->outputs[0].padded, ir::Dims({4 * 16 * 3}));
  EXPECT_EQ(padded->exact_elements, 2 * 4 * 7 * 3);
  // The pad and unpad programs move between the exact and padded layouts.
  ir::Graph in = bucket::pad_inputs(padded->inputs, {ir::DType::kF32}, {0});
  EXPECT_EQ(in.type(in.outputs[0]).dims, ir::Dims({4 * 16 * 3}));
  ir::Graph out = bucket::unpad_outputs(padded->outputs, {ir::DType::kF32});
  EXPECT_EQ(out.type(out.outputs[0]).dims, ir::Dims({4 * 7 * 3}));
  // Several ports convert in one program each way.
  ir::Graph both = bucket::unpad_outputs({padded->outputs[0], padded->inputs[0]}, {ir::DType::kF32, ir::DType::kBF16});
  ASSERT_EQ(both.outputs.size(), 2u);
  EXPECT_EQ(both.parameter_type(1).dtype, ir::DType::kBF16);
  EXPECT_EQ(both.type(both.outputs[1]).dims, ir::Dims({4 * 7 * 3}));
}

TEST(Bucket, AnOpWithoutARuleIsRefused) {
  auto make = [](int64_t n) {
    ir::Graph g;
    torchtpu::ops::Builder b(g);
    ir::Value p = g.parameter({ir::DType::kF32, {n}});
    g.outputs = b.sort({p}, 0, false, true);
    return g;
  };
  auto plan = bucket::Plan::fit(bucket::sizes_of(make(5)), bucket::sizes_of(make(6)));
  ASSERT_TRUE(plan.has_value());
  std::string why;
  EXPECT_FALSE(bucket::pad(make(6), *plan, 6, 16, &why).has_value());
  EXPECT_NE(why.find("stablehlo.sort"), std::string::npos) << why;
}

namespace {

// A flat [h*n*n] parameter (attention weights saved for the backward) read
// as [h, n, n], beside a length-n + 1 dim that must not become v.
ir::Graph square(int64_t n) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value p = g.parameter({ir::DType::kF32, {4 * n * n}});
  ir::Value q = g.parameter({ir::DType::kF32, {n + 1}});
  ir::Value w = b.reshape(p, {4, n, n});
  g.outputs = {b.reduce_sum(w, {2}), b.reduce_sum(q, {0})};
  return g;
}

}  // namespace

// A flat [n*(n+1)] parameter: a size quadratic in n but not a multiple of n*n.
ir::Graph triangle(int64_t n) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value p = g.parameter({ir::DType::kF32, {n * (n + 1)}});
  ir::Value q = g.parameter({ir::DType::kF32, {n}});
  g.outputs = {b.reduce_sum(p, {0}), b.reduce_sum(q, {0})};
  return g;
}

TEST(Bucket, ASizeThatGrowsAsTheSquare) {
  // Two observations take a size that is q*v*v at both as that.
  const bucket::Sizes a = bucket::sizes_of(square(5)), b = bucket::sizes_of(square(7)),
                      c = bucket::sizes_of(square(10));
  auto plan = bucket::Plan::fit(a, b);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->v_of(bucket::sizes_of(square(13))), 13);  // v is n, more frequent than n + 1
  EXPECT_EQ(plan->v_of(c), 10);
  // Any other quadratic size: two observations fit it as a line, which the third misses.
  const bucket::Sizes ta = bucket::sizes_of(triangle(5)), tb = bucket::sizes_of(triangle(7)),
                      tc = bucket::sizes_of(triangle(10));
  auto line = bucket::Plan::fit(ta, tb);
  ASSERT_TRUE(line.has_value());
  EXPECT_EQ(line->v_of(tc), -1);
  auto three = bucket::Plan::fit(ta, tb, tc);
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->v_of(bucket::sizes_of(triangle(13))), 13);
  // Three observations where one repeats a size tell nothing more.
  EXPECT_FALSE(bucket::Plan::fit(ta, ta, tb).has_value() && bucket::Plan::fit(ta, ta, tb)->v_of(tc) == 10);
  std::string why;
  auto padded = bucket::pad(square(10), *plan, 10, 16, &why);
  ASSERT_TRUE(padded.has_value()) << why;
  ASSERT_EQ(padded->inputs.size(), 2u);
  EXPECT_EQ(padded->inputs[0].padded, ir::Dims({4 * 16 * 16}));
  EXPECT_EQ(padded->inputs[1].padded, ir::Dims({17}));
}

namespace {

// A linear layer on a flattened [4, n, 8] batch: it sees only 4n rows.
ir::Graph linear(int64_t n) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value x = g.parameter({ir::DType::kF32, {4 * n * 8}});
  ir::Value w = g.parameter({ir::DType::kF32, {8 * 3}});
  ir::Value y = b.dot_general(b.reshape(x, {4 * n, 8}), b.reshape(w, {8, 3}), {}, {}, {1}, {0}, ir::DType::kF32);
  g.outputs = {b.reshape(y, {4 * n * 3})};
  return g;
}

}  // namespace

TEST(Bucket, AnInputsLayoutTellsTheUnitOfV) {
  auto plan = bucket::Plan::fit(bucket::sizes_of(linear(5)), bucket::sizes_of(linear(7)));
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->v_of(bucket::sizes_of(linear(9))), 36);  // alone, the graph measures 4n
  // An input laid out as [4, n, 8] holds 32 elements per n: v is n.
  EXPECT_EQ(plan->unit_for(linear(9), 0, 32), 4);
  EXPECT_EQ(plan->unit_for(linear(9), 1, 32), 1);  // the weight does not vary
  bucket::Plan by_n = plan->scaled(4);
  EXPECT_EQ(by_n.v_of(bucket::sizes_of(linear(9))), 9);
  std::string why;
  auto padded = bucket::pad(linear(9), by_n, 9, 16, &why);
  ASSERT_TRUE(padded.has_value()) << why;
  ASSERT_EQ(padded->inputs.size(), 1u);
  // The input and output keep the batch of 4 outermost: [4, n -> 16, 8] and [4, n -> 16, 3].
  ASSERT_EQ(padded->inputs[0].factors.size(), 1u);
  std::vector<int64_t> exact, pads;
  for (const bucket::Factor& f : padded->inputs[0].factors[0]) {
    if (f.exact == 1 && f.padded == 1) continue;
    exact.push_back(f.exact);
    pads.push_back(f.padded);
  }
  EXPECT_EQ(exact, (std::vector<int64_t>{4, 9, 8}));
  EXPECT_EQ(pads, (std::vector<int64_t>{4, 16, 8}));
  EXPECT_EQ(padded->outputs[0].padded, ir::Dims({4 * 16 * 3}));
}

TEST(Bucket, HugeSizesAndSentinelsFitWithoutTrapping) {
  // A square past 2^63 once wrapped to 0 and divided by it (SIGFPE); a line
  // through INT64_MAX and -1 divided INT64_MIN by -1.
  bucket::Sizes a, b;
  a.dims = {int64_t{1} << 38, 5};
  b.dims = {(int64_t{1} << 38) + 8, 5};
  EXPECT_FALSE(bucket::Plan::fit(a, b).has_value());
  a.dims = {10, 7};
  b.dims = {9, 7};
  a.attrs = {INT64_MAX, 3};
  b.attrs = {-1, 3};
  EXPECT_FALSE(bucket::Plan::fit(a, b).has_value());
  b.attrs = {INT64_MAX, 3};  // a sentinel that stays is fixed
  auto plan = bucket::Plan::fit(a, b);
  ASSERT_TRUE(plan.has_value());
  EXPECT_FALSE(plan->attrs[0].varies());
  EXPECT_EQ(plan->attrs[0].b, INT64_MAX);
}

namespace {

// A column-major [n, n + 1, 4] result made row-major: its flat storage holds
// 4*n*(n + 1) elements, which two observations (n = 2, 3) fit as the line
// 24*n - 24.
ir::Graph relayout(int64_t n) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value p = g.parameter({ir::DType::kF32, {4 * n * (n + 1)}});
  ir::Value t = b.transpose(b.reshape(b.reshape(p, {n, n + 1, 4, 1}), {n, n + 1, 4}), {0, 2, 1});
  g.outputs = {b.reshape(t, {4 * n * (n + 1)})};
  return g;
}

}  // namespace

TEST(Bucket, APlanThatOnlyLookedAffineIsRefusedNotMisread) {
  // The line says the flat storage pads to 24*16 - 24 elements as [24, n - 1];
  // its reshape to [n, n + 1, 4] must not split the 24 as fixed rows (the
  // result read the wrong elements) nor drop the n - 1 factor at n = 2.
  auto plan = bucket::Plan::fit(bucket::sizes_of(relayout(2)), bucket::sizes_of(relayout(3)));
  ASSERT_TRUE(plan.has_value());
  ASSERT_EQ(plan->v_of(bucket::sizes_of(relayout(3))), 3);
  std::string why;
  EXPECT_FALSE(bucket::pad(relayout(3), *plan, 3, 16, &why).has_value());
  EXPECT_NE(why.find("stablehlo.reshape"), std::string::npos) << why;
  auto back = bucket::Plan::fit(bucket::sizes_of(relayout(3)), bucket::sizes_of(relayout(2)));
  ASSERT_TRUE(back.has_value());
  EXPECT_FALSE(bucket::pad(relayout(2), *back, 2, 16, &why).has_value());
  EXPECT_NE(why.find("left over"), std::string::npos) << why;
}

namespace {

// A decode step of prompt length n at position t: an attention mask of
// n + t and a static cache of n + 8 rows.
ir::Graph decode(int64_t n, int64_t t) {
  ir::Graph g;
  torchtpu::ops::Builder b(g);
  ir::Value mask = g.parameter({ir::DType::kF32, {n + t}});
  ir::Value cache = g.parameter({ir::DType::kF32, {n + 8, 4}});
  g.outputs = {b.reduce_sum(mask, {0}), b.reduce_sum(cache, {0})};
  return g;
}

}  // namespace

TEST(Bucket, TwoIndependentSizesKeepThePlanThatCoversLaterPrompts) {
  for (int64_t step : {1, 2, 3}) {
    // Prompt n at positions 1..4, then prompt n + step at positions 1 and 2.
    const int64_t n = 10, m = n + step;
    std::vector<bucket::Sizes> seen;
    for (int64_t t = 1; t <= 4; ++t) seen.push_back(bucket::sizes_of(decode(n, t)));
    seen.push_back(bucket::sizes_of(decode(m, 1)));
    std::vector<const bucket::Sizes*> ptrs;
    for (const bucket::Sizes& s : seen) ptrs.push_back(&s);
    auto plan = bucket::Plan::fit_seen(ptrs, bucket::sizes_of(decode(m, 2)));
    ASSERT_TRUE(plan.has_value()) << step;
    // The plan over prompts at position 2 (mask and cache both vary), not
    // the one over positions of prompt m, nor one where the cache grows
    // twice as fast as the mask.
    for (int64_t later : {m + 1, m + 5, int64_t{40}}) EXPECT_GE(plan->v_of(bucket::sizes_of(decode(later, 2))), 0) << step;
    EXPECT_EQ(plan->v_of(bucket::sizes_of(decode(m, 3))), -1) << step;
    // Nothing seen before: no plan; only the same prompt seen: its positions.
    EXPECT_FALSE(bucket::Plan::fit_seen({}, seen[0]).has_value());
    auto positions = bucket::Plan::fit_seen({ptrs[0]}, seen[1]);
    ASSERT_TRUE(positions.has_value());
    EXPECT_GE(positions->v_of(seen[3]), 0);
  }
  // Sizes that vary as v*v: three observations fit the square where the
  // last two alone would fit a line.
  const bucket::Sizes ta = bucket::sizes_of(triangle(5)), tb = bucket::sizes_of(triangle(7)),
                      tc = bucket::sizes_of(triangle(10));
  auto three = bucket::Plan::fit_seen({&ta, &tb}, tc);
  ASSERT_TRUE(three.has_value());
  EXPECT_EQ(three->v_of(bucket::sizes_of(triangle(13))), 13);
}
