// IR printer and graph-key units, plus golden programs the plugin itself
// parses and runs (the printed StableHLO must be accepted by XLA).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "ir/graph_key.h"
#include "ir/printer.h"
#include "ops/builder.h"
#include "ops/views.h"
#include "pjrt/compile_options.h"
#include "pjrt/pjrt.h"

using namespace torchtpu;
using ir::DType;
using ir::Graph;
using ir::Type;
using ir::Value;

namespace {

Graph add_graph(ir::Dims dims) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, dims});
  auto y = g.parameter(Type{DType::kF32, {}});
  g.outputs = {b.add(x, y)};
  return g;
}

std::string plugin_path() {
  if (const char* p = std::getenv("TORCHTPU_PJRT_PLUGIN")) return p;
#ifdef TORCHTPU_TEST_PLUGIN_PATH
  return TORCHTPU_TEST_PLUGIN_PATH;
#else
  return "";
#endif
}

}  // namespace

TEST(Printer, BroadcastAdd) {
  Graph g = add_graph({2, 3});
  EXPECT_EQ(ir::print_stablehlo(g),
            "module @torchtpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
            "  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<f32>) -> (tensor<2x3xf32>) {\n"
            "    %2 = \"stablehlo.broadcast_in_dim\"(%arg1) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> "
            "tensor<2x3xf32>\n"
            "    %3 = \"stablehlo.add\"(%arg0, %2) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>\n"
            "    \"func.return\"(%3) : (tensor<2x3xf32>) -> ()\n"
            "  }\n"
            "}\n");
}

TEST(Printer, ConstantsAreExactHexBitPatterns) {
  Graph g;
  g.outputs = {g.constant(DType::kF32, -INFINITY), g.constant(DType::kBF16, 1.0), g.constant(DType::kS64, -3),
               g.constant(DType::kBool, 1)};
  std::string text = ir::print_stablehlo(g);
  EXPECT_NE(text.find("dense<0xFF800000> : tensor<f32>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<0x3F80> : tensor<bf16>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<-3> : tensor<i64>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<true> : tensor<i1>"), std::string::npos) << text;
}

TEST(Printer, ReduceHasRegion) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, {2, 3}});
  g.outputs = {b.reduce_sum(x, {1})};
  std::string text = ir::print_stablehlo(g);
  EXPECT_NE(text.find("\"stablehlo.reduce\"(%arg0, %1) ({"), std::string::npos) << text;
  EXPECT_NE(text.find("^bb0(%b2_0: tensor<f32>, %b2_1: tensor<f32>):"), std::string::npos) << text;
  EXPECT_NE(text.find("{dimensions = array<i64: 1>} : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>"),
            std::string::npos)
      << text;
}

TEST(Printer, SortComparatorOrdersNaNAndCarriesOperands) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, {2, 3}});
  auto idx = b.iota(DType::kS64, {2, 3}, 1);
  g.outputs = b.sort({x, idx}, 1, /*descending=*/false, /*stable=*/true);
  std::string text = ir::print_stablehlo(g);
  EXPECT_NE(text.find("%2:2 = \"stablehlo.sort\"(%arg0, %1) ({"), std::string::npos) << text;
  EXPECT_NE(text.find("^bb0(%b2_0: tensor<f32>, %b2_1: tensor<f32>, %b2_2: tensor<i64>, %b2_3: tensor<i64>):"),
            std::string::npos)
      << text;
  // Ascending: l < r, or r is NaN and l is not.
  EXPECT_NE(text.find("\"stablehlo.compare\"(%b2_0, %b2_1) {comparison_direction = #stablehlo<comparison_direction "
                      "LT>, compare_type = #stablehlo<comparison_type FLOAT>}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"stablehlo.compare\"(%b2_1, %b2_1) {comparison_direction = #stablehlo<comparison_direction NE>"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("{dimension = 1 : i64, is_stable = true} : (tensor<2x3xf32>, tensor<2x3xi64>) -> "
                      "(tensor<2x3xf32>, tensor<2x3xi64>)"),
            std::string::npos)
      << text;
}

// A while loop: regions print as blocks with their own value names, and the
// body's contents are part of the graph key.
Graph counting_loop(double step) {
  Graph g;
  ops::Builder b(g);
  auto n = g.parameter(Type{DType::kS64, {}});
  auto zero = b.constant(DType::kS64, 0);
  g.outputs = b.while_loop(
      {zero, n},
      [](ops::Builder& rb, const std::vector<Value>& a) { return rb.compare(a[0], a[1], ops::Cmp::kLT); },
      [step](ops::Builder& rb, const std::vector<Value>& a) {
        return std::vector<Value>{rb.add(a[0], rb.constant(DType::kS64, step)), a[1]};
      });
  return g;
}

