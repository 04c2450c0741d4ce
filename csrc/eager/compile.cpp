// Graph -> executable: the graph key, the compile cache tiers, and the
// compiler call on a miss.
#include <stdexcept>

#include "eager/runtime.h"
#include "ir/printer.h"
#include "pjrt/compile_options.h"

namespace torchtpu::eager {

pjrt::ExecutablePtr Runtime::executable_for(const ir::Graph& g, bool* hit) {
  ir::GraphKey key = ir::graph_key(g, salt_);
  return cache_.get_or_compile(
      key,
      [&] {
        std::string text = ir::print_stablehlo(g);
        pjrt::CompileOptions opts;
        ++compilations_;
        try {
          return client_->compile(text, opts.encode());
        } catch (const pjrt::Error& e) {
          throw std::runtime_error(std::string(e.what()) + "\nStableHLO:\n" + text);
        }
      },
      hit);
}

void Runtime::configure_cache(const std::string& local_dir, const std::string& shared_dir, int64_t max_bytes) {}

}  // namespace torchtpu::eager
