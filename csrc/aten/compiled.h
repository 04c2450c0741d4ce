// Compiled functions at the tensor level (eager/capture.h). A CaptureSession
// records the ops a function issues on one device; finish() turns them into
// a CompiledProgram that takes the function's tensors and returns new output
// tensors: one execution per call, no dispatch. Device-side checks that the
// captured ops make (index bounds and the like) become outputs of the
// program and are queued again on every run, as an eager op's are.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/tensor_ir.h"
#include "eager/capture.h"

namespace torchtpu::aten {

// A result tensor as a view of one of the program's output storages.
struct OutputSpec {
  int storage = 0;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  at::ScalarType dtype = at::kFloat;
};

class CompiledProgram {
 public:
  // Runs on `inputs` (defined tpu tensors where the capture had inputs).
  // Returns the result tensors in spec order; nullopt when these inputs
  // cannot be taken (an input of another layout than at capture, or one that
  // holds no value): the caller captures or runs the function anew.
  std::optional<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs);
  int64_t ops() const { return program_->ops(); }
  // The StableHLO text of the program.
  std::string stablehlo() const;
  // Each parameter of the program's @main, in order: ("input", argument
  // index, undefined) or ("value", -1, its value as a tpu tensor: a constant
  // read at capture or a scalar; random keys as drawn at capture).
  std::vector<std::tuple<std::string, int, at::Tensor>> arguments() const;

 private:
  friend class CaptureSession;
  // The program reads each input's whole storage with the view it had at
  // capture: an input of another layout (offset, strides, storage size)
  // needs a program of its own.
  struct InputLayout {
    bool tensor = false;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0, storage_bytes = 0;
    at::ScalarType dtype = at::kFloat;
  };
  bool same_layout(const std::vector<at::Tensor>& inputs) const;
  std::shared_ptr<eager::Program> program_;
  std::vector<InputLayout> layouts_;
  c10::DeviceIndex device_ = 0;
  std::vector<int64_t> storage_bytes_;  // per requested output storage
  std::vector<OutputSpec> specs_;
  // Checks: the program output holding each flag, and what it reports.
  std::vector<std::pair<int, CheckRecord>> checks_;
};

class CaptureSession {
 public:
  explicit CaptureSession(c10::DeviceIndex device);
  // Ends the capture. `inputs`: the function's arguments (undefined where an
  // argument is not a tpu tensor); `storages`: one tensor per storage its
  // results live in (none of them an input's); `specs`: the results as views
  // of those. Null when the capture was abandoned (see why()) or captured
  // nothing; the function's results are then already computed eagerly.
  std::shared_ptr<CompiledProgram> finish(const std::vector<at::Tensor>& inputs,
                                          const std::vector<at::Tensor>& storages, std::vector<OutputSpec> specs);
  std::string why() const { return cap_ ? cap_->why() : ""; }

 private:
  c10::DeviceIndex device_;
  std::unique_ptr<eager::Capture> cap_;
};

}  // namespace torchtpu::aten
