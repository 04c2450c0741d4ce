#include "ir/printer.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <vector>
#include <sstream>

namespace torchtpu::ir {

const char* const kFunctionsAttr = "torchtpu.functions";

namespace {

uint16_t f32_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint16_t f32_to_f16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (((x >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

std::string literal(DType t, double v) {
  char buf[64];
  if (is_complex(t)) return "(" + literal(real_of(t), v) + ", " + literal(real_of(t), 0) + ")";
  switch (t) {
    case DType::kBool: return v != 0 ? "true" : "false";
    case DType::kF64: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      std::snprintf(buf, sizeof buf, "0x%016llX", static_cast<unsigned long long>(u));
      return buf;
    }
    case DType::kF32: {
      float f = static_cast<float>(v);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      std::snprintf(buf, sizeof buf, "0x%08X", u);
      return buf;
    }
    case DType::kBF16:
      std::snprintf(buf, sizeof buf, "0x%04X", f32_to_bf16_bits(static_cast<float>(v)));
      return buf;
    case DType::kF16:
      std::snprintf(buf, sizeof buf, "0x%04X", f32_to_f16_bits(static_cast<float>(v)));
      return buf;
    case DType::kU64:
      // Doubles at the type's ends saturate (reduction identities).
      if (v >= 18446744073709551615.0) return "18446744073709551615";
      std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(v < 0 ? 0 : v));
      return buf;
    default:
      if (v >= 9223372036854775807.0) return "9223372036854775807";
      if (v <= -9223372036854775808.0) return "-9223372036854775808";
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return buf;
  }
}

class Printer {
 public:
  // `prefix` names the values of a region ("" at the top level), so that a
  // region's names never collide with those of the graphs around it.
  Printer(const Graph& g, std::ostringstream& os, std::string prefix = "", std::vector<std::string>* functions = nullptr)
      : g_(g), os_(os), p_(std::move(prefix)), functions_(functions ? functions : &own_functions_) {}

  std::string run() {
    os_ << "module @torchtpu attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = " << g_.replicas
        << " : i32} {\n";
    os_ << "  func.func public @main(";
    for (int i = 0; i < g_.num_parameters(); ++i) {
      if (i) os_ << ", ";
      os_ << "%arg" << i << ": " << tensor_type(g_.parameter_type(i));
      for (auto [p, o] : g_.donations)
        if (p == i) os_ << " {tf.aliasing_output = " << o << " : i32}";
    }
    os_ << ") -> (";
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      if (i) os_ << ", ";
      os_ << tensor_type(g_.type(g_.outputs[i]));
    }
    os_ << ") {\n";
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) print_node(static_cast<int>(i), nodes[i]);
    os_ << "    \"func.return\"(";
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      if (i) os_ << ", ";
      os_ << name(g_.outputs[i]);
    }
    os_ << ") : (";
    for (size_t i = 0; i < g_.outputs.size(); ++i) {
      if (i) os_ << ", ";
      os_ << tensor_type(g_.type(g_.outputs[i]));
    }
    os_ << ") -> ()\n  }\n";
    // The functions that inlined kernels call (see kFunctionsAttr), once each.
    for (const std::string& f : *functions_) os_ << "  " << f << "\n";
    os_ << "}\n";
    return os_.str();
  }

