// CPU fallback for ops with no tpu lowering (DESIGN decision 10): copy the
// arguments to the CPU, run PyTorch's CPU kernel, copy results back. Counted
// per op, warned once per op, or an error when fallback is disabled.
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>
#include <mutex>
#include <set>
#include <vector>

#include "aten/fallback.h"
#include "aten/registry.h"
#include "eager/capture.h"
#include "eager/metrics.h"
#include "eager/site_log.h"
#include "eager/trace.h"

namespace torchtpu::aten {

namespace {
std::atomic<bool> fallback_is_error{false};
std::mutex warned_mu;
std::set<std::string> warned;

}  // namespace

void cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& opname = op.schema().operator_name();
  std::string name = opname.name + (opname.overload_name.empty() ? "" : "." + opname.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error.load(), "The operator '", name,
                              "' has no tpu lowering and CPU fallback is disabled (TORCHTPU_CPU_FALLBACK=error).");
  eager::metrics().count_fallback(name);
  eager::site_log().record(eager::SiteLog::Kind::kFallback, name);
  // Its results come from the host: a compiled function capturing it would
  // replay this call's values.
  eager::Capture::abandon_this_thread("an op with no tpu lowering (CPU fallback)");
  bool first;
  {
    std::lock_guard<std::mutex> lock(warned_mu);
    first = warned.insert(name).second;
  }
  if (first) {
    // The user's line, not the library frame PyTorch's warning would name.
    const std::string where = eager::current_op() ? "" : eager::format_site(eager::capture_site());
    TORCH_WARN("The operator '", name, "' has no tpu lowering; it runs on the CPU (copying its tensors), which is slow",
               where.empty() ? "" : " (first reached from " + where + ")",
               ". torchtpu.debug.metrics_report() lists the lines that reach it.");
  }
  eager::SiteLog::Cause cause(name + " (CPU fallback)");
  eager::Trace::Span span("cpu fallback", "fallback");
  span.detail(name);
  at::native::cpu_fallback(op, stack);
}

namespace {
// The storage offsets of `t`'s elements, sorted (storage_offset() first).
std::vector<int64_t> element_offsets(const at::Tensor& t) {
  std::vector<int64_t> offsets{t.storage_offset()};
  offsets.reserve(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.dim(); ++i) {
    const size_t n = offsets.size();
    for (int64_t k = 1; k < t.size(i); ++k)
      for (size_t j = 0; j < n; ++j) offsets.push_back(offsets[j] + k * t.stride(i));
  }
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}
// The greatest common divisor of `g` and the strides of `t`'s dims that move.
int64_t stride_gcd(const at::Tensor& t, int64_t g) {
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.size(i) > 1) g = std::gcd(g, t.stride(i));
  return g;
}
constexpr int64_t kListed = int64_t{1} << 20;  // elements listed to tell overlaps exactly
}  // namespace

bool overlaps_itself(const at::Tensor& t) {
  if (!t.defined() || t.numel() < 2 || !t.device().is_privateuseone() || t.is_non_overlapping_and_dense())
    return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims that move
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.size(i) == 1) continue;
    if (t.stride(i) == 0) return false;  // expanded: PyTorch's assert_no_internal_overlap raises
    dims.emplace_back(t.stride(i), t.size(i));
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the furthest offset the smaller strides reach
  bool apart = true;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) {
      apart = false;
      break;
    }
    reach += stride * (size - 1);
  }
  if (apart) return false;
  // Strides can interleave without sharing (sizes [2, 3], strides [3, 2]):
  // list the offsets. Past kListed elements the host path is taken (right either way).
  if (t.numel() > kListed) return true;
  const std::vector<int64_t> offsets = element_offsets(t);
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end();
}

InplaceRule inplace_rule(const char* name, InplaceRule otherwise) {
  static const std::set<std::string> whole = {
      "aten::set_.source_Storage", "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor",
      "aten::resize_", "aten::fill_.Scalar", "aten::fill_.Tensor", "aten::zero_", "aten::bernoulli_.Tensor",
      "aten::bernoulli_.float", "aten::cauchy_", "aten::exponential_", "aten::geometric_", "aten::log_normal_",
      "aten::normal_", "aten::random_", "aten::random_.from", "aten::random_.to", "aten::uniform_",
      "aten::rrelu_with_noise_"};
  static const std::set<std::string> elementwise = {
      "aten::relu_", "aten::polygamma_", "aten::masked_fill_.Scalar", "aten::masked_fill_.Tensor",
      "aten::index_fill_.int_Scalar", "aten::index_fill_.int_Tensor"};
  static const std::set<std::string> no_overlap = {"aten::index_add_", "aten::index_copy_", "aten::index_reduce_",
                                                   "aten::put_", "aten::_index_put_impl_"};
  if (whole.count(name)) return InplaceRule::kWhole;
  if (elementwise.count(name)) return InplaceRule::kElementwise;
  static const std::set<std::string> sequential = {"aten::addmm_"};
  if (no_overlap.count(name)) return InplaceRule::kNoOverlap;
  if (sequential.count(name)) return InplaceRule::kSequential;
  return otherwise;
}

