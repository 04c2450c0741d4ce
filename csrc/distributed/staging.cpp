#include "distributed/staging.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "aten/tensor_ir.h"
#include "eager/capture.h"
#include "eager/executor.h"
#include "eager/fused_graph.h"
#include "eager/metrics.h"
#include "eager/runtime.h"

namespace torchtpu::distributed {

namespace {

using eager::Runtime;
using eager::SlotPtr;

int64_t nbytes_of(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

// Whether `t` is its whole storage, densely, in the dtype it was written in.
bool whole_storage(const at::Tensor& t, const eager::StorageValue* s) {
  return t.storage_offset() == 0 && t.is_contiguous() && nbytes_of(t) == s->nbytes() &&
         s->dtype() == aten::to_ir(t.scalar_type());
}

// The slot that will hold `t`'s elements as one flat value of its dtype
// (null: the storage holds no value yet, so zeros): its storage's own value,
// else a dense copy made on the device. Pending Fused work computing it is
// queued (the issuing thread does not wait for it).
SlotPtr flat_value(const at::Tensor& t) {
  Runtime& rt = Runtime::get();
  const int dev = t.device().index();
  at::Tensor src = t;
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
    const eager::StorageValue* s = aten::storage_value(t);
    if (!s->has_value()) return nullptr;
    if (!whole_storage(t, s)) src = at::Tensor();
  }
  if (!src.defined()) src = t.clone(at::MemoryFormat::Contiguous);
  SlotPtr slot;
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
    eager::StorageValue* s = aten::storage_value(src);
    rt.fused(dev).flush_for(s);
    eager::Capture::abandon_holding(s, "a host-staged collective");  // another thread's capture computing it
    slot = s->slot();
  }
  if (slot) slot->start_deferred();
  return slot;
}

// `slot` becomes the value of `out`: of its storage when `out` is all of
// it, else through a copy into the view.
void take_value(const at::Tensor& out, SlotPtr slot) {
  Runtime& rt = Runtime::get();
  const int dev = out.device().index();
  const ir::DType dt = aten::to_ir(out.scalar_type());
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
    eager::StorageValue* s = aten::storage_value(out);
    if (out.storage_offset() == 0 && out.is_contiguous() && nbytes_of(out) == s->nbytes()) {
      s->set_slot(std::move(slot), dt);
      return;
    }
  }
  at::Tensor result = aten::empty_device({out.numel()}, out.scalar_type(), static_cast<c10::DeviceIndex>(dev));
  {
    std::lock_guard<std::recursive_mutex> lock(rt.device_lock(dev));
    aten::storage_value(result)->set_slot(std::move(slot), dt);
  }
  const_cast<at::Tensor&>(out).copy_(result.view(out.sizes()));
}

// The host copy of one computed input (zeros for a storage without value);
// the error of the work that computed it, if it failed.
std::shared_ptr<const eager::DeviceError> read_input(const SlotPtr& slot, const at::Tensor& host) {
  if (!slot) {
    host.zero_();
    return nullptr;
  }
  slot->wait();  // not get(): its error would be described, which takes the GIL
  if (std::shared_ptr<const eager::DeviceError> e = slot->error()) return e;
  const pjrt::BufferPtr& buf = slot->buffer();
  if (const eager::RunPtr& run = slot->run())
    if (std::shared_ptr<const eager::DeviceError> e = Runtime::get().executor().outcome(*run)) return e;
  if (!buf) {
    host.zero_();
    return nullptr;
  }
  eager::metrics().d2h_bytes += nbytes_of(host);
  buf->to_host(host.data_ptr(), nbytes_of(host));
  return nullptr;
}

// The live queues, for wait_all().
std::mutex live_mu;
std::vector<StagingQueue*>& live() {
  static auto* queues = new std::vector<StagingQueue*>();  // never destroyed: queues may outlive statics
  return *queues;
}

}  // namespace

StagingQueue::StagingQueue() {
  std::lock_guard<std::mutex> lock(live_mu);
  live().push_back(this);
}

StagingQueue::~StagingQueue() {
  std::lock_guard<std::mutex> lock(live_mu);
  live().erase(std::find(live().begin(), live().end(), this));
}

void StagingQueue::wait_all() {
  std::vector<std::shared_ptr<eager::CopyMark>> marks;
  {
    std::lock_guard<std::mutex> lock(live_mu);
    for (StagingQueue* q : live()) marks.push_back(q->queue_.mark());
  }
  for (auto& m : marks) m->wait();
}

