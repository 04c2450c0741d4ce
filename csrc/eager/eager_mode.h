// The eager modes. Every op builds IR the same way in every mode; the mode
// decides only when the pending graph is materialized (DESIGN decision 1).
#pragma once

#include <string>

namespace torchtpu::eager {

enum class EagerMode {
  // Materialize after every op and wait for the device: an error surfaces at
  // the op that caused it.
  kDebug,
  // Materialize after every op without waiting; host and device overlap until
  // a sync point. The default.
  kStrict,
  // Defer ops into the device's pending graph; materialize it as one program
  // at sync points, loop boundaries and the size limit (fused_graph.h).
  kFused,
};

EagerMode parse_mode(const std::string& name);  // throws std::invalid_argument
const char* mode_name(EagerMode m);

}  // namespace torchtpu::eager
