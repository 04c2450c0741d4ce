// Graph -> executable: the graph key, the compile cache tiers, and the
// compiler call on a miss.
#include <sys/resource.h>
#include <unistd.h>

#include <stdexcept>

#include "cache/disk_entry.h"
#include "eager/recompiles.h"
#include "eager/trace.h"
#include "eager/runtime.h"
#include "ir/printer.h"
#include "pjrt/compile_options.h"

namespace torchtpu::eager {

namespace {

// The options every graph compiles with, and reloads a serialized one with.
// They are part of the disk tiers' fingerprint; options that vary per graph
// would have to join the graph key (and reach the deserialize call).
// XLA's fast min/max drops a NaN operand; PyTorch propagates NaN from either
// side (maximum, clamp, amax, max pooling), so it is off on every platform.
// Excess precision lets XLA skip a rounding the graph asks for (a float32
// value converted to float64, a bfloat16 intermediate kept in float32): a
// lowering that rounds where PyTorch's kernel rounds must get that rounding,
// and a Fused program must round as the same ops do one at a time.
pjrt::CompileOptions base_options() {
  pjrt::CompileOptions o;
  for (const char* flag : {"xla_cpu_enable_fast_min_max", "xla_gpu_enable_fast_min_max", "xla_allow_excess_precision"}) {
    pjrt::OptionOverride off;
    off.kind = pjrt::OptionOverride::kBool;
    off.b = false;
    o.env_overrides.emplace_back(flag, off);
  }
  return o;
}

const std::string& compile_options() {
  static const std::string bytes = base_options().encode();
  return bytes;
}

// The options of a graph compiled at a lower backend optimization level.
const std::string& compile_options(int opt_level) {
  if (opt_level == 0) return compile_options();
  if (opt_level != ir::Graph::kLightOptLevel) throw std::logic_error("no compile options for this optimization level");
  static const std::string light = [] {
    pjrt::CompileOptions o = base_options();
    pjrt::OptionOverride level;
    level.kind = pjrt::OptionOverride::kInt;
    level.i = ir::Graph::kLightOptLevel;
    o.env_overrides.emplace_back("xla_backend_optimization_level", level);
    return o.encode();
  }();
  return light;
}

}  // namespace

pjrt::ExecutablePtr Runtime::executable_for(const ir::Graph& g, bool* hit, const OpSite* site, bool helper,
                                            int64_t bucket, bool counted) {
  Trace::Span lookup("graph key and cache lookup", "cache");
  ir::GraphKey key = ir::graph_key(g, salt_);
  return cache_.get_or_compile(
      key,
      [&] {
        Trace::Span span("compile", "compile");
        span.detail(std::to_string(g.nodes().size()) + " nodes, first op " + (site ? site->op : "?"));
        std::string text = ir::print_stablehlo(g);
        if (!counted) {
          ++compilations_;
          recompile_log().record(g, site ? *site : OpSite{}, helper, bucket);
        }
        try {
          return client_->compile(text, compile_options(g.opt_level));
        } catch (const pjrt::Error& e) {
          throw std::runtime_error(std::string(e.what()) + "\nStableHLO:\n" + text);
        }
      },
      hit);
}

void Runtime::compile_in_background(std::shared_ptr<const ir::Graph> g, const OpSite* site, int64_t bucket,
                                    std::function<void(std::exception_ptr)> done) {
  ++compilations_;
  OpSite at = site ? *site : OpSite{};
  recompile_log().record(*g, at, false, bucket);
  background_pool_->submit([this, g, at, bucket, done] {
    // Below the threads that run and issue programs: it uses the time they leave.
    static thread_local const bool lowered = setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10) == 0;
    (void)lowered;
    if (closing_) {
      done(std::make_exception_ptr(std::runtime_error("torchtpu shut down before the compilation started")));
      return;
    }
    try {
      bool hit = false;
      executable_for(*g, &hit, &at, false, bucket, /*counted=*/true);
    } catch (...) {
      done(std::current_exception());
      return;
    }
    done(nullptr);
  });
}

pjrt::ExecutablePtr Runtime::compile_text(const std::string& text) {
  ++compilations_;
  return client_->compile(text, compile_options());
}

pjrt::ExecutablePtr Runtime::compile_replicated(const std::string& text, const std::vector<int64_t>& device_ids) {
  pjrt::CompileOptions o = base_options();
  o.num_replicas = static_cast<int64_t>(device_ids.size());
  o.portable = false;
  o.device_ids = device_ids;
  ++compilations_;
  return client_->compile(text, o.encode());
}

std::string Runtime::configure_cache(const std::string& local_dir, const std::string& shared_dir, int64_t max_bytes,
                                     const std::string& identity, const std::string& shared_key) {
  std::string id = "entry format " + std::to_string(cache::kEntryFormatVersion) + "\nplatform " +
                   client_->platform_name() + " " + client_->platform_version() + "\n" + identity;
  ir::Hasher h;
  h.str(id.c_str());
  h.bytes(compile_options().data(), compile_options().size());
  cache::DiskConfig config;
  config.local_dir = local_dir;
  config.shared_dir = shared_dir;
  config.max_bytes = max_bytes;
  config.fingerprint = h.key().hex();
  config.identity = id;
  config.shared_key = shared_key;
  const pjrt::Client* client = client_.get();
  cache_.configure_disk(config, [client](const std::string& blob) {
    return client->deserialize(blob, compile_options());
  });
  return config.fingerprint;
}

}  // namespace torchtpu::eager
