// Element types of the IR, with their MLIR spelling and byte size.
#pragma once

#include <cstdint>

namespace torchtpu::ir {

enum class DType : uint8_t {
  kBool, kU8, kS8, kS16, kS32, kS64, kF16, kBF16, kF32, kF64, kU32, kU64, kC64, kC128,
  // 8-bit floats (storage, conversions and the few ops PyTorch defines on them)
  kF8E4M3FN, kF8E5M2, kF8E4M3FNUZ, kF8E5M2FNUZ,
};

const char* mlir_name(DType t);  // "f32", "i64", "ui8", "i1", ...
int64_t byte_size(DType t);
bool is_float(DType t);
bool is_signed_int(DType t);
bool is_unsigned_int(DType t);  // bool excluded
bool is_complex(DType t);
bool is_float8(DType t);
// The real type of a complex type's parts (f32 for c64); other types unchanged.
DType real_of(DType t);

}  // namespace torchtpu::ir
