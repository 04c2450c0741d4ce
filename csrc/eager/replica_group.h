// ReplicaGroup: ranks that are threads of this process, one per device,
// whose programs hold collectives among them (distributed::LocalGroup). Such
// a program runs only together with the other ranks' same program.
#pragma once

#include <memory>
#include <string>

namespace torchtpu::eager {

struct Task;

class ReplicaGroup {
 public:
  virtual ~ReplicaGroup() = default;
  // Runs rank's `task` (its output slots installed, not queued) as one
  // replicated execution with the other ranks' programs, which must be the
  // same; `signature` names its collectives. Blocks until every rank brought
  // its program; on a mismatch or the group's timeout the task's outputs
  // fail with the error (raised where they are read).
  virtual void run_program(int rank, std::unique_ptr<Task> task, const std::string& signature) = 0;
};

}  // namespace torchtpu::eager
