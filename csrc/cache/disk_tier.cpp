#include "cache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "cache/disk_entry.h"

namespace torchtpu::cache {

namespace {

constexpr const char* kEntrySuffix = ".tte";
constexpr const char* kLockSuffix = ".lock";
constexpr const char* kTmpPrefix = ".tmp-";
constexpr int64_t kStaleTmpSeconds = 3600;
// PJRT blobs cap at 2 GB; a larger file is not an entry.
constexpr int64_t kMaxEntryBytes = (int64_t{4} << 30) + static_cast<int64_t>(kSignedEntryHeaderBytes);

std::string errno_text() { return std::strerror(errno); }

bool ends_with(const std::string& s, const char* suffix) {
  const size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

bool is_hex_name(const std::string& s) {
  return s.size() == 32 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string mode_text(mode_t m) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(m & 07777));
  return buf;
}

bool same_file(int fd, const std::string& path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

void set_now(int fd) {
  struct timespec now[2];
  clock_gettime(CLOCK_REALTIME, &now[0]);
  now[1] = now[0];
  futimens(fd, now);
}

// mkdir -p; directories it creates get `mode`.
bool make_dirs(const std::string& path, int mode, std::string* why) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) {
      *why = "cannot create " + cur + ": " + errno_text();
      return false;
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *why = path + " is not a directory";
    return false;
  }
  return true;
}

// Opens a file of the cache without following a symlink and without blocking
// (on a FIFO). -1 with errno set: EINVAL when something other than a regular
// file is there, ENOENT when nothing is.
int open_regular(const std::string& path, int flags, int mode = 0) {
  int fd = open(path.c_str(), flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENXIO || errno == EISDIR) errno = EINVAL;
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

std::string file_type(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return "unreadable";
  if (S_ISLNK(st.st_mode)) return "a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "a FIFO";
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "a device";
  return "not a regular file";
}

// Removes what is at `path` when it is not a regular file (never a
// directory's contents).
void remove_odd_file(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return;
  if (S_ISDIR(st.st_mode)) {
    rmdir(path.c_str());
  } else {
    unlink(path.c_str());
  }
}

// Removes a lock file only if no one holds it; lockers re-check the inode
// after locking, so one that opened the removed file tries again.
void remove_lock_file(const std::string& path) {
  int fd = open_regular(path, O_RDWR);
  if (fd < 0) {
    if (errno == EINVAL) remove_odd_file(path);
    return;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) == 0 && same_file(fd, path)) unlink(path.c_str());
  close(fd);
}

// The process id a lock holder wrote into its lock file, or "".
std::string read_holder(int fd) {
  char buf[24] = {};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos ? s : "";
}

bool write_all(int fd, const std::string& bytes) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
}

bool read_all(int fd, std::string* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  out->resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < out->size()) {
    ssize_t n = read(fd, &(*out)[got], out->size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return true;
}

// An ancestor may be shared (like /tmp: sticky) but not open to renames by
// others, and must belong to the user or root.
std::string unsafe_ancestor(const std::string& p, uid_t uid) {
  struct stat st;
  if (stat(p.c_str(), &st) != 0) return "cannot stat " + p + ": " + errno_text();
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    return p + " is writable by other users without the sticky bit (mode " + mode_text(st.st_mode) + ")";
  if (st.st_uid != uid && st.st_uid != 0) return p + " is owned by uid " + std::to_string(st.st_uid);
  return "";
}

}  // namespace

// ------------------------------------------------------------------ KeyLock

DiskTier::KeyLock& DiskTier::KeyLock::operator=(KeyLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

DiskTier::KeyLock::~KeyLock() { release(); }

void DiskTier::KeyLock::release() {
  if (fd_ < 0) return;
  (void)!ftruncate(fd_, 0);  // the holder's pid is only there while it holds the lock
  close(fd_);  // closing the last descriptor releases the flock
  fd_ = -1;
}

// ----------------------------------------------------------------- DiskTier

DiskTier::DiskTier(std::string root, std::string fingerprint, int64_t max_bytes, bool shared,
                   const std::string& identity, std::string mac_key, bool require_key)
    : root_(std::move(root)),
      fingerprint_(std::move(fingerprint)),
      mac_key_(std::move(mac_key)),
      max_bytes_(max_bytes),
      file_mode_(shared ? 0644 : 0600),
      dir_mode_(shared ? 0755 : 0700) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) {
    reason_ = "no directory configured";
    return;
  }
  if (require_key && mac_key_.empty()) {
    reason_ = "no cache key (TORCHTPU_CACHE_KEY_FILE): entries other hosts wrote cannot be verified without one";
    return;
  }
  if (fingerprint_.empty() || fingerprint_.find('/') != std::string::npos || fingerprint_[0] == '.') {
    reason_ = "bad fingerprint '" + fingerprint_ + "'";
    return;
  }
  dir_ = root_ + "/" + fingerprint_;
  reason_ = open_dirs();
  if (!reason_.empty()) return;
  const std::string id_path = dir_ + "/identity.txt";
  if (!identity.empty() && access(id_path.c_str(), F_OK) != 0) {
    const std::string tmp = dir_ + "/" + kTmpPrefix + "identity-" + std::to_string(getpid());
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, file_mode_);
    if (fd >= 0) {
      bool ok = write_all(fd, identity + "\n");
      close(fd);
      if (!ok || rename(tmp.c_str(), id_path.c_str()) != 0) unlink(tmp.c_str());
    }
  }
  scan(false);
}

