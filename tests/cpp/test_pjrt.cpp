// Tests of the PJRT wrapper against a real plugin: the one named by
// TORCHTPU_PJRT_PLUGIN, else the path compiled in as TORCHTPU_TEST_PLUGIN_PATH.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <future>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/split.h"
#include "ops/collective.h"
#include "pjrt/compile_options.h"
#include "pjrt/pjrt.h"

namespace torchtpu::pjrt {
namespace {

std::string plugin_path() {
  const char* env = std::getenv("TORCHTPU_PJRT_PLUGIN");
  if (env != nullptr && *env != '\0') return env;
#ifdef TORCHTPU_TEST_PLUGIN_PATH
  return TORCHTPU_TEST_PLUGIN_PATH;
#else
  return "";
#endif
}

const char* kAdd = R"(module @m {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    "func.return"(%0) : (tensor<2x3xf32>) -> ()
  }
}
)";

const char* kAddDonating = R"(module @m {
  func.func public @main(%arg0: tensor<2x3xf32> {tf.aliasing_output = 0 : i32}, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    "func.return"(%0) : (tensor<2x3xf32>) -> ()
  }
}
)";

const std::vector<float> kA = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
const std::vector<float> kB = {0.5f, -1.0f, 10.0f, 0.25f, -6.0f, 100.0f};
const std::vector<float> kSum = {1.5f, 1.0f, 13.0f, 4.25f, -1.0f, 106.0f};

class PjrtTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = plugin_path();
    if (path.empty()) {
      setup_error_ =
          "no PJRT plugin: set TORCHTPU_PJRT_PLUGIN to the path of a PJRT plugin .so "
          "(e.g. xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so) or build with "
          "TORCHTPU_TEST_PLUGIN_PATH defined";
      return;
    }
    try {
      plugin_ = &Plugin::load(path);
      client_ = Client::create(*plugin_, 1).release();
      client2_ = Client::create(*plugin_, 2).release();
    } catch (const Error& e) {
      setup_error_ = e.what();
    }
  }
  static void TearDownTestSuite() {
    delete client2_;
    delete client_;
    client_ = client2_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static BufferPtr upload(const Client& c, const std::vector<float>& v, int device = 0) {
    return c.buffer_from_host(v.data(), ElementType::kF32, {2, 3}, device);
  }
  static std::vector<float> download(const Buffer& b) {
    std::vector<float> out(static_cast<size_t>(b.byte_size() / sizeof(float)));
    b.to_host(out.data(), b.byte_size());
    return out;
  }

  static std::string setup_error_;
  static const Plugin* plugin_;
  static Client* client_;
  static Client* client2_;
};
std::string PjrtTest::setup_error_;
const Plugin* PjrtTest::plugin_ = nullptr;
Client* PjrtTest::client_ = nullptr;
Client* PjrtTest::client2_ = nullptr;

TEST_F(PjrtTest, PluginVersionAndCache) {
  EXPECT_EQ(plugin_->major_version(), 0);
  EXPECT_GT(plugin_->minor_version(), 0);
  EXPECT_EQ(&Plugin::load(plugin_path()), plugin_);
  EXPECT_FALSE(plugin_->attributes().empty());
}

TEST_F(PjrtTest, MissingPluginThrows) {
  try {
    Plugin::load("/nonexistent/libnothing_pjrt.so");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/libnothing_pjrt.so"), std::string::npos) << e.what();
  }
}

TEST_F(PjrtTest, DeviceCounts) {
  EXPECT_EQ(client_->num_devices(), 1);
  EXPECT_EQ(client2_->num_devices(), 2);
  EXPECT_FALSE(client_->platform_name().empty());
  EXPECT_THROW(client_->device(1), std::out_of_range);
}

TEST_F(PjrtTest, F32RoundTrip) {
  BufferPtr b = upload(*client_, kA);
  EXPECT_EQ(b->type(), ElementType::kF32);
  EXPECT_EQ(b->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->byte_size(), 24);
  b->await_ready();
  EXPECT_EQ(download(*b), kA);
}

TEST_F(PjrtTest, ToHostRejectsShortDestination) {
  BufferPtr b = upload(*client_, kA);
  float small[2];
  EXPECT_THROW(b->to_host(small, sizeof small), Error);
}