bool StagingQueue::applies(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty() || Runtime::get().mode() == eager::EagerMode::kDebug) return false;
  for (const at::Tensor& t : tensors)
    if (t.device().type() != c10::DeviceType::PrivateUse1 || t.numel() == 0 ||
        eager::Capture::active(t.device().index()))
      return false;
  return true;
}

void StagingQueue::check() const {
  std::lock_guard<std::mutex> lock(mu_);
  TORCH_CHECK(failed_.empty(), failed_, " (an earlier collective of this process group failed; its later ones are "
              "refused so that the ranks' sequences stay paired)");
}

void StagingQueue::drain() {
  queue_.drain();
  check();
}

void StagingQueue::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.empty()) failed_ = why;
}

void StagingQueue::submit(const char* op, const std::string& what, const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs, HostRun run) {
  check();
  struct Flat {
    SlotPtr slot;
    int64_t numel;
    at::ScalarType dtype;
    int device;
  };
  std::vector<Flat> ins, outs;
  const eager::OpSite site{op, eager::capture_site()};
  try {
    for (const at::Tensor& t : inputs) ins.push_back({flat_value(t), t.numel(), t.scalar_type(), -1});
    for (const at::Tensor& t : outputs)
      outs.push_back({std::make_shared<eager::Slot>(), t.numel(), t.scalar_type(), t.device().index()});
  } catch (const std::exception& e) {
    fail(what + ": " + e.what());  // agreed on, never run: the group cannot go on
    throw;
  }
  auto job = [this, what, ins, outs, site, run = std::move(run)] {
    struct Done {
      StagingQueue* q;
      ~Done() {
        {
          std::lock_guard<std::mutex> lock(q->mu_);
          --q->queued_;
        }
        q->room_.notify_all();
      }
    } done{this};
    std::shared_ptr<const eager::DeviceError> err;
    try {
      {
        // After a failure this rank's host backend is out of step with its
        // peers': nothing more reaches it.
        std::lock_guard<std::mutex> lock(mu_);
        if (!failed_.empty())
          err = std::make_shared<eager::DeviceError>(what + ": not run, an earlier collective of this process "
                                                     "group failed: " + failed_, 0, std::vector<eager::OpSite>{site});
      }
      std::vector<at::Tensor> hin, hout;
      for (const Flat& f : ins) {
        if (err) break;
        hin.push_back(at::empty({f.numel}, at::TensorOptions(f.dtype)));
        if ((err = read_input(f.slot, hin.back())))  // this rank leaves the collective out
          fail(what + ": its input was not computed: " + err->what());
      }
      if (!err) {
        for (const Flat& f : outs) hout.push_back(at::empty({f.numel}, at::TensorOptions(f.dtype)));
        run(hin, hout);
        Runtime& rt = Runtime::get();
        for (size_t i = 0; i < outs.size(); ++i) {
          const ir::DType dt = aten::to_ir(outs[i].dtype);
          eager::metrics().h2d_bytes += nbytes_of(hout[i]);
          outs[i].slot->fill(
              rt.client().buffer_from_host(hout[i].data_ptr(), eager::to_pjrt(dt), {outs[i].numel}, outs[i].device),
              nullptr);
        }
        return;
      }
    } catch (const std::exception& e) {
      err = std::make_shared<eager::DeviceError>(what + ": " + e.what(), 0, std::vector<eager::OpSite>{site});
      fail(err->what());
    }
    for (const Flat& f : outs)
      if (!f.slot->done()) f.slot->fail(err);
  };
  // Inputs were taken first: an in-place collective reads the value its
  // output now replaces. An output left half-replaced fails its slots.
  size_t taken = 0;
  try {
    for (; taken < outputs.size(); ++taken) take_value(outputs[taken], outs[taken].slot);
  } catch (const std::exception& e) {
    auto err = std::make_shared<eager::DeviceError>(what + ": " + e.what(), 0, std::vector<eager::OpSite>{site});
    for (const Flat& f : outs) f.slot->fail(err);
    fail(err->what());
    throw;
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    room_.wait(lock, [&] { return queued_ < kMaxQueued; });
    ++queued_;
  }
  queue_.submit(std::move(job));
}

}  // namespace torchtpu::distributed