std::string DiskTier::open_dirs() {
  std::string why;
  if (!make_dirs(root_, dir_mode_, &why)) return why;
  // Vet the root and its ancestors before creating anything inside it.
  char real[PATH_MAX];
  if (realpath(root_.c_str(), real) == nullptr) return "cannot resolve " + root_ + ": " + errno_text();
  for (std::string p = real;;) {
    why = unsafe_ancestor(p, geteuid());
    if (!why.empty()) return why;
    if (p.size() <= 1) break;
    size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
  }
  if (!make_dirs(dir_, dir_mode_, &why)) return why;
  return unsafe_reason(dir_, geteuid());
}

std::string DiskTier::unsafe_reason(const std::string& dir, uid_t uid) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return "cannot stat " + dir + ": " + errno_text();
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (st.st_uid != uid)
    return dir + " is owned by uid " + std::to_string(st.st_uid) + ", not by the current user (uid " +
           std::to_string(uid) + ")";
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return dir + " is writable by other users (mode " + mode_text(st.st_mode) + ")";
  char real[PATH_MAX];
  if (realpath(dir.c_str(), real) == nullptr) return "cannot resolve " + dir + ": " + errno_text();
  std::string p = real;
  while (p.size() > 1) {
    size_t slash = p.rfind('/');
    p = slash == 0 ? "/" : p.substr(0, slash);
    std::string why = unsafe_ancestor(p, uid);
    if (!why.empty()) return why;
  }
  return "";
}

std::string DiskTier::entry_path(const ir::GraphKey& key) const { return dir_ + "/" + key.hex() + kEntrySuffix; }
std::string DiskTier::lock_path(const ir::GraphKey& key) const { return dir_ + "/" + key.hex() + kLockSuffix; }

bool DiskTier::has(const ir::GraphKey& key) const { return enabled() && access(entry_path(key).c_str(), F_OK) == 0; }

std::optional<std::string> DiskTier::load(const ir::GraphKey& key, std::string* rejected) {
  if (!enabled()) return std::nullopt;
  const std::string path = entry_path(key);
  int fd = open_regular(path, O_RDONLY);
  if (fd < 0) {
    if (errno != EINVAL) return std::nullopt;
    if (rejected != nullptr) *rejected = path + ": " + file_type(path) + ", not a regular file";
    remove_odd_file(path);
    return std::nullopt;
  }
  std::string bytes, payload, why;
  struct stat st;
  bool ok = fstat(fd, &st) == 0 && st.st_size <= kMaxEntryBytes && read_all(fd, &bytes);
  if (!ok) why = "unreadable or too large";
  try {
    ok = ok && decode_entry(bytes, key, &payload, &why, mac_key_);
  } catch (const std::exception& e) {
    ok = false;
    why = e.what();
  }
  if (ok) {
    set_now(fd);
  } else {
    // Remove it unless a writer has already renamed a new entry over it.
    if (same_file(fd, path)) unlink(path.c_str());
    if (rejected != nullptr) *rejected = path + ": " + why;
  }
  close(fd);
  if (!ok) return std::nullopt;
  return payload;
}

bool DiskTier::store(const ir::GraphKey& key, const std::string& payload, std::string* why) {
  if (!enabled()) return false;
  const std::string tmp = dir_ + "/" + kTmpPrefix + key.hex() + "-" + std::to_string(getpid()) + "-" +
                          std::to_string(tmp_counter_.fetch_add(1));
  auto fail = [&](const std::string& what) {
    if (why != nullptr) *why = what + " " + tmp + ": " + errno_text();
    unlink(tmp.c_str());
    return false;
  };
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode_);
  std::string ignored;
  if (fd < 0 && errno == ENOENT && make_dirs(dir_, dir_mode_, &ignored) &&
      unsafe_reason(dir_, geteuid()).empty())  // removed under us: made again, vetted again
    fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, file_mode_);
  if (fd < 0) return fail("cannot create");
  std::string entry;
  try {
    entry = encode_entry(key, payload, mac_key_);
  } catch (const std::exception& e) {
    close(fd);
    unlink(tmp.c_str());
    if (why != nullptr) *why = std::string("cannot sign the entry: ") + e.what();
    return false;
  }
  const bool written = write_all(fd, entry);
  set_now(fd);
  if (close(fd) != 0 || !written) return fail("cannot write");
  if (rename(tmp.c_str(), entry_path(key).c_str()) != 0) return fail("cannot rename");
  evict();
  return true;
}

