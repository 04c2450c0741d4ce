#include "eager/op_graph.h"

#include "eager/metrics.h"

namespace torchtpu::eager {

OpGraph::OpGraph(int device) : device_(device), b_(g_) {}

// The bytes of flat `v` as a flat array of `to` (PyTorch's storage view,
// e.g. torch.save reading any storage as uint8). Bool goes through uint8.
ir::Value OpGraph::reinterpret(ir::Value v, ir::DType to) {
  const ir::DType from = g_.type(v).dtype;
  if (from == to) return v;
  if (from == ir::DType::kBool) return reinterpret(b_.convert(v, ir::DType::kU8), to);
  if (to == ir::DType::kBool) return b_.convert(reinterpret(v, ir::DType::kU8), to);
  const int64_t m = g_.type(v).dims[0], sf = ir::byte_size(from), st = ir::byte_size(to);
  if (sf == st) return b_.bitcast_convert(v, to);
  if (sf > st) {
    ir::Value split = g_.add("stablehlo.bitcast_convert", {v}, ir::Type{to, {m, sf / st}});
    return b_.reshape(split, {m * (sf / st)});
  }
  const int64_t r = st / sf, whole = m / r;
  if (whole * r != m) v = b_.slice(v, {0}, {whole * r});
  ir::Value grouped = b_.reshape(v, {whole, r});
  return g_.add("stablehlo.bitcast_convert", {grouped}, ir::Type{to, {whole}});
}

ir::Value OpGraph::param_for(StorageValue* s, ir::DType dtype) {
  // The latest value of a storage already written in this graph wins.
  for (auto it = outputs_.rbegin(); it != outputs_.rend(); ++it)
    if (it->storage == s && it->dtype == dtype) return it->flat;
  for (const Input& in : inputs_)
    if (in.storage == s && g_.type(in.flat).dtype == dtype) return in.flat;
  const int64_t n = s->numel(dtype);
  pjrt::BufferPtr buf = s->buffer();
  if (!buf) return b_.constant(dtype, 0, {n});
  if (s->dtype() != dtype) {
    ir::Value p = g_.parameter(ir::Type{s->dtype(), {s->numel(s->dtype())}});
    inputs_.push_back({s, buf, p});
    return reinterpret(p, dtype);
  }
  ir::Value p = g_.parameter(ir::Type{dtype, {n}});
  inputs_.push_back({s, std::move(buf), p});
  return p;
}

ir::Value OpGraph::read_flat(StorageValue* s, ir::DType dtype) { return param_for(s, dtype); }

ir::Value OpGraph::read(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v) {
  return ops::read_view(b_, param_for(s, dtype), v);
}

ir::Value OpGraph::scalar(ir::DType dtype, double value) {
  ir::DType carried = (dtype == ir::DType::kF16 || dtype == ir::DType::kBF16) ? ir::DType::kF32 : dtype;
  pjrt::BufferPtr buf = Runtime::get().scalar_buffer(carried, value, device_);
  ir::Value p = g_.parameter(ir::Type{carried, {}});
  inputs_.push_back({nullptr, std::move(buf), p});
  return b_.convert(p, dtype);
}

void OpGraph::write(StorageValue* s, ir::DType dtype, const ops::ViewMeta& v, ir::Value update) {
  const int64_t n = s->numel(dtype);
  ir::Value u = b_.convert(update, dtype);
  ir::Value flat;
  bool whole = v.offset == 0 && ops::is_contiguous(v.sizes, v.strides) && g_.type(u).numel() == n;
  if (whole) {
    flat = b_.reshape(u, {n});
  } else {
    flat = ops::write_view(b_, param_for(s, dtype), v, u);
  }
  for (Output& o : outputs_)
    if (o.storage == s) {
      o.dtype = dtype;
      o.flat = flat;
      return;
    }
  outputs_.push_back({s, dtype, flat});
}

void OpGraph::run() {
  if (outputs_.empty()) return;
  Runtime& rt = Runtime::get();
  g_.outputs.clear();
  for (const Output& o : outputs_) g_.outputs.push_back(o.flat);
  bool hit = false;
  pjrt::ExecutablePtr exe = rt.executable_for(g_, &hit);
  std::vector<pjrt::Buffer*> args;
  args.reserve(inputs_.size());
  for (const Input& in : inputs_) args.push_back(in.buffer.get());
  pjrt::ExecuteResult r = exe->execute(args, device_);
  metrics().executions.fetch_add(1, std::memory_order_relaxed);
  for (size_t i = 0; i < outputs_.size(); ++i) outputs_[i].storage->set(r.outputs[i], outputs_[i].dtype);
  if (rt.mode() == EagerMode::kDebug) {
    r.done->wait();
  } else {
    rt.track(std::move(r.done));
  }
}

}  // namespace torchtpu::eager
