// The c10d Work objects TpuBackend returns.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <functional>
#include <mutex>
#include <vector>

namespace torchtpu::distributed {

// Work that finished before it was returned; its future holds the outputs.
class DoneWork final : public c10d::Work {
 public:
  DoneWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors())) {
    future_->markCompleted(c10::IValue(outputs_));
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Work still running on the host backend (send, recv); waiting for it runs
// `finish` (recv copies into the tpu tensors) once.
class HostWork final : public c10d::Work {
 public:
  HostWork(int rank, c10d::OpType type, c10::intrusive_ptr<c10d::Work> host, std::function<void()> finish,
           std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type), host_(std::move(host)), finish_(std::move(finish)), outputs_(std::move(outputs)) {}
  bool isCompleted() override { return finished_; }
  bool isSuccess() const override { return finished_; }
  bool wait(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return true;
    host_->wait(timeout);
    if (finish_) finish_();
    finished_ = true;
    return true;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    wait(kNoTimeout);
    auto f = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::ofTensors());
    f->markCompleted(c10::IValue(outputs_));
    return f;
  }

 private:
  std::mutex mu_;
  c10::intrusive_ptr<c10d::Work> host_;
  std::function<void()> finish_;
  std::vector<at::Tensor> outputs_;
  bool finished_ = false;
};

// The ops of one coalesced group (startCoalescing .. endCoalescing): waits
// for each.
class GroupWork final : public c10d::Work {
 public:
  GroupWork(int rank, std::vector<c10::intrusive_ptr<c10d::Work>> works)
      : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)) {}
  bool isCompleted() override {
    return std::all_of(works_.begin(), works_.end(), [](auto& w) { return w->isCompleted(); });
  }
  bool wait(std::chrono::milliseconds timeout) override {
    for (auto& w : works_) w->wait(timeout);
    return true;
  }

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
};

}  // namespace torchtpu::distributed
