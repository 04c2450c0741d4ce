#include "eager/recompiles.h"

#include <algorithm>
#include <sstream>

namespace torchtpu::eager {

namespace {

constexpr size_t kMaxDims = 1 << 16;  // node dims kept per graph

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h;
}

uint64_t text_hash(uint64_t h, const std::string& s) {
  for (char c : s) h = mix(h, static_cast<unsigned char>(c));
  return h;
}

std::string dims_text(const ir::Dims& d) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < d.size(); ++i) o << (i ? ", " : "") << d[i];
  o << "]";
  return o.str();
}

}  // namespace

const char* RecompileLog::name(Cause c) {
  switch (c) {
    case Cause::kNewProgram: return "new_program";
    case Cause::kNewShape: return "new_shape";
    case Cause::kNewAttributes: return "new_attributes";
    case Cause::kNewBucket: return "new_bucket";
    case Cause::kPadding: return "bucket_padding";
    case Cause::kReplayMiss: return "replay_miss";
  }
  return "?";
}

RecompileLog::Shape RecompileLog::shape_of(const ir::Graph& g) {
  Shape s;
  s.nodes = static_cast<int64_t>(g.nodes().size());
  uint64_t sk = 0x243F6A8885A308D3ULL, at = 0x13198A2E03707344ULL;
  size_t total = 0;
  for (const ir::Node& n : g.nodes()) total += n.results.size() * 4;
  const bool keep = total <= kMaxDims;
  for (const ir::Node& n : g.nodes()) {
    sk = text_hash(sk, n.op);
    sk = mix(sk, static_cast<uint64_t>(n.body));
    for (const ir::Value& v : n.operands) sk = mix(mix(sk, static_cast<uint64_t>(v.node)), static_cast<uint64_t>(v.index));
    for (const ir::Type& t : n.results) {
      sk = mix(mix(sk, static_cast<uint64_t>(t.dtype)), t.dims.size());
      if (keep) s.dims.insert(s.dims.end(), t.dims.begin(), t.dims.end());
    }
    for (const ir::Attr& a : n.attrs) {
      at = text_hash(at, a.name);
      for (int64_t v : a.ints) at = mix(at, static_cast<uint64_t>(v));
      at = text_hash(at, a.raw);
    }
    at = mix(at, static_cast<uint64_t>(n.param_index));
    uint64_t bits;
    static_assert(sizeof(bits) == sizeof(n.constant));
    std::copy_n(reinterpret_cast<const char*>(&n.constant), sizeof(bits), reinterpret_cast<char*>(&bits));
    at = mix(at, bits);
    sk = mix(sk, n.regions.size());
  }
  for (const ir::Value& v : g.outputs) sk = mix(mix(sk, static_cast<uint64_t>(v.node)), static_cast<uint64_t>(v.index));
  for (const auto& d : g.donations) at = mix(mix(at, static_cast<uint64_t>(d.first)), static_cast<uint64_t>(d.second));
  at = mix(at, static_cast<uint64_t>(g.replicas));
  s.skeleton = sk;
  s.attributes = at;
  for (int i = 0; i < g.num_parameters(); ++i) s.params.push_back(g.parameter_type(i));
  s.views.resize(s.params.size());
  std::vector<int32_t> param_of(g.nodes().size(), -1);
  for (int i = 0; i < g.num_parameters(); ++i) param_of[g.parameter_value(i).node] = i;
  for (const ir::Node& n : g.nodes()) {
    if (n.operands.size() != 1 || n.results.size() != 1 || std::string(n.op).find("reshape") == std::string::npos)
      continue;
    const int32_t p = param_of[n.operands[0].node];
    if (p >= 0 && s.views[p].empty()) s.views[p] = n.results[0].dims;
  }
  return s;
}

std::string RecompileLog::inputs_difference(const Shape& before, const Shape& now) {
  std::ostringstream o;
  if (before.params.size() != now.params.size()) {
    o << "; " << before.params.size() << " -> " << now.params.size() << " inputs";
    return o.str();
  }
  int named = 0;
  for (size_t i = 0; i < now.params.size() && named < 3; ++i) {
    const ir::Type& a = before.params[i];
    const ir::Type& b = now.params[i];
    if (a.dims.empty() != b.dims.empty()) {  // a scalar argument is rank 0, a tensor's storage rank 1
      o << "; input " << i
        << (a.dims.empty() ? ": a Python number became a tensor" : ": a tensor became a Python number");
      ++named;
    } else if (a.dtype != b.dtype) {
      o << "; input " << i << " dtype " << ir::mlir_name(a.dtype) << " -> " << ir::mlir_name(b.dtype);
      ++named;
    }
  }
  return o.str();
}

