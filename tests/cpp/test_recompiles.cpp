// RecompileLog: the cause of a compilation, from the site's earlier graphs.
#include <gtest/gtest.h>

#include "eager/recompiles.h"

using torchtpu::eager::OpSite;
using torchtpu::eager::RecompileLog;
namespace ir = torchtpu::ir;

namespace {

// x -> reshape(x, view) -> slice [start, start + 2) of dim 0 (a structural graph of one op).
ir::Graph graph(int64_t numel, ir::Dims view, int64_t start = 0) {
  ir::Graph g;
  ir::Value p = g.parameter({ir::DType::kF32, {numel}});
  ir::Value r = g.add("stablehlo.reshape", {p}, {ir::DType::kF32, view});
  ir::Dims limit = view;
  limit[0] = start + 2;
  ir::Dims out = view;
  out[0] = 2;
  ir::Dims begin(view.size(), 0);
  begin[0] = start;
  g.outputs = {g.add("stablehlo.slice", {r}, {ir::DType::kF32, out},
                     {ir::Attr::array("start_indices", begin), ir::Attr::array("limit_indices", limit),
                      ir::Attr::array("strides", ir::Dims(view.size(), 1))})};
  return g;
}

const int kLine = 0;
const OpSite kSite{"aten::narrow", {&kLine, 10, 1}};
const OpSite kOther{"aten::narrow", {&kLine, 12, 1}};

}  // namespace

TEST(RecompileLog, FirstGraphOfASiteIsANewProgram) {
  RecompileLog log;
  EXPECT_EQ(log.record(graph(32, {4, 8}), kSite), RecompileLog::Cause::kNewProgram);
  ASSERT_TRUE(log.has_events());
  auto events = log.drain();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].site_count, 1);
  EXPECT_FALSE(log.has_events());
}

TEST(RecompileLog, SameOpsOtherSizesIsANewShapeNamingTheView) {
  RecompileLog log;
  log.record(graph(32, {4, 8}), kSite);
  EXPECT_EQ(log.record(graph(40, {5, 8}), kSite), RecompileLog::Cause::kNewShape);
  auto events = log.drain();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].detail, "input 0 shape [4, 8] -> [5, 8]");
  EXPECT_EQ(events[1].site_count, 2);
  EXPECT_EQ(events[1].shape_count, 1);
  // Another site starts its own history.
  EXPECT_EQ(log.record(graph(40, {5, 8}), kOther), RecompileLog::Cause::kNewProgram);
  EXPECT_EQ(log.counts().at("new_shape"), 1);
  EXPECT_EQ(log.counts().at("new_program"), 2);
}

TEST(RecompileLog, SameShapesOtherAttributes) {
  RecompileLog log;
  log.record(graph(32, {4, 8}, 0), kSite);
  EXPECT_EQ(log.record(graph(32, {4, 8}, 1), kSite), RecompileLog::Cause::kNewAttributes);
}

TEST(RecompileLog, OtherOpsAtTheSameSiteIsANewProgram) {
  RecompileLog log;
  log.record(graph(32, {4, 8}), kSite);
  ir::Graph g;
  ir::Value p = g.parameter({ir::DType::kF32, {32}});
  g.outputs = {g.add("stablehlo.negate", {p}, {ir::DType::kF32, {32}})};
  EXPECT_EQ(log.record(g, kSite), RecompileLog::Cause::kNewProgram);
  auto events = log.drain();
  EXPECT_NE(events.back().detail.find("other ops"), std::string::npos) << events.back().detail;
}

TEST(RecompileLog, OtherOpsNameAnInputsNewDtypeOrKind) {
  RecompileLog log;
  auto scaled = [](ir::DType t, bool number) {  // x * s, s a Python number (rank 0) or a tensor's storage
    ir::Graph g;
    ir::Value p = g.parameter({t, {8}});
    ir::Value s = g.parameter({t, number ? ir::Dims{} : ir::Dims{1}});
    const std::vector<int64_t> dims = number ? std::vector<int64_t>{} : std::vector<int64_t>{0};
    ir::Value b = g.add("stablehlo.broadcast_in_dim", {s}, {t, {8}}, {ir::Attr::array("broadcast_dimensions", dims)});
    g.outputs = {g.add("stablehlo.multiply", {p, b}, {t, {8}})};
    return g;
  };
  log.record(scaled(ir::DType::kF32, true), kSite);
  log.record(scaled(ir::DType::kBF16, true), kSite);
  log.record(scaled(ir::DType::kBF16, false), kSite);
  auto events = log.drain();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_NE(events[1].detail.find("input 0 dtype f32 -> bf16; input 1 dtype f32 -> bf16"), std::string::npos)
      << events[1].detail;
  EXPECT_NE(events[2].detail.find("input 1: a Python number became a tensor"), std::string::npos) << events[2].detail;
}

TEST(RecompileLog, ResetKeepsTheSitesGraphsAndBoundsEvents) {
  RecompileLog log;
  log.record(graph(32, {4, 8}), kSite);
  log.reset();
  EXPECT_EQ(log.counts().at("new_program"), 0);
  EXPECT_FALSE(log.has_events());
  EXPECT_EQ(log.record(graph(48, {6, 8}), kSite), RecompileLog::Cause::kNewShape);
  for (int i = 0; i < 1000; ++i) log.record(graph(8 * (i + 3), {i + 3, 8}), kSite);
  EXPECT_EQ(log.drain().size(), RecompileLog::kMaxEvents);
}
