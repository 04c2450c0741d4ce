#include "eager/site_log.h"

#include <cstdio>

namespace torchtpu::eager {

namespace {
thread_local int quiet = 0;
thread_local const std::string* cause = nullptr;
}  // namespace

SiteLog::Quiet::Quiet() { ++quiet; }
SiteLog::Quiet::~Quiet() { --quiet; }
SiteLog::Cause::Cause(std::string what) : what_(std::move(what)), outer_(cause) { cause = &what_; }
SiteLog::Cause::~Cause() { cause = outer_; }

void SiteLog::record(Kind kind, const std::string& what_asked) {
  if (quiet > 0) return;
  const std::string& what = kind == Kind::kSync && cause ? *cause : what_asked;
  const OpSite* op = current_op();
  const SiteRef site = op ? op->where : capture_site();
  const int k = static_cast<int>(kind);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Key key{k, what, site.code, site.lasti};
    auto it = entries_.find(key);
    if (it == entries_.end() && sites_[k] >= kMaxSites) key = Key{k, what, nullptr, -1};
    it = entries_.find(key);
    if (it == entries_.end()) {
      const bool other = std::get<2>(key) == nullptr && site.code != nullptr;
      it = entries_.emplace(key, Entry{kind, what, other ? SiteRef{} : site, 0}).first;
      ++sites_[k];
    }
    ++it->second.count;
  }
  if (kind == Kind::kSync && print_syncs_) {
    const std::string where = op ? std::string() : format_site(site);
    std::fprintf(stderr, "torchtpu: sync point: %s%s\n", what.c_str(),
                 where.empty() ? "" : (" at " + where).c_str());
    std::fflush(stderr);
  }
}

std::vector<SiteLog::Entry> SiteLog::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Entry> out;
  out.reserve(entries_.size());
  for (const auto& [key, e] : entries_) out.push_back(e);
  return out;
}

void SiteLog::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  entries_.clear();
  sites_[0] = sites_[1] = 0;
}

SiteLog& site_log() {
  static SiteLog* log = new SiteLog;  // never destroyed: engine threads may sync at exit
  return *log;
}

}  // namespace torchtpu::eager
