// Settings of the CPU fallback (fallback.cpp).
#pragma once

namespace torchtpu::aten {
void set_fallback_error(bool error);
bool fallback_error();
}  // namespace torchtpu::aten
