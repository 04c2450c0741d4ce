// Fused Eager's replay of recorded graphs (the contract is in fused_graph.h).
#include <algorithm>

#include "eager/fused_graph.h"
#include "eager/metrics.h"
#include "eager/recompiles.h"
#include "ir/graph_key.h"

namespace torchtpu::eager {

namespace {
// Where step i's binds and written values start.
template <class Steps>
int32_t binds_begin(const Steps& steps, size_t i) {
  return i ? steps[i - 1].binds_end : 0;
}
template <class Steps>
int32_t outs_begin(const Steps& steps, size_t i) {
  return i ? steps[i - 1].outs_end : 0;
}
}  // namespace

bool FusedGraph::same_prefix(const Recording& a, const Recording& b, size_t n) {
  if (a.steps.size() < n || b.steps.size() < n) return false;
  for (size_t i = 0; i < n; ++i) {
    const Step &x = a.steps[i], &y = b.steps[i];
    if (!(x.key == y.key) || x.op != y.op || x.nodes_end != y.nodes_end || x.binds_end != y.binds_end ||
        x.outs_end != y.outs_end)
      return false;
  }
  for (int32_t j = 0; j < binds_begin(a.steps, n); ++j) {
    const Bind &x = a.binds[j], &y = b.binds[j];
    if (x.from != y.from || x.param_node != y.param_node || !(x.value == y.value)) return false;
  }
  for (int32_t j = 0; j < outs_begin(a.steps, n); ++j)
    if (!(a.outs[j].value == b.outs[j].value) || a.outs[j].dtype != b.outs[j].dtype) return false;
  return true;
}

bool FusedGraph::matches(const Pending& p, const Recording& r, size_t i, const ir::GraphKey& key,
                         const std::vector<OpGraph::Input>& inputs, const std::vector<OpGraph::Output>& outputs,
                         const OpSite& site) {
  if (i >= r.steps.size()) return false;
  const Step& st = r.steps[i];
  if (!(st.key == key) || st.op != site.op) return false;
  const int32_t b0 = binds_begin(r.steps, i), o0 = outs_begin(r.steps, i);
  if (static_cast<size_t>(st.binds_end - b0) != inputs.size() ||
      static_cast<size_t>(st.outs_end - o0) != outputs.size())
    return false;
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Bind& b = r.binds[b0 + j];
    const StorageValue* s = inputs[j].storage;
    if (inputs[j].param.node != b.param_node) return false;
    switch (b.from) {
      case From::kScalar:
        if (s) return false;
        break;
      case From::kPending:
        if (!s || s->pending_gen != p.gen || !(s->pending_value == b.value)) return false;
        break;
      case From::kParam:
        if (!s || s->pending_gen == p.gen || s->param_gen != p.gen || !(s->param_value == b.value)) return false;
        break;
      case From::kNewParam:
        if (!s || s->pending_gen == p.gen || s->param_gen == p.gen) return false;
        break;
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    if (!outputs[j].storage || r.outs[o0 + j].dtype != outputs[j].dtype) return false;
  return true;
}

bool FusedGraph::replay_op(Pending& p, const ir::GraphKey& key, const std::vector<OpGraph::Input>& inputs,
                           const std::vector<OpGraph::Output>& outputs, const OpSite& site) {
  if (!p.replay) {
    if (p.ops != 0) return false;
    // The recording that followed the last graph's, else the latest that
    // starts with this op.
    std::shared_ptr<const Recording> next = p.last ? p.last->next.lock() : nullptr;
    if (next && matches(p, *next, 0, key, inputs, outputs, site)) {
      p.replay = std::move(next);
    } else {
      for (const auto& r : p.recordings)
        if (matches(p, *r, 0, key, inputs, outputs, site)) {
          p.replay = r;
          break;
        }
    }
    if (!p.replay) return false;
  } else if (!matches(p, *p.replay, static_cast<size_t>(p.ops), key, inputs, outputs, site)) {
    // Another recording with the same ops so far that goes on with this one.
    const size_t n = static_cast<size_t>(p.ops);
    std::shared_ptr<const Recording> other;
    for (const auto& r : p.recordings)
      if (r != p.replay && same_prefix(*r, *p.replay, n) && matches(p, *r, n, key, inputs, outputs, site)) {
        other = r;
        break;
      }
    if (!other) {
      stop_replay(p, &site, n >= p.replay->steps.size() ? "the graph goes on past the recorded cut"
                                                         : "another op, or inputs from other places, than recorded");
      return false;
    }
    p.replay = std::move(other);
  }
  const Recording& r = *p.replay;
  const size_t i = static_cast<size_t>(p.ops);
  const int32_t b0 = binds_begin(r.steps, i), o0 = outs_begin(r.steps, i);
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Bind& b = r.binds[b0 + j];
    const OpGraph::Input& in = inputs[j];
    if (b.from == From::kScalar) {
      p.args.push_back({nullptr, in.scalar});
      p.arg_free.push_back(false);
      p.arg_storage.push_back(nullptr);
      p.arg_redraw.push_back(in.redraw);
    } else if (b.from == From::kNewParam) {
      StorageValue* s = in.storage;
      s->param_gen = p.gen;
      s->param_value = b.value;
      s->param_index = static_cast<int32_t>(p.args.size());
      p.args.push_back({s->slot(), nullptr});
      p.arg_free.push_back(false);
      p.arg_storage.push_back(s);
      p.arg_redraw.push_back({});
    }
  }
  for (size_t j = 0; j < outputs.size(); ++j) {
    StorageValue* s = outputs[j].storage;
    if (s->param_gen == p.gen) p.arg_free[s->param_index] = true;  // its old value is dead
    if (s->pending_gen != p.gen) {
      s->pending_gen = p.gen;
      s->pending_index = static_cast<int32_t>(p.written.size());
      p.written.push_back(s);
    }
    s->pending_value = r.outs[o0 + j].value;
    s->set_pending_dtype(outputs[j].dtype);
  }
  p.sites.push_back(site);
  p.sites.back().where.issuer = p.issuer;
  ++p.ops;
  metrics().fused_replayed_ops.fetch_add(1, std::memory_order_relaxed);
  after_append(p, r.steps[i].fp, false);
  return true;
}

std::shared_ptr<const FusedGraph::Recording> FusedGraph::fitting(const Pending& p,
                                                                  const std::vector<int32_t>& out_at) const {
  const size_t n = static_cast<size_t>(p.ops);
  auto fits = [&](const Recording& r) { return r.steps.size() == n && r.out_at == out_at && r.arg_free == p.arg_free; };
  if (!p.calls.empty()) return nullptr;
  if (fits(*p.replay)) return p.replay;
  for (const auto& r : p.recordings)
    if (r != p.replay && fits(*r) && same_prefix(*r, *p.replay, n)) return r;
  return nullptr;
}

void FusedGraph::stop_replay(Pending& p, const OpSite* site, const char* why) {
  const std::shared_ptr<const Recording> r = std::move(p.replay);
  p.replay.reset();
  const size_t n = static_cast<size_t>(p.ops);
  p.g.assign_prefix(*r->graph, n ? static_cast<size_t>(r->steps[n - 1].nodes_end) : 0);
  p.journal.steps.assign(r->steps.begin(), r->steps.begin() + static_cast<std::ptrdiff_t>(n));
  p.journal.binds.assign(r->binds.begin(), r->binds.begin() + binds_begin(r->steps, n));
  p.journal.outs.assign(r->outs.begin(), r->outs.begin() + outs_begin(r->steps, n));
  p.journaled = true;
  metrics().fused_replay_misses.fetch_add(1, std::memory_order_relaxed);
  const OpSite* at = site ? site : (p.sites.empty() ? nullptr : &p.sites.back());
  if (at)
    recompile_log().replay_miss(*at, std::string(why) + " (after " + std::to_string(n) + " of " +
                                         std::to_string(r->steps.size()) + " recorded ops)");
}

void FusedGraph::keep_recording(Pending& p, std::vector<int32_t> out_at, const std::shared_ptr<const ir::Graph>& g,
                                Task& task) {
  if (p.journal.steps.size() != static_cast<size_t>(p.ops)) return;
  auto r = std::make_shared<Recording>();
  r->steps = std::move(p.journal.steps);
  r->binds = std::move(p.journal.binds);
  r->outs = std::move(p.journal.outs);
  r->graph = g;
  r->out_at = std::move(out_at);
  r->arg_free = p.arg_free;
  // Keyed here, once: the task then skips hashing its graph again.
  Runtime& rt = Runtime::get();
  r->key = ir::graph_key(*g, rt.salt());
  task.key = r->key;
  task.ready_exe = rt.cache().find(r->key);
  if (p.last) p.last->next = r;
  p.last = r;
  p.recordings.insert(p.recordings.begin(), std::move(r));
  if (p.recordings.size() > kMaxRecordings) p.recordings.pop_back();
}

}  // namespace torchtpu::eager