std::string RecompileLog::difference(const Shape& before, const Shape& now) {
  std::ostringstream o;
  int named = 0, more = 0;
  for (size_t i = 0; i < now.params.size() && i < before.params.size(); ++i) {
    const ir::Dims& a = before.params[i].dims;
    const ir::Dims& b = now.params[i].dims;
    if (a == b) continue;
    if (named == 3) {
      ++more;
      continue;
    }
    const bool viewed = !before.views[i].empty() && !now.views[i].empty();
    o << (named ? "; " : "") << "input " << i << " shape "
      << dims_text(viewed ? before.views[i] : a) << " -> " << dims_text(viewed ? now.views[i] : b);
    ++named;
  }
  if (more) o << " (and " << more << " more inputs)";
  if (named) return o.str();
  if (!before.dims.empty() && before.dims.size() == now.dims.size()) {
    for (size_t i = 0; i < now.dims.size(); ++i)
      if (before.dims[i] != now.dims[i])
        return "a size inside the graph " + std::to_string(before.dims[i]) + " -> " + std::to_string(now.dims[i]) +
               " (a size given as a Python number, e.g. torch.arange(n) or x.view(n, -1))";
  }
  return "sizes inside the graph changed";
}

RecompileLog::Cause RecompileLog::record(const ir::Graph& g, const OpSite& site, bool padding, int64_t bucket) {
  if (padding) {
    std::lock_guard<std::mutex> lock(mu_);
    ++by_cause_[static_cast<int>(Cause::kPadding)];
    return Cause::kPadding;
  }
  Shape now = shape_of(g);
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_tuple(site.where.code, site.where.code ? site.where.lasti : -1, site.op);
  auto it = sites_.find(key);
  if (it == sites_.end()) {
    if (sites_.size() >= kMaxSites) {
      auto oldest = std::min_element(sites_.begin(), sites_.end(),
                                     [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
      sites_.erase(oldest);
    }
    it = sites_.emplace(key, Site{}).first;
  }
  Site& s = it->second;
  s.order = ++next_order_;
  ++s.count;
  Cause cause = Cause::kNewProgram;
  std::string detail;
  if (bucket > 0) {  // not kept as the site's graph: its ops are the exact graph's and masks
    ++by_cause_[static_cast<int>(Cause::kNewBucket)];
    if (events_.size() >= kMaxEvents) events_.pop_front();
    events_.push_back(Event{site, Cause::kNewBucket,
                            "the program of the bucket of sizes up to " + std::to_string(bucket), s.count,
                            s.shape_count});
    pending_.store(events_.size(), std::memory_order_relaxed);
    return Cause::kNewBucket;
  }
  auto same = std::find_if(s.shapes.begin(), s.shapes.end(),
                           [&](const Shape& p) { return p.skeleton == now.skeleton && p.nodes == now.nodes; });
  if (same != s.shapes.end()) {
    const bool sized = same->params != now.params || same->dims != now.dims || same->dims.empty();
    cause = sized ? Cause::kNewShape : Cause::kNewAttributes;
    detail = sized ? difference(*same, now) : "the same ops and shapes with other attributes (slice bounds, "
                                              "constants or donated inputs)";
    ++s.shape_count;
    s.shapes.erase(same);
  } else if (s.shapes.empty()) {
    detail = "first program of this site (" + std::to_string(now.nodes) + " nodes)";
  } else {
    detail = "other ops than before at this site (" + std::to_string(s.shapes.front().nodes) + " -> " +
             std::to_string(now.nodes) + " nodes" + inputs_difference(s.shapes.front(), now) + ")";
  }
  s.shapes.insert(s.shapes.begin(), std::move(now));
  if (s.shapes.size() > kShapesPerSite) s.shapes.pop_back();
  ++by_cause_[static_cast<int>(cause)];
  if (events_.size() >= kMaxEvents) events_.pop_front();
  events_.push_back(Event{site, cause, std::move(detail), s.count, s.shape_count});
  pending_.store(events_.size(), std::memory_order_relaxed);
  return cause;
}

void RecompileLog::replay_miss(const OpSite& site, std::string detail) {
  std::lock_guard<std::mutex> lock(mu_);
  if (events_.size() >= kMaxEvents) events_.pop_front();
  events_.push_back(Event{site, Cause::kReplayMiss, std::move(detail), 0, 0});
  pending_.store(events_.size(), std::memory_order_relaxed);
}

std::map<std::string, int64_t> RecompileLog::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> m;
  for (Cause c : {Cause::kNewProgram, Cause::kNewShape, Cause::kNewAttributes, Cause::kNewBucket, Cause::kPadding})
    m[name(c)] = by_cause_[static_cast<int>(c)];
  return m;
}

std::vector<RecompileLog::Event> RecompileLog::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out(events_.begin(), events_.end());
  events_.clear();
  pending_.store(0, std::memory_order_relaxed);
  return out;
}

void RecompileLog::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, site] : sites_) site.count = site.shape_count = 0;  // their last graphs stay known
  events_.clear();
  pending_.store(0, std::memory_order_relaxed);
  std::fill(std::begin(by_cause_), std::end(by_cause_), 0);
}

RecompileLog& recompile_log() {
  static RecompileLog& log = *new RecompileLog;
  return log;
}

}  // namespace torchtpu::eager
