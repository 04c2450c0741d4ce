// Split: a graph cut around some of its nodes (the cuts: collectives, each
// with one operand and one result), for a program that must run in stages
// with each cut run on its own between them. Segment k computes every value
// that needs no cut after the k-th stage; cut i runs after segment
// cut_after[i] (in order: a cut never runs before an earlier one), and its
// result is a value the later segments read.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace torchtpu::ir {

struct Split {
  // The values that cross a segment boundary are numbered: 0..P-1 are the
  // graph's parameters, then the cuts' operands and results and the values
  // segments pass on, as the fields below say.
  struct Segment {
    Graph graph;                // its parameters and outputs in the order below
    std::vector<int> params;    // value numbers
    std::vector<int> outputs;   // value numbers
  };
  struct Cut {
    int32_t node;  // in the original graph
    int after;     // the segment it runs after
    int operand;   // value numbers
    int result;
  };
  std::vector<Segment> segments;
  std::vector<Cut> cuts;
  std::vector<int> outputs;  // the value number of each of the graph's outputs
  int values = 0;            // how many value numbers there are
};

// Splits `g` around `cuts` (node indices, ascending). Throws
// std::invalid_argument if a cut is not a node of one operand and one result.
Split split(const Graph& g, const std::vector<int32_t>& cuts);

}  // namespace torchtpu::ir
