#include "ir/dtype.h"

namespace torchtpu::ir {

const char* mlir_name(DType t) {
  switch (t) {
    case DType::kBool: return "i1";
    case DType::kU8: return "ui8";
    case DType::kS8: return "i8";
    case DType::kS16: return "i16";
    case DType::kS32: return "i32";
    case DType::kS64: return "i64";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kU32: return "ui32";
    case DType::kU64: return "ui64";
    case DType::kC64: return "complex<f32>";
    case DType::kC128: return "complex<f64>";
    case DType::kF8E4M3FN: return "f8E4M3FN";
    case DType::kF8E5M2: return "f8E5M2";
    case DType::kF8E4M3FNUZ: return "f8E4M3FNUZ";
    case DType::kF8E5M2FNUZ: return "f8E5M2FNUZ";
  }
  return "?";
}

int64_t byte_size(DType t) {
  switch (t) {
    case DType::kBool: case DType::kU8: case DType::kS8: return 1;
    case DType::kF8E4M3FN: case DType::kF8E5M2: case DType::kF8E4M3FNUZ: case DType::kF8E5M2FNUZ: return 1;
    case DType::kS16: case DType::kF16: case DType::kBF16: return 2;
    case DType::kS32: case DType::kF32: case DType::kU32: return 4;
    case DType::kS64: case DType::kF64: case DType::kU64: case DType::kC64: return 8;
    case DType::kC128: return 16;
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF32 || t == DType::kF64 || is_float8(t);
}
bool is_float8(DType t) {
  return t == DType::kF8E4M3FN || t == DType::kF8E5M2 || t == DType::kF8E4M3FNUZ || t == DType::kF8E5M2FNUZ;
}
bool is_signed_int(DType t) {
  return t == DType::kS8 || t == DType::kS16 || t == DType::kS32 || t == DType::kS64;
}
bool is_complex(DType t) { return t == DType::kC64 || t == DType::kC128; }
DType real_of(DType t) { return t == DType::kC64 ? DType::kF32 : t == DType::kC128 ? DType::kF64 : t; }
bool is_unsigned_int(DType t) {
  return t == DType::kU8 || t == DType::kU32 || t == DType::kU64;
}

}  // namespace torchtpu::ir