TEST_F(PjrtTest, Bf16Int64BoolScalarRoundTrip) {
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x3f00, 0x7f80};  // 1, -2, 0.5, inf
  BufferPtr b1 = client_->buffer_from_host(bf16.data(), ElementType::kBF16, {4}, 0);
  EXPECT_EQ(b1->type(), ElementType::kBF16);
  EXPECT_EQ(b1->byte_size(), 8);
  std::vector<uint16_t> bf16_out(4);
  b1->to_host(bf16_out.data(), 8);
  EXPECT_EQ(bf16_out, bf16);

  const std::vector<int64_t> i64 = {INT64_MIN, -1, 0, INT64_MAX, 1LL << 40, 7};
  BufferPtr b2 = client_->buffer_from_host(i64.data(), ElementType::kS64, {3, 2}, 0);
  EXPECT_EQ(b2->dims(), (std::vector<int64_t>{3, 2}));
  std::vector<int64_t> i64_out(6);
  b2->to_host(i64_out.data(), 48);
  EXPECT_EQ(i64_out, i64);

  const uint8_t pred[5] = {1, 0, 0, 1, 1};
  BufferPtr b3 = client_->buffer_from_host(pred, ElementType::kPred, {5}, 0);
  EXPECT_EQ(b3->type(), ElementType::kPred);
  uint8_t pred_out[5] = {};
  b3->to_host(pred_out, 5);
  EXPECT_EQ(std::memcmp(pred, pred_out, 5), 0);

  const float scalar = 3.25f;
  BufferPtr b4 = client_->buffer_from_host(&scalar, ElementType::kF32, {}, 0);
  EXPECT_TRUE(b4->dims().empty());
  float scalar_out = 0;
  b4->to_host(&scalar_out, 4);
  EXPECT_EQ(scalar_out, 3.25f);
}

TEST_F(PjrtTest, CompileAndExecute) {
  ExecutablePtr exe = client_->compile(kAdd, CompileOptions().encode());
  EXPECT_EQ(exe->num_outputs(), 1u);
  EXPECT_GE(exe->peak_memory_bytes(), 0);
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  ExecuteResult r = exe->execute({a.get(), b.get()}, 0);
  ASSERT_EQ(r.outputs.size(), 1u);
  r.done->wait();
  EXPECT_TRUE(r.done->is_ready());
  EXPECT_EQ(r.outputs[0]->dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(download(*r.outputs[0]), kSum);
  EXPECT_EQ(download(*a), kA);
}

TEST_F(PjrtTest, PortableExecutableRunsOnSecondDevice) {
  ExecutablePtr exe = client2_->compile(kAdd, CompileOptions().encode());
  BufferPtr a = upload(*client2_, kA, 1), b = upload(*client2_, kB, 1);
  ExecuteResult r = exe->execute({a.get(), b.get()}, 1);
  EXPECT_EQ(download(*r.outputs[0]), kSum);
}

TEST_F(PjrtTest, OnReadyCallbackFires) {
  ExecutablePtr exe = client_->compile(kAdd, CompileOptions().encode());
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  ExecuteResult r = exe->execute({a.get(), b.get()}, 0);
  std::promise<std::string> fired;
  r.done->on_ready([&fired](const std::string& err) { fired.set_value(err); });
  std::future<std::string> f = fired.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), "");
}

TEST_F(PjrtTest, CompileErrorThrows) {
  try {
    client_->compile("module @m { this is not mlir", CompileOptions().encode());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("PJRT_Client_Compile: ", 0), 0u) << msg;
    EXPECT_GT(msg.size(), std::strlen("PJRT_Client_Compile: ") + 10) << msg;
    EXPECT_NE(e.code(), 0);
  }
}

TEST_F(PjrtTest, SerializeDeserializeRoundTrip) {
  const std::string options = CompileOptions().encode();
  ExecutablePtr exe = client_->compile(kAdd, options);
  const std::string blob = exe->serialize();
  EXPECT_GT(blob.size(), 0u);
  ExecutablePtr loaded = client_->deserialize(blob, options);
  EXPECT_EQ(loaded->num_outputs(), 1u);
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  ExecuteResult r = loaded->execute({a.get(), b.get()}, 0);
  EXPECT_EQ(download(*r.outputs[0]), kSum);

  ExecutablePtr loaded_default = client_->deserialize(blob, "");
  ExecuteResult r2 = loaded_default->execute({a.get(), b.get()}, 0);
  EXPECT_EQ(download(*r2.outputs[0]), kSum);
}

TEST_F(PjrtTest, DonatedArgument) {
  ExecutablePtr exe = client_->compile(kAddDonating, CompileOptions().encode());
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  ExecuteResult r = exe->execute({a.get(), b.get()}, 0, {0});
  EXPECT_EQ(download(*r.outputs[0]), kSum);
  EXPECT_EQ(download(*b), kB);
  try {
    download(*a);
    FAIL() << "donated buffer still readable: donation was not honoured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("donated"), std::string::npos) << e.what();
  }
}