TEST(Printer, WhileLoopRegions) {
  std::string text = ir::print_stablehlo(counting_loop(1));
  EXPECT_NE(text.find("%2:2 = \"stablehlo.while\"(%1, %arg0) ({"), std::string::npos) << text;
  EXPECT_NE(text.find("^bb0(%w2r0_a0: tensor<i64>, %w2r0_a1: tensor<i64>):"), std::string::npos) << text;
  EXPECT_NE(text.find("\"stablehlo.return\"(%w2r0_2) : (tensor<i1>) -> ()"), std::string::npos) << text;
  EXPECT_NE(text.find("%w2r1_3 = \"stablehlo.add\"(%w2r1_a0, %w2r1_2)"), std::string::npos) << text;
  EXPECT_NE(text.find("\"stablehlo.return\"(%w2r1_3, %w2r1_a1) : (tensor<i64>, tensor<i64>) -> ()"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(": (tensor<i64>, tensor<i64>) -> (tensor<i64>, tensor<i64>)"), std::string::npos) << text;
}

TEST(GraphKey, WhileBodyMatters) {
  EXPECT_EQ(ir::graph_key(counting_loop(1), {}), ir::graph_key(counting_loop(1), {}));
  EXPECT_FALSE(ir::graph_key(counting_loop(1), {}) == ir::graph_key(counting_loop(2), {}));
}

TEST(Builder, WhileBodyMustKeepTypes) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, {2}});
  EXPECT_THROW(b.while_loop(
                   {x}, [](ops::Builder& rb, const std::vector<Value>&) { return rb.constant(DType::kBool, 0); },
                   [](ops::Builder& rb, const std::vector<Value>&) {
                     return std::vector<Value>{rb.constant(DType::kF32, 0, {3})};
                   }),
               ops::LoweringError);
}

TEST(GraphKey, StructuralAndStable) {
  ir::GraphKey salt{1, 2};
  EXPECT_EQ(ir::graph_key(add_graph({2, 3}), salt), ir::graph_key(add_graph({2, 3}), salt));
  EXPECT_FALSE(ir::graph_key(add_graph({2, 3}), salt) == ir::graph_key(add_graph({3, 2}), salt));
  EXPECT_FALSE(ir::graph_key(add_graph({2, 3}), salt) == ir::graph_key(add_graph({2, 3}), ir::GraphKey{1, 3}));
}

TEST(GraphKey, OptimizationLevelMatters) {
  Graph light = add_graph({2, 3});
  light.opt_level = Graph::kLightOptLevel;
  EXPECT_FALSE(ir::graph_key(light, {}) == ir::graph_key(add_graph({2, 3}), {}));
}

TEST(GraphKey, AttributesAndOpsMatter) {
  auto make = [](std::vector<int64_t> perm, const char* op) {
    Graph g;
    ops::Builder b(g);
    auto x = g.parameter(Type{DType::kF32, {2, 2, 2}});
    g.outputs = {b.unary(op, b.transpose(x, perm))};
    return ir::graph_key(g, {});
  };
  EXPECT_EQ(make({1, 0, 2}, "stablehlo.exponential"), make({1, 0, 2}, "stablehlo.exponential"));
  EXPECT_FALSE(make({1, 0, 2}, "stablehlo.exponential") == make({0, 2, 1}, "stablehlo.exponential"));
  EXPECT_FALSE(make({1, 0, 2}, "stablehlo.exponential") == make({1, 0, 2}, "stablehlo.log"));
}

TEST(GraphKey, SortDirectionMatters) {
  auto make = [](bool descending) {
    Graph g;
    ops::Builder b(g);
    auto x = g.parameter(Type{DType::kF32, {4}});
    g.outputs = {b.sort({x}, 0, descending, true)[0]};
    return ir::graph_key(g, {});
  };
  EXPECT_EQ(make(true), make(true));
  EXPECT_FALSE(make(true) == make(false));
}

TEST(GraphKey, DonationAndOutputsMatter) {
  Graph a = add_graph({4});
  Graph b = add_graph({4});
  b.donations = {{0, 0}};
  EXPECT_FALSE(ir::graph_key(a, {}) == ir::graph_key(b, {}));
  Graph c = add_graph({4});
  c.outputs.push_back(c.outputs[0]);
  EXPECT_FALSE(ir::graph_key(a, {}) == ir::graph_key(c, {}));
}

TEST(Graph, AssignPrefixIsTheGraphAsItWasThen) {
  // Built in two stages, the second adding a parameter: the prefix of the
  // whole graph at the first stage's node count is the first stage.
  Graph first;
  ops::Builder b1(first);
  Value x = first.parameter(Type{DType::kF32, {3}});
  Value y = b1.unary("stablehlo.exponential", x);
  Graph whole = first;
  ops::Builder b2(whole);
  Value z = whole.parameter(Type{DType::kF32, {3}});
  whole.outputs = {b2.binary("stablehlo.add", y, z)};
  whole.donations = {{1, 0}};
  Graph prefix;
  prefix.assign_prefix(whole, first.nodes().size());
  EXPECT_EQ(prefix.num_parameters(), 1);
  EXPECT_TRUE(prefix.outputs.empty() && prefix.donations.empty());
  prefix.outputs = {y};
  first.outputs = {y};
  EXPECT_EQ(ir::graph_key(prefix, {}), ir::graph_key(first, {}));
  // Appending again after the prefix gives the whole graph back.
  ops::Builder b3(prefix);
  Value z2 = prefix.parameter(Type{DType::kF32, {3}});
  prefix.outputs = {b3.binary("stablehlo.add", y, z2)};
  prefix.donations = {{1, 0}};
  EXPECT_EQ(ir::graph_key(prefix, {}), ir::graph_key(whole, {}));
}

