// Settings of the CPU fallback (fallback.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace torchtpu::aten {
void set_fallback_error(bool error);
bool fallback_error();
// The boxed CPU fallback, for kernels that hand a case they do not lower
// (through at::native::call_fallback_fn); counted and warned as any other.
void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
}  // namespace torchtpu::aten