TEST_F(PjrtTest, AliasedArgumentNotDonatedIsKept) {
  ExecutablePtr exe = client_->compile(kAddDonating, CompileOptions().encode());
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  ExecuteResult r = exe->execute({a.get(), b.get()}, 0);
  EXPECT_EQ(download(*r.outputs[0]), kSum);
  EXPECT_EQ(download(*a), kA);
}

TEST_F(PjrtTest, EnvOptionOverrideAccepted) {
  CompileOptions o;
  OptionOverride fast_math{};
  fast_math.kind = OptionOverride::kBool;
  fast_math.b = false;
  o.env_overrides = {{"xla_cpu_enable_fast_math", fast_math}};
  ExecutablePtr exe = client_->compile(kAdd, o.encode());
  BufferPtr a = upload(*client_, kA), b = upload(*client_, kB);
  EXPECT_EQ(download(*exe->execute({a.get(), b.get()}, 0).outputs[0]), kSum);
}

TEST_F(PjrtTest, PluginReadsEnvOptionOverrides) {
  CompileOptions o;
  OptionOverride flag{};
  flag.kind = OptionOverride::kBool;
  o.env_overrides = {{"xla_no_such_flag", flag}};
  try {
    client_->compile(kAdd, o.encode());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("xla_no_such_flag"), std::string::npos) << e.what();
  }
}

TEST_F(PjrtTest, PluginReadsDeviceAssignment) {
  CompileOptions o;
  o.num_replicas = 2;
  o.portable = false;
  o.device_ids = {0, 1};
  EXPECT_EQ(client2_->compile(kAdd, o.encode())->num_outputs(), 1u);
  o.device_ids = {0, 7};
  try {
    client2_->compile(kAdd, o.encode());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
  }
}

// A program holding computation and a collective, printed by the IR printer,
// runs once on both devices: each replica doubles its input, then all of
// them are summed (Fused Eager's thread ranks).
TEST_F(PjrtTest, ReplicatedProgramWithCollectiveNode) {
  for (auto kind : {ops::Collective::kAllReduce, ops::Collective::kReduceScatter, ops::Collective::kAllGather}) {
    ir::Graph g;
    ir::Value x = g.parameter(ir::Type{ir::DType::kF32, {6}});
    ir::Value two = g.constant(ir::DType::kF32, 2.0, {6});
    ir::Value y = g.add("stablehlo.multiply", {x, two}, ir::Type{ir::DType::kF32, {6}});
    g.outputs = {ops::collective_node(g, kind, ops::Reduction::kSum, y, 2)};
    g.replicas = 2;
    const std::string text = ir::print_stablehlo(g);
    ASSERT_NE(text.find("mhlo.num_replicas = 2"), std::string::npos) << text;
    CompileOptions o;
    o.num_replicas = 2;
    o.portable = false;
    o.device_ids = {0, 1};
    ExecutablePtr exe = client2_->compile(text, o.encode());
    BufferPtr a = client2_->buffer_from_host(kA.data(), ElementType::kF32, {6}, 0);
    BufferPtr b = client2_->buffer_from_host(kB.data(), ElementType::kF32, {6}, 1);
    std::vector<ExecuteResult> out = exe->execute_replicated({{a.get()}, {b.get()}});
    ASSERT_EQ(out.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      out[r].done->wait();
      std::vector<float> got = download(*out[r].outputs.at(0));
      std::vector<float> want;
      for (size_t i = 0; i < kA.size(); ++i) {
        if (kind == ops::Collective::kAllGather) break;
        want.push_back(2 * kSum[i]);
      }
      if (kind == ops::Collective::kReduceScatter) want = std::vector<float>(want.begin() + 3 * r, want.begin() + 3 * r + 3);
      if (kind == ops::Collective::kAllGather) {
        for (float v : kA) want.push_back(2 * v);
        for (float v : kB) want.push_back(2 * v);
      }
      EXPECT_EQ(got, want) << ops::collective_name(kind) << " replica " << r;
    }
  }
}

