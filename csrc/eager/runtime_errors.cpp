// Runtime's bookkeeping of errors of queued work: recorded per issuing
// thread when work fails, raised once at that thread's next sync point, and
// handed over whole at exit (unobserved_errors).
#include <algorithm>
#include <set>

#include "eager/runtime.h"

namespace torchtpu::eager {

void Runtime::record_error(std::shared_ptr<const DeviceError> e) {
  std::set<uint64_t> issuers;
  for (const OpSite& s : e->sites()) issuers.insert(s.where.issuer == kAnyIssuer ? 0 : s.where.issuer);
  if (issuers.empty()) issuers.insert(0);
  std::lock_guard<std::mutex> lock(error_mu_);
  for (uint64_t t : issuers) {
    auto& list = unraised_[t];
    if (list.size() < 64) list.push_back(e);
  }
}

void Runtime::mark_raised(const std::shared_ptr<const DeviceError>& e) {
  if (!e) return;
  std::lock_guard<std::mutex> lock(error_mu_);
  for (auto it = unraised_.begin(); it != unraised_.end();) {
    auto& list = it->second;
    list.erase(std::remove(list.begin(), list.end(), e), list.end());
    it = list.empty() ? unraised_.erase(it) : std::next(it);
  }
}

void Runtime::raise_pending_error() {
  std::vector<std::shared_ptr<const DeviceError>> mine;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    for (uint64_t t : {thread_token(), uint64_t{0}}) {
      auto it = unraised_.find(t);
      if (it == unraised_.end()) continue;
      mine.insert(mine.end(), it->second.begin(), it->second.end());
      unraised_.erase(it);
    }
    // Raised here: other threads that contributed ops do not raise them.
    for (auto it = unraised_.begin(); it != unraised_.end();) {
      auto& list = it->second;
      for (const auto& e : mine) list.erase(std::remove(list.begin(), list.end(), e), list.end());
      it = list.empty() ? unraised_.erase(it) : std::next(it);
    }
  }
  if (mine.empty()) return;
  DeviceError first = mine[0]->described();
  if (mine.size() == 1) throw first;
  throw DeviceError(std::string(first.what()) + "\n(" + std::to_string(mine.size() - 1) +
                        " later error(s) of queued work from this thread were dropped)",
                    first.code());
}

std::vector<std::string> Runtime::unobserved_errors() {
  std::vector<std::shared_ptr<const DeviceError>> all;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    for (auto& [thread, list] : unraised_)
      for (const auto& e : list)
        if (std::find(all.begin(), all.end(), e) == all.end()) all.push_back(e);
    unraised_.clear();
  }
  std::vector<std::string> out;
  for (const auto& e : all) out.push_back(e->described().what());
  return out;
}

}  // namespace torchtpu::eager
