// ReplicaGroup: ranks that are threads of this process, one per device,
// whose programs hold collectives among them (distributed::LocalGroup). Such
// a program runs only together with the other ranks' programs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace torchtpu::eager {

struct Task;
class ReplicaGroup;

// One collective of a Fused Eager program: the node that computes it, the
// group and rank that issued it, and what the group needs to run it alone.
struct CollectiveCall {
  std::shared_ptr<ReplicaGroup> group;
  int rank = 0;
  int32_t node = -1;  // in the program's graph
  int kind = 0;       // the group's own codes
  int reduction = 0;
  std::string signature;
  int64_t timeout_ms = 0;
  int64_t seq = 0;  // the rank's collective number in its group
};

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  // Runs rank's `task` (its output slots installed, not queued) as one
  // replicated execution with the other ranks' programs, which must be the
  // same; `signature` names its collectives. Blocks until every rank brought
  // its program; on a mismatch or the group's timeout the task's outputs
  // fail with the error (raised where they are read).
  virtual void run_program(int rank, std::unique_ptr<Task> task, const std::string& signature) = 0;
  // Runs a Fused Eager program holding collectives (task->collectives, the
  // first of this group) with the other ranks' programs: as one replicated
  // execution when they are the same, else in stages around its collectives,
  // each collective run alone. Blocks until done; fills or fails every
  // output, never throws. Called in the device's program order (GroupQueue).
  virtual void run_fused(std::unique_ptr<Task> task) = 0;
};

}  // namespace torchtpu::eager