// Golden programs: printed by us, parsed and run by the plugin.
class Golden : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_FALSE(plugin_path().empty()) << "set TORCHTPU_PJRT_PLUGIN";
    client_ = pjrt::Client::create(pjrt::Plugin::load(plugin_path()), 1).release();
  }
  std::vector<float> run(const Graph& g, const std::vector<std::vector<float>>& args) {
    auto exe = client_->compile(ir::print_stablehlo(g), pjrt::CompileOptions{}.encode());
    std::vector<pjrt::BufferPtr> bufs;
    std::vector<pjrt::Buffer*> raw;
    for (int i = 0; i < g.num_parameters(); ++i) {
      bufs.push_back(client_->buffer_from_host(args[i].data(), pjrt::ElementType::kF32, g.parameter_type(i).dims, 0));
      raw.push_back(bufs.back().get());
    }
    auto r = exe->execute(raw, 0);
    std::vector<float> out(g.type(g.outputs[0]).numel());
    r.outputs[0]->to_host(out.data(), static_cast<int64_t>(out.size() * 4));
    return out;
  }
  static pjrt::Client* client_;
};
pjrt::Client* Golden::client_ = nullptr;

TEST_F(Golden, ReduceMaxAndDot) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, {2, 3}});
  auto y = g.parameter(Type{DType::kF32, {3, 2}});
  auto prod = b.dot_general(x, y, {}, {}, {1}, {0}, DType::kF32);  // [[4, 5], [10, 14]]... see below
  g.outputs = {b.reduce_max(prod, {1})};
  // x = [[1,2,3],[4,5,6]], y = [[1,0],[0,1],[1,1]] -> x@y = [[4,5],[10,11]]
  EXPECT_EQ(run(g, {{1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, 1}}), (std::vector<float>{5, 11}));
}

TEST_F(Golden, TransposedViewReadAndScatterWrite) {
  // A 2x3 base read through its transpose (strides [1, 3]) and written back.
  Graph g;
  ops::Builder b(g);
  auto flat = g.parameter(Type{DType::kF32, {6}});
  ops::ViewMeta t{{3, 2}, {1, 3}, 0};
  auto v = ops::read_view(b, flat, t);
  g.outputs = {ops::write_view(b, flat, t, b.mul(v, b.full_like(v, 10)))};
  EXPECT_EQ(run(g, {{0, 1, 2, 3, 4, 5}}), (std::vector<float>{0, 10, 20, 30, 40, 50}));
}

TEST_F(Golden, OverlappingViewGathers) {
  // unfold-like view: sizes [3, 2], strides [1, 1] over [0..3].
  Graph g;
  ops::Builder b(g);
  auto flat = g.parameter(Type{DType::kF32, {4}});
  g.outputs = {ops::read_view(b, flat, ops::ViewMeta{{3, 2}, {1, 1}, 0})};
  EXPECT_EQ(run(g, {{7, 8, 9, 10}}), (std::vector<float>{7, 8, 8, 9, 9, 10}));
}

TEST_F(Golden, SortPutsNaNLastAscendingAndFirstDescending) {
  auto sorted = [&](bool descending) {
    Graph g;
    ops::Builder b(g);
    auto x = g.parameter(Type{DType::kF32, {5}});
    g.outputs = {b.sort({x, b.iota(DType::kF32, {5}, 0)}, 0, descending, true)[1]};
    return run(g, {{2, NAN, -0.0f, 0, -INFINITY}});
  };
  // Indices: -0.0 and 0.0 are equal and keep their order.
  EXPECT_EQ(sorted(false), (std::vector<float>{4, 2, 3, 0, 1}));
  EXPECT_EQ(sorted(true), (std::vector<float>{1, 0, 2, 3, 4}));
}

TEST_F(Golden, ErfParses) {
  Graph g;
  ops::Builder b(g);
  auto x = g.parameter(Type{DType::kF32, {1}});
  g.outputs = {g.add("chlo.erf", {x}, b.type(x))};
  EXPECT_NEAR(run(g, {{0.5f}})[0], 0.5204999f, 1e-6);
}

TEST(Printer, Int64IdentitiesSaturate) {
  Graph g;
  g.outputs = {g.constant(DType::kS64, ops::Builder::highest(DType::kS64)),
               g.constant(DType::kS64, ops::Builder::lowest(DType::kS64)),
               g.constant(DType::kU64, ops::Builder::highest(DType::kU64))};
  std::string text = ir::print_stablehlo(g);
  EXPECT_NE(text.find("dense<9223372036854775807> : tensor<i64>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<-9223372036854775808> : tensor<i64>"), std::string::npos) << text;
  EXPECT_NE(text.find("dense<18446744073709551615> : tensor<ui64>"), std::string::npos) << text;
}