  // A region: its parameters are the block arguments, its outputs returned.
  void print_region() {
    os_ << "{\n    ^bb0(";
    for (int i = 0; i < g_.num_parameters(); ++i)
      os_ << (i ? ", " : "") << "%" << p_ << "a" << i << ": " << tensor_type(g_.parameter_type(i));
    os_ << "):\n";
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) print_node(static_cast<int>(i), nodes[i]);
    os_ << "    \"stablehlo.return\"(";
    for (size_t i = 0; i < g_.outputs.size(); ++i) os_ << (i ? ", " : "") << name(g_.outputs[i]);
    os_ << ") : (";
    for (size_t i = 0; i < g_.outputs.size(); ++i) os_ << (i ? ", " : "") << tensor_type(g_.type(g_.outputs[i]));
    os_ << ") -> ()\n    }";
  }

 private:
  std::string name(Value v) const {
    const Node& n = g_.nodes()[v.node];
    if (n.op == kParameter)
      return (p_.empty() ? "%arg" : "%" + p_ + "a") + std::to_string(n.param_index);
    std::string s = "%" + p_ + std::to_string(v.node);
    if (n.results.size() > 1) s += "#" + std::to_string(v.index);
    return s;
  }

  // A sort comparator: block arguments (lhs_i, rhs_i) per operand; only the
  // first operand's pair is compared.
  void print_sort_body(int id, const Node& n) {
    const std::string p = "%b" + p_ + std::to_string(id) + "_";
    os_ << " ({\n    ^bb0(";
    for (size_t i = 0; i < 2 * n.operands.size(); ++i) {
      if (i) os_ << ", ";
      os_ << p << i << ": tensor<" << mlir_name(g_.type(n.operands[i / 2]).dtype) << ">";
    }
    os_ << "):\n";
    const DType dt = g_.type(n.operands[0]).dtype;
    const std::string t = std::string("tensor<") + mlir_name(dt) + ">";
    const char* ctype = is_float(dt) ? "FLOAT" : is_signed_int(dt) ? "SIGNED" : "UNSIGNED";
    const bool asc = n.body == Body::kSortAsc;
    int tmp = 0;
    auto cmp = [&](const std::string& a, const std::string& b, const char* dir) {
      std::string r = "%c" + p_ + std::to_string(id) + "_" + std::to_string(tmp++);
      os_ << "      " << r << " = \"stablehlo.compare\"(" << a << ", " << b
          << ") {comparison_direction = #stablehlo<comparison_direction " << dir
          << ">, compare_type = #stablehlo<comparison_type " << ctype << ">} : (" << t << ", " << t
          << ") -> tensor<i1>\n";
      return r;
    };
    auto logic = [&](const char* op, const std::string& a, const std::string& b) {
      std::string r = "%c" + p_ + std::to_string(id) + "_" + std::to_string(tmp++);
      os_ << "      " << r << " = \"" << op << "\"(" << a << ", " << b
          << ") : (tensor<i1>, tensor<i1>) -> tensor<i1>\n";
      return r;
    };
    const std::string l = p + "0", r = p + "1";
    std::string res = cmp(l, r, asc ? "LT" : "GT");
    if (is_float(dt)) {
      // Ascending: l < r, or r is NaN and l is not; descending: l > r, or l
      // is NaN and r is not.
      const std::string& nan_side = asc ? r : l;
      const std::string& num_side = asc ? l : r;
      std::string nan_ok = logic("stablehlo.and", cmp(nan_side, nan_side, "NE"), cmp(num_side, num_side, "EQ"));
      res = logic("stablehlo.or", res, nan_ok);
    }
    os_ << "      \"stablehlo.return\"(" << res << ") : (tensor<i1>) -> ()\n    })";
  }

  void print_body(int id, const Node& n) {
    if (n.body == Body::kSortAsc || n.body == Body::kSortDesc) return print_sort_body(id, n);
    // One scalar block argument pair per reduced operand.
    // (a scatter: one; a collective reduction: each operand; a reduce: inputs then inits).
    const std::string op_name = n.op;
    size_t k = op_name == "stablehlo.scatter"                                              ? 1
               : op_name == "stablehlo.all_reduce" || op_name == "stablehlo.reduce_scatter" ? n.operands.size()
                                                                                          : n.operands.size() / 2;
    os_ << " ({\n    ^bb0(";
    std::vector<std::string> lhs, rhs;
    for (size_t i = 0; i < 2 * k; ++i) {
      DType dt = g_.type(n.operands[i % k]).dtype;
      std::string arg = "%b" + p_ + std::to_string(id) + "_" + std::to_string(i);
      (i < k ? lhs : rhs).push_back(arg);
      if (i) os_ << ", ";
      os_ << arg << ": tensor<" << mlir_name(dt) << ">";
    }
    os_ << "):\n";
    const char* op = nullptr;
    switch (n.body) {
      case Body::kAdd: op = "stablehlo.add"; break;
      case Body::kMul: op = "stablehlo.multiply"; break;
      case Body::kMax: op = "stablehlo.maximum"; break;
      case Body::kMin: op = "stablehlo.minimum"; break;
      case Body::kAnd: op = "stablehlo.and"; break;
      case Body::kOr: op = "stablehlo.or"; break;
      case Body::kXor: op = "stablehlo.xor"; break;
      case Body::kReplace: case Body::kNone: case Body::kSortAsc: case Body::kSortDesc: break;
    }
    std::vector<std::string> results;
    std::string rtypes;
    for (size_t i = 0; i < k; ++i) {
      std::string t = std::string("tensor<") + mlir_name(g_.type(n.operands[i]).dtype) + ">";
      if (op) {
        std::string r = "%r" + p_ + std::to_string(id) + "_" + std::to_string(i);
        os_ << "      " << r << " = \"" << op << "\"(" << lhs[i] << ", " << rhs[i] << ") : (" << t
            << ", " << t << ") -> " << t << "\n";
        results.push_back(r);
      } else {
        results.push_back(rhs[i]);
      }
      rtypes += (i ? ", " : "") + t;
    }
    os_ << "      \"stablehlo.return\"(";
    for (size_t i = 0; i < k; ++i) os_ << (i ? ", " : "") << results[i];
    os_ << ") : (" << rtypes << ") -> ()\n    })";
  }

  void print_attr(const Attr& a) {
    os_ << a.name << " = ";
    switch (a.kind) {
      case Attr::kI64: os_ << a.ints[0] << " : i64"; break;
      case Attr::kI64Array:
        os_ << "array<i64";
        for (size_t i = 0; i < a.ints.size(); ++i) os_ << (i ? ", " : ": ") << a.ints[i];
        os_ << ">";
        break;
      case Attr::kRaw: os_ << a.raw; break;
    }
  }

  void print_node(int id, const Node& n) {
    if (n.op == kParameter) return;
    os_ << "    %" << p_ << id;
    if (n.results.size() > 1) os_ << ":" << n.results.size();
    os_ << " = \"" << n.op << "\"(";
    for (size_t i = 0; i < n.operands.size(); ++i) os_ << (i ? ", " : "") << name(n.operands[i]);
    os_ << ")";
    if (n.body != Body::kNone) print_body(id, n);
    if (!n.regions.empty()) {
      os_ << " (";
      for (size_t r = 0; r < n.regions.size(); ++r) {
        if (r) os_ << ", ";
        Printer(*n.regions[r], os_, p_ + "w" + std::to_string(id) + "r" + std::to_string(r) + "_", functions_)
            .print_region();
      }
      os_ << ")";
    }
    if (n.op == kConstant) {
      const Type& t = n.results[0];
      os_ << " {value = dense<" << literal(t.dtype, n.constant) << "> : " << tensor_type(t) << "}";
    } else if (!n.attrs.empty()) {
      os_ << " {";
      bool first = true;
      for (const Attr& a : n.attrs) {
        if (a.name == std::string(kFunctionsAttr)) {
          if (std::find(functions_->begin(), functions_->end(), a.raw) == functions_->end())
            functions_->push_back(a.raw);
          continue;
        }
        if (!first) os_ << ", ";
        first = false;
        print_attr(a);
      }
      os_ << "}";
    }
    os_ << " : (";
    for (size_t i = 0; i < n.operands.size(); ++i)
      os_ << (i ? ", " : "") << tensor_type(g_.type(n.operands[i]));
    os_ << ") -> ";
    if (n.results.size() == 1) {
      os_ << tensor_type(n.results[0]);
    } else {
      os_ << "(";
      for (size_t i = 0; i < n.results.size(); ++i) os_ << (i ? ", " : "") << tensor_type(n.results[i]);
      os_ << ")";
    }
    os_ << "\n";
  }

  const Graph& g_;
  std::ostringstream& os_;
  std::string p_;
  std::vector<std::string> own_functions_;
  std::vector<std::string>* functions_;
};

}  // namespace

std::string tensor_type(const Type& t) {
  std::string s = "tensor<";
  for (int64_t d : t.dims) s += std::to_string(d) + "x";
  s += mlir_name(t.dtype);
  s += ">";
  return s;
}

std::string print_stablehlo(const Graph& g) {
  std::ostringstream os;
  return Printer(g, os).run();
}

}  // namespace torchtpu::ir
