#include "distributed/consensus.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/exception.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace torchtpu::distributed {
namespace {

using Clock = std::chrono::steady_clock;

std::string sig_key(uint64_t seq, int rank) {
  return "tpu_dist/sig/" + std::to_string(seq) + "/" + std::to_string(rank);
}
std::string beat_key(int rank) { return "tpu_dist/beat/" + std::to_string(rank); }

std::string text(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

// The heartbeat thread's state; shared with the thread, which outlives the
// Consensus only until it notices `stop`.
struct Consensus::Heart {
  c10::intrusive_ptr<c10d::Store> store;
  std::string key;
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;

  void run() {
    int64_t count = 0;
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      lock.unlock();
      try {
        store->set(key, bytes(std::to_string(++count)));
      } catch (...) {
        return;  // the store is gone: the peers notice the silence
      }
      lock.lock();
      cv.wait_for(lock, kBeatEvery, [this] { return stop; });
    }
  }
};

Consensus::Consensus(c10::intrusive_ptr<c10d::Store> store, int rank, int size, std::chrono::milliseconds timeout)
    : store_(std::move(store)), rank_(rank), size_(size), timeout_(timeout) {
  if (size_ <= 1) return;
  heart_ = std::make_shared<Heart>();
  try {
    heart_->store = store_->clone();  // its own connection: a beat never waits behind a poll
  } catch (...) {
    heart_->store = store_;
  }
  heart_->key = beat_key(rank_);
  heart_->store->set(heart_->key, bytes("0"));
  std::thread([h = heart_] { h->run(); }).detach();
}

Consensus::~Consensus() {
  if (!heart_) return;
  {
    std::lock_guard<std::mutex> lock(heart_->mu);
    heart_->stop = true;
  }
  heart_->cv.notify_all();
}

uint64_t Consensus::agree(const std::string& signature) {
  const uint64_t seq = ++seq_;
  if (size_ <= 1) return seq;
  try {
    return wait_for_all(seq, signature);
  } catch (const c10::DistError& e) {  // the store or its connection
    TORCH_CHECK(false, "tpu_dist: the process group's store is unreachable while rank ", rank_,
                " waits in collective #", seq, " (", signature, "): ", e.what_without_backtrace(),
                ". The process that hosts it (rank 0 with env:// init, or the launcher) may have exited.");
  }
}

uint64_t Consensus::wait_for_all(uint64_t seq, const std::string& signature) {
  store_->set(sig_key(seq, rank_), bytes(signature));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(sig_key(seq, r));

  const auto start = Clock::now();
  auto next_look = start + kBeatEvery;
  std::vector<std::string> beats(size_);
  std::vector<Clock::time_point> changed(size_, start);
  auto pause = std::chrono::microseconds(50);
  while (!store_->check(keys)) {
    const auto now = Clock::now();
    if (now >= next_look) {
      next_look = now + kBeatEvery;
      std::vector<int> absent;
      for (int r = 0; r < size_; ++r)
        if (!store_->check({keys[r]})) absent.push_back(r);
      for (int r : absent) {
        std::string beat = store_->check({beat_key(r)}) ? text(store_->get(beat_key(r))) : "";
        if (beat != beats[r]) {
          beats[r] = beat;
          changed[r] = now;
        } else if (now - changed[r] > kDeadAfter) {
          TORCH_CHECK(false, "tpu_dist: rank ", r, " stopped responding (its process exited or was killed) "
                      "before collective #", seq, "; rank ", rank_, " is waiting in ", signature);
        }
      }
      if (now - start > timeout_) {
        std::ostringstream who;
        for (size_t i = 0; i < absent.size(); ++i) who << (i ? ", " : "") << absent[i];
        TORCH_CHECK(false, "tpu_dist: rank(s) ", who.str(), " did not reach collective #", seq, " within the "
                    "process group's timeout (", timeout_.count(), " ms); rank ", rank_, " is waiting in ",
                    signature, ". Ranks must issue the same collectives in the same order.");
      }
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }

  std::vector<std::string> sigs;
  if (store_->hasExtendedApi()) {
    for (auto& v : store_->multiGet(keys)) sigs.push_back(text(v));
  } else {
    for (auto& k : keys) sigs.push_back(text(store_->get(k)));
  }
  if (std::any_of(sigs.begin(), sigs.end(), [&](const std::string& s) { return s != sigs[0]; })) {
    std::ostringstream msg;
    msg << "tpu_dist: ranks issued different collectives as collective #" << seq << ":";
    for (int r = 0; r < size_; ++r) msg << "\n  rank " << r << ": " << sigs[r];
    msg << "\nEvery rank must issue the same collectives (op, dtype, shapes) in the same order.";
    // Each rank raises only once all have read the signatures (bounded): the
    // rank that hosts the store exits when it raises, and a rank still about
    // to read would then learn only that the store is gone.
    try {
      const std::string seen = "tpu_dist/seen/" + std::to_string(seq);
      store_->add(seen, 1);
      const auto until = Clock::now() + std::chrono::seconds(10);
      while (store_->add(seen, 0) < size_ && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    } catch (const std::exception&) {
      // The store went away meanwhile: nothing more to wait for.
    }
    TORCH_CHECK(false, msg.str());
  }
  // Every rank posted #seq after reading all of #seq-1: its key is done.
  if (seq > 1) store_->deleteKey(sig_key(seq - 1, rank_));
  return seq;
}

}  // namespace torchtpu::distributed