void DiskTier::remove(const ir::GraphKey& key) {
  if (!enabled()) return;
  unlink(entry_path(key).c_str());
}

DiskTier::KeyLock DiskTier::lock(const ir::GraphKey& key, double timeout_s, std::string* why) {
  if (!enabled()) return KeyLock();
  const std::string path = lock_path(key);
  auto fail = [&](const std::string& what) {
    if (why != nullptr) *why = what;
    return KeyLock();
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  auto pause = std::chrono::milliseconds(1);
  bool replaced_odd_file = false;
  for (;;) {
    int fd = open_regular(path, O_RDWR | O_CREAT, file_mode_);
    if (fd < 0 && errno == EINVAL && !replaced_odd_file) {
      remove_odd_file(path);  // a link or FIFO in its place is not ours to follow
      replaced_odd_file = true;
      continue;
    }
    if (fd < 0) return fail("cannot open " + path + ": " + (errno == EINVAL ? file_type(path) : errno_text()));
    int rc;
    while ((rc = flock(fd, LOCK_EX | LOCK_NB)) != 0 && (errno == EWOULDBLOCK || errno == EINTR)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string holder = read_holder(fd);
        close(fd);
        char waited[32];
        std::snprintf(waited, sizeof waited, "%g", timeout_s);
        return fail("waited " + std::string(waited) + " s for " + path + ", held by " +
                    (holder.empty() ? std::string("another process") : "process " + holder));
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(50));
    }
    if (rc != 0) {
      const std::string err = errno_text();
      close(fd);
      return fail("cannot lock " + path + ": " + err);
    }
    if (same_file(fd, path)) {
      const std::string pid = std::to_string(getpid()) + "\n";
      if (ftruncate(fd, 0) == 0) (void)!pwrite(fd, pid.data(), pid.size(), 0);
      return KeyLock(fd);
    }
    close(fd);  // removed (by eviction or clear) while we waited: lock the new file
  }
}

int64_t DiskTier::evict() { return scan(true); }
int64_t DiskTier::usage() { return scan(false); }

int64_t DiskTier::scan(bool evict) {
  if (!enabled()) return 0;
  struct Entry {
    std::string path;
    int64_t size;
    struct timespec mtime;
  };
  std::vector<Entry> entries;
  int64_t total = 0;
  const time_t now = time(nullptr);
  DIR* root = opendir(root_.c_str());
  if (root == nullptr) return 0;
  while (struct dirent* d = readdir(root)) {
    if (!is_hex_name(d->d_name)) continue;
    const std::string sub = root_ + "/" + d->d_name;
    DIR* dir = opendir(sub.c_str());
    if (dir == nullptr) continue;
    while (struct dirent* f = readdir(dir)) {
      const std::string name = f->d_name;
      const bool entry = ends_with(name, kEntrySuffix), tmp = name.rfind(kTmpPrefix, 0) == 0;
      if (!entry && !tmp) continue;
      const std::string path = sub + "/" + name;
      struct stat st;
      if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (tmp && evict && now - st.st_mtime > kStaleTmpSeconds) {
        unlink(path.c_str());  // left by a process that died mid-write
        continue;
      }
      total += st.st_size;
      if (entry) entries.push_back({path, st.st_size, st.st_mtim});
    }
    closedir(dir);
  }
  closedir(root);
  if (evict && total > max_bytes_) {
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
      if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
      return a.path < b.path;
    });
    for (const Entry& e : entries) {
      if (total <= max_bytes_) break;
      if (unlink(e.path.c_str()) == 0 || errno == ENOENT) total -= e.size;
      remove_lock_file(e.path.substr(0, e.path.size() - std::strlen(kEntrySuffix)) + kLockSuffix);
    }
  }
  usage_.store(total);
  return total;
}

int64_t DiskTier::clear() {
  if (!enabled()) return 0;
  int64_t removed = 0;
  DIR* dir = opendir(dir_.c_str());
  if (dir == nullptr) return 0;
  std::vector<std::string> names;
  while (struct dirent* f = readdir(dir)) names.push_back(f->d_name);
  closedir(dir);
  for (const std::string& name : names) {
    const std::string path = dir_ + "/" + name;
    if (ends_with(name, kEntrySuffix)) {
      if (unlink(path.c_str()) == 0) ++removed;
    } else if (ends_with(name, kLockSuffix)) {
      remove_lock_file(path);
    }
  }
  scan(false);
  return removed;
}

}  // namespace torchtpu::cache
