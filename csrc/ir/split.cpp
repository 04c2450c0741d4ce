#include "ir/split.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace torchtpu::ir {

Split split(const Graph& g, const std::vector<int32_t>& cuts) {
  const std::vector<Node>& nodes = g.nodes();
  const int32_t n = static_cast<int32_t>(nodes.size());
  Split out;
  // The stage of each node: the segment that computes it (a cut's result
  // belongs to the stage after the cut).
  std::vector<int> stage(n, 0), cut_of(n, -1);
  for (size_t i = 0; i < cuts.size(); ++i) {
    const int32_t c = cuts[i];
    if (c < 0 || c >= n || nodes[c].operands.size() != 1 || nodes[c].results.size() != 1 ||
        (i > 0 && c <= cuts[i - 1]))
      throw std::invalid_argument("split: node " + std::to_string(c) + " cannot be cut around");
    cut_of[c] = static_cast<int>(i);
  }
  int last_cut = 0;
  for (int32_t i = 0; i < n; ++i) {
    int s = 0;
    for (const Value& v : nodes[i].operands) s = std::max(s, stage[v.node]);
    if (cut_of[i] >= 0) {
      s = std::max(s, last_cut);
      last_cut = s;
      out.cuts.push_back({i, s, -1, -1});
      stage[i] = s + 1;
    } else {
      stage[i] = s;
    }
  }
  const int segments = (out.cuts.empty() ? 0 : out.cuts.back().after + 1) + 1;
  out.segments.resize(segments);

  // Value numbers: parameters first, then each value read outside its stage.
  out.values = g.num_parameters();
  std::map<std::pair<int32_t, int32_t>, int> number;
  std::vector<Value> numbered;  // the value of number P + i
  auto number_of = [&](Value v) {
    const Node& node = nodes[v.node];
    if (node.op == kParameter) return static_cast<int>(node.param_index);
    auto [it, fresh] = number.emplace(std::make_pair(v.node, v.index), out.values);
    if (fresh) {
      ++out.values;
      numbered.push_back(v);
      // A computed value leaves the segment that computes it (a cut's
      // result is the cut's own).
      if (cut_of[v.node] < 0) out.segments[stage[v.node]].outputs.push_back(it->second);
    }
    return it->second;
  };
  for (Split::Cut& c : out.cuts) {
    c.operand = number_of(nodes[c.node].operands[0]);
    c.result = number_of(Value{c.node, 0});
  }
  // Each segment's graph: its nodes, with values of other stages as parameters.
  std::vector<std::map<int, Value>> params(segments);
  std::vector<Value> where(n);
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.op == kParameter || cut_of[i] >= 0) continue;
    Split::Segment& seg = out.segments[stage[i]];
    Node copy = node;
    for (Value& v : copy.operands) {
      const Node& from = nodes[v.node];
      if (from.op != kParameter && cut_of[v.node] < 0 && stage[v.node] == stage[i]) {
        v = Value{where[v.node].node, v.index};
        continue;
      }
      const int num = number_of(v);
      auto [it, fresh] = params[stage[i]].emplace(num, Value{});
      if (fresh) {
        it->second = seg.graph.parameter(g.type(v));
        seg.params.push_back(num);
      }
      v = it->second;
    }
    where[i] = seg.graph.append(std::move(copy));
  }
  for (const Value& v : g.outputs) out.outputs.push_back(number_of(v));
  // Each segment returns the values numbered in it (read by a later stage, a
  // cut or the graph's outputs), in number order.
  for (int k = 0; k < segments; ++k) {
    Split::Segment& seg = out.segments[k];
    std::sort(seg.outputs.begin(), seg.outputs.end());
    for (int num : seg.outputs) {
      const Value v = numbered[num - g.num_parameters()];
      seg.graph.outputs.push_back(Value{where[v.node].node, v.index});
    }
  }
  return out;
}

}  // namespace torchtpu::ir