// A program split around its collectives (ir/split.h) and run in stages,
// each collective alone, computes what the whole program computes as one
// replicated execution.
TEST_F(PjrtTest, SplitProgramRunsInStagesLikeTheWhole) {
  const ir::Type t6{ir::DType::kF32, {6}};
  ir::Graph g;
  ir::Value x = g.parameter(t6);
  ir::Value s = g.parameter(t6);
  ir::Value y = g.add("stablehlo.multiply", {x, g.constant(ir::DType::kF32, 2.0, {6})}, t6);
  ir::Value c1 = ops::collective_node(g, ops::Collective::kAllReduce, ops::Reduction::kSum, y, 2);
  ir::Value w = g.add("stablehlo.subtract", {x, s}, t6);  // needs no collective
  ir::Value z = g.add("stablehlo.multiply", {g.add("stablehlo.add", {c1, s}, t6), c1}, t6);
  ir::Value c2 = ops::collective_node(g, ops::Collective::kAllReduce, ops::Reduction::kMax, z, 2);
  g.outputs = {g.add("stablehlo.add", {c2, w}, t6), w, c1, x};
  ASSERT_EQ(g.collectives.size(), 2u);

  auto compile = [&](const std::string& text, int replicas) {
    CompileOptions o;
    o.num_replicas = replicas;
    o.portable = replicas == 1;
    if (replicas > 1) o.device_ids = {0, 1};
    return client2_->compile(text, o.encode());
  };
  const std::vector<std::vector<float>> xs = {kA, kB}, ss = {kB, kSum};
  std::vector<std::vector<BufferPtr>> inputs(2);
  for (int r = 0; r < 2; ++r) {
    inputs[r].push_back(client2_->buffer_from_host(xs[r].data(), ElementType::kF32, {6}, r));
    inputs[r].push_back(client2_->buffer_from_host(ss[r].data(), ElementType::kF32, {6}, r));
  }
  // The whole program, replicated.
  ir::Graph whole = g;
  whole.replicas = 2;
  std::vector<ExecuteResult> ref = compile(ir::print_stablehlo(whole), 2)->execute_replicated(
      {{inputs[0][0].get(), inputs[0][1].get()}, {inputs[1][0].get(), inputs[1][1].get()}});
  for (auto& r : ref) r.done->wait();

  const ir::Split split = ir::split(g, g.collectives);
  ASSERT_EQ(split.segments.size(), 3u);
  ASSERT_EQ(split.cuts.size(), 2u);
  EXPECT_EQ(split.cuts[0].after, 0);
  EXPECT_EQ(split.cuts[1].after, 1);
  for (const ir::Split::Segment& seg : split.segments)
    EXPECT_EQ(ir::print_stablehlo(seg.graph).find("all_reduce"), std::string::npos);
  // In stages: each segment on each device, each collective replicated alone.
  std::vector<std::vector<BufferPtr>> values(2, std::vector<BufferPtr>(split.values));
  for (int r = 0; r < 2; ++r) values[r][0] = inputs[r][0], values[r][1] = inputs[r][1];
  size_t cut = 0;
  for (size_t k = 0; k < split.segments.size(); ++k) {
    const ir::Split::Segment& seg = split.segments[k];
    if (!seg.outputs.empty()) {
      ExecutablePtr exe = compile(ir::print_stablehlo(seg.graph), 1);
      for (int r = 0; r < 2; ++r) {
        std::vector<Buffer*> args;
        for (int p : seg.params) args.push_back(values[r][p].get());
        ExecuteResult out = exe->execute(args, r);
        out.done->wait();
        for (size_t i = 0; i < seg.outputs.size(); ++i) values[r][seg.outputs[i]] = out.outputs.at(i);
      }
    }
    for (; cut < split.cuts.size() && split.cuts[cut].after == static_cast<int>(k); ++cut) {
      const ir::Split::Cut& c = split.cuts[cut];
      const auto red = cut == 0 ? ops::Reduction::kSum : ops::Reduction::kMax;
      ExecutablePtr exe =
          compile(ops::collective_module(ops::Collective::kAllReduce, red, ir::DType::kF32, 6, 2), 2);
      std::vector<ExecuteResult> out =
          exe->execute_replicated({{values[0][c.operand].get()}, {values[1][c.operand].get()}});
      for (int r = 0; r < 2; ++r) {
        out[r].done->wait();
        values[r][c.result] = out[r].outputs.at(0);
      }
    }
  }
  for (int r = 0; r < 2; ++r)
    for (size_t j = 0; j < g.outputs.size(); ++j)
      EXPECT_EQ(download(*values[r][split.outputs[j]]), download(*ref[r].outputs.at(j)))
          << "output " << j << " replica " << r;
}

}  // namespace
}  // namespace torchtpu::pjrt