namespace {
// The last element offset `t` reaches (its first is storage_offset()).
int64_t last_offset(const at::Tensor& t) {
  int64_t last = t.storage_offset();
  for (int64_t i = 0; i < t.dim(); ++i) last += t.stride(i) * (t.size(i) - 1);
  return last;
}
}  // namespace

bool meets(const at::Tensor& written, const at::Tensor& t) {
  if (!t.defined() || !written.defined() || t.numel() == 0 || written.numel() == 0) return false;
  if (!t.device().is_privateuseone() || !t.is_alias_of(written)) return false;
  const int64_t ws = written.element_size(), ts = t.element_size();
  if (t.storage_offset() * ts > last_offset(written) * ws + ws - 1 ||
      written.storage_offset() * ws > last_offset(t) * ts + ts - 1)
    return false;  // apart
  if (ws != ts || written.is_same(t)) return true;
  // Interleaved views (x[::2] and x[1::2]) share a span, not elements.
  const int64_t g = stride_gcd(t, stride_gcd(written, 0));
  if (g > 1 && (t.storage_offset() - written.storage_offset()) % g != 0) return false;
  if (written.numel() > kListed || t.numel() > kListed) return true;
  const std::vector<int64_t> a = element_offsets(written), b = element_offsets(t);
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    if (a[i] == b[j]) return true;
    a[i] < b[j] ? ++i : ++j;
  }
  return false;
}

bool same_elements(const at::Tensor& a, const at::Tensor& b) {
  return a.is_same(b) || (a.is_alias_of(b) && a.scalar_type() == b.scalar_type() &&
                          a.storage_offset() == b.storage_offset() && a.sizes() == b.sizes() &&
                          a.strides() == b.strides());
}

void overlap_refused() {
  TORCH_CHECK(false, "unsupported operation: some elements of the input tensor and the written-to tensor refer to a "
              "single memory location. Please clone() the tensor before performing the operation.");
}

void write_on_host(const char* name, torch::jit::Stack* stack) {
  const std::string full(name);
  const size_t dot = full.find('.');
  const c10::OperatorHandle op = c10::Dispatcher::singleton().findSchemaOrThrow(
      full.substr(0, dot).c_str(), dot == std::string::npos ? "" : full.substr(dot + 1).c_str());
  TORCH_CHECK_NOT_IMPLEMENTED(!fallback_is_error.load(), "The operator '", full,
                              "' writes memory that it also reads (an input, or its own elements sharing memory), "
                              "which runs on the CPU, and CPU fallback is disabled (TORCHTPU_CPU_FALLBACK=error).");
  eager::metrics().count_fallback(full);
  eager::site_log().record(eager::SiteLog::Kind::kFallback, full);
  eager::Capture::abandon_this_thread("an in-place op writing memory it also reads (runs on the CPU)");
  bool first;
  {
    std::lock_guard<std::mutex> lock(warned_mu);
    first = warned.insert(full + " overlap").second;
  }
  if (first)
    TORCH_WARN("'", full, "' writes memory that it also reads (an input, or its own elements sharing memory); it "
               "runs on the CPU over a copy of that memory, to give the values of PyTorch's CPU kernel, which reads "
               "and writes element by element");
  eager::SiteLog::Cause cause(full + " (overlapping write on the CPU)");
  eager::Trace::Span span("cpu fallback", "fallback");
  span.detail(full);
  // The memory the written tensor covers, with every argument of its dtype
  // that meets it, as one run of elements on the host: those arguments read
  // the host copy as it is written, as on the CPU.
  const at::Tensor self = (*stack)[0].toTensor();
  int64_t lo = self.storage_offset(), hi = last_offset(self);
  auto shares = [&](const at::Tensor& t) {
    return t.defined() && t.scalar_type() == self.scalar_type() && meets(self, t);
  };
  auto widen = [&](const at::Tensor& t) {
    if (shares(t)) lo = std::min(lo, t.storage_offset()), hi = std::max(hi, last_offset(t));
  };
  for (const c10::IValue& v : *stack) {
    if (v.isTensor()) widen(v.toTensor());
    if (v.isTensorList())
      for (const at::Tensor& t : v.toTensorVector()) widen(t);
  }
  at::Tensor span_dev = at::empty({0}, self.options()).set_(self.storage(), lo, {hi - lo + 1}, {1});
  at::Tensor span_host = span_dev.cpu();
  auto to_host = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || !t.device().is_privateuseone()) return t;
    if (shares(t)) return span_host.as_strided(t.sizes(), t.strides(), t.storage_offset() - lo);
    return t.cpu();
  };
  for (c10::IValue& v : *stack) {
    if (v.isTensor()) {
      v = to_host(v.toTensor());
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> ts;
      for (const at::Tensor& t : v.toTensorVector()) ts.push_back(to_host(t));
      v = c10::IValue(ts);
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> ts;
      for (const std::optional<at::Tensor>& t : std::move(v).toOptionalTensorList())
        ts.push_back(t ? std::optional<at::Tensor>(to_host(*t)) : std::nullopt);
      v = c10::IValue(ts);
    }
  }
  op.callBoxed(stack);
  span_dev.copy_(span_host);
}

void set_fallback_error(bool error) { fallback_is_error = error; }
bool fallback_error() { return fallback_is_error; }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torchtpu::aten
