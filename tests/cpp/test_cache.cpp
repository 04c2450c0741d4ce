// Compile cache units: the entry format, the disk tier (atomic store, corrupt
// entries, fingerprints, LRU eviction, unsafe directories, key locks) and the
// tiered ExecutableCache against the real plugin (one build per key across
// threads, disk hits, rebuilds).
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_entry.h"
#include "cache_test_util.h"
#include "cache/disk_tier.h"
#include "cache/executable_cache.h"
#include "pjrt/compile_options.h"
#include "pjrt/pjrt.h"

using namespace torchtpu;
using cache::DiskTier;
using cachetest::TempDir;
using cachetest::read_file;
using cachetest::write_file;

namespace {

const ir::GraphKey kKeyA{1, 2}, kKeyB{3, 4}, kKeyC{5, 6};
const std::string kFp1 = "0123456789abcdef0123456789abcdef";
const std::string kFp2 = "fedcba9876543210fedcba9876543210";

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::vector<std::string> list(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent* e = readdir(d))
    if (e->d_name[0] != '.' || std::string(e->d_name).rfind(".tmp-", 0) == 0) names.push_back(e->d_name);
  closedir(d);
  return names;
}

std::string entry(const DiskTier& t, const ir::GraphKey& k) { return t.dir() + "/" + k.hex() + ".tte"; }

// ------------------------------------------------------------ entry format

TEST(DiskEntry, RoundTrip) {
  const std::string payload = std::string("exe\0cutable", 11) + std::string(1000, 'x');
  const std::string bytes = cache::encode_entry(kKeyA, payload);
  EXPECT_EQ(bytes.size(), cache::kEntryHeaderBytes + payload.size());
  std::string out, why;
  ASSERT_TRUE(cache::decode_entry(bytes, kKeyA, &out, &why)) << why;
  EXPECT_EQ(out, payload);
}

TEST(DiskEntry, EveryTruncationAndFlippedByteIsRejected) {
  const std::string bytes = cache::encode_entry(kKeyA, std::string(200, 'p'));
  std::string out, why;
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(cache::decode_entry(bytes.substr(0, n), kKeyA, &out, &why)) << "truncated to " << n;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] ^= 0x20;
    EXPECT_FALSE(cache::decode_entry(bad, kKeyA, &out, &why)) << "byte " << i << " flipped";
  }
  EXPECT_FALSE(cache::decode_entry(bytes + "x", kKeyA, &out, &why));
  EXPECT_FALSE(cache::decode_entry(bytes, kKeyB, &out, &why));
  EXPECT_EQ(why, "holds a different key");
}

// ---------------------------------------------------------------- disk tier

TEST(DiskTier, AtomicStoreLoadRoundTrip) {
  TempDir tmp;
  DiskTier t(tmp.path() + "/root", kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  EXPECT_EQ(t.dir(), tmp.path() + "/root/" + kFp1);
  EXPECT_FALSE(t.load(kKeyA).has_value());
  const std::string payload(5000, 'e');
  ASSERT_TRUE(t.store(kKeyA, payload));
  std::optional<std::string> got = t.load(kKeyA);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload);
  // Stored as header + payload under <key>.tte, private, no temp file left.
  struct stat st;
  ASSERT_EQ(stat(entry(t, kKeyA).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, static_cast<off_t>(cache::kEntryHeaderBytes + payload.size()));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  for (const std::string& name : list(t.dir())) EXPECT_NE(name.rfind(".tmp-", 0), 0u) << name;
  // A second tier object over the same directory (another process) sees it.
  DiskTier other(tmp.path() + "/root", kFp1, 1 << 20);
  EXPECT_EQ(other.load(kKeyA).value_or(""), payload);
  EXPECT_EQ(other.usage(), st.st_size);
}

TEST(DiskTier, DirectoryRemovedWhileRunningIsMadeAgain) {
  TempDir tmp;
  DiskTier t(tmp.path() + "/root", kFp1, 1 << 20);
  ASSERT_TRUE(t.store(kKeyA, "one"));
  ASSERT_EQ(std::system(("rm -rf '" + tmp.path() + "/root'").c_str()), 0);
  EXPECT_FALSE(t.load(kKeyA).has_value());
  ASSERT_TRUE(t.store(kKeyA, "two"));
  EXPECT_EQ(t.load(kKeyA).value_or(""), "two");
  struct stat st;
  ASSERT_EQ(stat(t.dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST(DiskTier, CorruptOrTruncatedEntryIsRemovedAndRebuilt) {
  TempDir tmp;
  DiskTier t(tmp.path(), kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  const std::string payload(3000, 'z');
  ASSERT_TRUE(t.store(kKeyA, payload));
  const std::string good = read_file(entry(t, kKeyA));

  write_file(entry(t, kKeyA), good.substr(0, good.size() / 2));  // truncated
  std::string rejected;
  EXPECT_FALSE(t.load(kKeyA, &rejected).has_value());
  EXPECT_NE(rejected.find("truncated"), std::string::npos) << rejected;
  EXPECT_FALSE(exists(entry(t, kKeyA)));

  std::string flipped = good;
  flipped[cache::kEntryHeaderBytes + 10] ^= 1;  // payload bit flip
  write_file(entry(t, kKeyA), flipped);
  rejected.clear();
  EXPECT_FALSE(t.load(kKeyA, &rejected).has_value());
  EXPECT_NE(rejected.find("checksum"), std::string::npos) << rejected;
  EXPECT_FALSE(exists(entry(t, kKeyA)));

  write_file(entry(t, kKeyA), "");  // empty
  EXPECT_FALSE(t.load(kKeyA).has_value());

  ASSERT_TRUE(t.store(kKeyA, payload));
  EXPECT_EQ(t.load(kKeyA).value_or(""), payload);
}

TEST(DiskTier, NewFingerprintIgnoresOldEntries) {
  TempDir tmp;
  DiskTier old_build(tmp.path(), kFp1, 1 << 20, false, "build one");
  ASSERT_TRUE(old_build.store(kKeyA, "old executable"));
  DiskTier new_build(tmp.path(), kFp2, 1 << 20, false, "build two");
  ASSERT_TRUE(new_build.enabled()) << new_build.reason();
  EXPECT_NE(new_build.dir(), old_build.dir());
  EXPECT_FALSE(new_build.load(kKeyA).has_value());
  EXPECT_TRUE(exists(entry(old_build, kKeyA)));  // not the new build's to delete
  EXPECT_EQ(read_file(new_build.dir() + "/identity.txt"), "build two\n");
  ASSERT_TRUE(new_build.store(kKeyA, "new executable"));
  EXPECT_EQ(new_build.load(kKeyA).value_or(""), "new executable");
  EXPECT_EQ(old_build.load(kKeyA).value_or(""), "old executable");
}

TEST(DiskTier, EvictionKeepsTheCapInLruOrder) {
  TempDir tmp;
  const int64_t entry_bytes = static_cast<int64_t>(cache::kEntryHeaderBytes) + 1000;
  DiskTier t(tmp.path(), kFp1, entry_bytes * 2 + entry_bytes / 2);  // room for two
  const std::string p(1000, 'q');
  ASSERT_TRUE(t.store(kKeyA, p));
  ASSERT_TRUE(t.store(kKeyB, p));
  ASSERT_TRUE(t.load(kKeyA).has_value());  // A is now more recent than B
  ASSERT_TRUE(t.store(kKeyC, p));
  EXPECT_TRUE(t.load(kKeyA).has_value());
  EXPECT_FALSE(exists(entry(t, kKeyB)));
  EXPECT_FALSE(exists(t.dir() + "/" + kKeyB.hex() + ".lock"));
  EXPECT_TRUE(t.load(kKeyC).has_value());
  EXPECT_EQ(t.usage(), 2 * entry_bytes);

  // Another build's entries count against the same cap; being least
  // recently used, they go first.
  TempDir tmp2;
  DiskTier stale(tmp2.path(), kFp2, 1 << 20);
  DiskTier current(tmp2.path(), kFp1, entry_bytes * 2 + entry_bytes / 2);
  ASSERT_TRUE(stale.store(kKeyA, p));
  ASSERT_TRUE(current.store(kKeyB, p));
  ASSERT_TRUE(current.store(kKeyC, p));
  EXPECT_FALSE(exists(entry(stale, kKeyA)));
  EXPECT_TRUE(exists(entry(current, kKeyB)));
  EXPECT_TRUE(exists(entry(current, kKeyC)));
  EXPECT_LE(current.last_usage(), current.max_bytes());
}

TEST(DiskTier, DirectoryOthersCanWriteIsRefused) {
  TempDir tmp;
  const std::string root = tmp.path() + "/root";
  {
    DiskTier t(root, kFp1, 1 << 20);
    ASSERT_TRUE(t.enabled()) << t.reason();
    ASSERT_TRUE(t.store(kKeyA, "native code"));
  }
  const std::string fp_dir = root + "/" + kFp1;
  ASSERT_EQ(chmod(fp_dir.c_str(), 0777), 0);
  {
    DiskTier t(root, kFp1, 1 << 20);
    EXPECT_FALSE(t.enabled());
    EXPECT_NE(t.reason().find("writable by other users"), std::string::npos) << t.reason();
    EXPECT_FALSE(t.load(kKeyA).has_value());
    EXPECT_FALSE(t.store(kKeyB, "x"));
  }
  ASSERT_EQ(chmod(fp_dir.c_str(), 0770), 0);  // group-writable
  EXPECT_FALSE(DiskTier(root, kFp1, 1 << 20).enabled());
  ASSERT_EQ(chmod(fp_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(root.c_str(), 0777), 0);  // a parent others may rename things in
  {
    DiskTier t(root, kFp1, 1 << 20);
    EXPECT_FALSE(t.enabled());
    EXPECT_NE(t.reason().find("without the sticky bit"), std::string::npos) << t.reason();
  }
  ASSERT_EQ(chmod(root.c_str(), 01777), 0);  // sticky, like /tmp: others cannot touch our dir
  EXPECT_TRUE(DiskTier(root, kFp1, 1 << 20).enabled());
  ASSERT_EQ(chmod(root.c_str(), 0700), 0);
  DiskTier ok(root, kFp1, 1 << 20);
  ASSERT_TRUE(ok.enabled()) << ok.reason();
  EXPECT_EQ(ok.load(kKeyA).value_or(""), "native code");
  // Owned by someone else.
  const std::string why = DiskTier::unsafe_reason(fp_dir, geteuid() + 1);
  EXPECT_NE(why.find("not by the current user"), std::string::npos) << why;
  EXPECT_EQ(DiskTier::unsafe_reason(fp_dir, geteuid()), "");
}

TEST(DiskTier, KeyLockExcludesOtherProcessesAndThreads) {
  TempDir tmp;
  DiskTier t(tmp.path(), kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  // The child takes the lock the way DiskTier::lock does, with raw calls only
  // (it is forked from a threaded process).
  const std::string lock_file = t.dir() + "/" + kKeyA.hex() + ".lock";
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pid_t child = fork();
  if (child == 0) {
    int fd = open(lock_file.c_str(), O_RDWR | O_CREAT, 0600);
    char c = fd >= 0 && flock(fd, LOCK_EX) == 0 ? 'L' : 'F';
    (void)!write(pipefd[1], &c, 1);
    usleep(300 * 1000);
    _exit(0);  // the lock dies with the process
  }
  char c = 0;
  ASSERT_EQ(read(pipefd[0], &c, 1), 1);
  ASSERT_EQ(c, 'L');
  auto t0 = std::chrono::steady_clock::now();
  {
    DiskTier::KeyLock held = t.lock(kKeyA, 60);
    EXPECT_TRUE(held.held());
    EXPECT_GT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
    // A held lock file survives clear(); another key's lock is independent.
    EXPECT_EQ(t.clear(), 0);
    EXPECT_TRUE(exists(t.dir() + "/" + kKeyA.hex() + ".lock"));
    t0 = std::chrono::steady_clock::now();
    DiskTier::KeyLock other = t.lock(kKeyB, 60);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));

    std::atomic<bool> got{false};
    std::thread waiter([&] {
      DiskTier::KeyLock again = t.lock(kKeyA, 60);
      got = again.held();
    });
    usleep(100 * 1000);
    EXPECT_FALSE(got.load());
    held = DiskTier::KeyLock();  // release
    waiter.join();
    EXPECT_TRUE(got.load());
  }
  int status = 0;
  waitpid(child, &status, 0);
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(DiskTier, KeyLockWaitIsBounded) {
  TempDir tmp;
  DiskTier t(tmp.path(), kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  DiskTier::KeyLock held = t.lock(kKeyA, 60);  // a holder that never lets go
  ASSERT_TRUE(held.held());
  auto t0 = std::chrono::steady_clock::now();
  std::string why;
  DiskTier::KeyLock late = t.lock(kKeyA, 0.2, &why);
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_FALSE(late.held());
  EXPECT_GE(waited, std::chrono::milliseconds(200));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_NE(why.find("waited 0.2 s"), std::string::npos) << why;
  EXPECT_NE(why.find("held by process " + std::to_string(getpid())), std::string::npos) << why;
  held = DiskTier::KeyLock();
  EXPECT_TRUE(t.lock(kKeyA, 0).held());  // free again: no wait needed
}

// Runs `body` on a thread; if it has not finished after 20 s (blocked on
// `fifo`), opens the FIFO for writing to release it and fails.
template <typename F>
bool finishes_despite_fifo(const std::string& fifo, F body) {
  std::future<bool> done = std::async(std::launch::async, body);
  if (done.wait_for(std::chrono::seconds(20)) == std::future_status::ready) return done.get();
  int w = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  done.wait();
  if (w >= 0) close(w);
  ADD_FAILURE() << "blocked on the FIFO " << fifo;
  return false;
}

TEST(DiskTier, EntryThatIsAFifoOrSymlinkIsRejectedWithoutBlocking) {
  TempDir tmp;
  DiskTier t(tmp.path(), kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  const std::string fifo = t.dir() + "/" + kKeyA.hex() + ".tte";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string rejected;
  EXPECT_TRUE(finishes_despite_fifo(fifo, [&] { return !t.load(kKeyA, &rejected).has_value(); }));
  EXPECT_NE(rejected.find("a FIFO"), std::string::npos) << rejected;
  EXPECT_FALSE(exists(fifo));  // removed, so a store can put an entry there
  ASSERT_TRUE(t.store(kKeyA, "payload"));
  EXPECT_EQ(t.load(kKeyA).value_or(""), "payload");

  // A symlink to a valid entry elsewhere is not followed (nor its target removed).
  DiskTier other(tmp.path() + "/other", kFp1, 1 << 20);
  ASSERT_TRUE(other.store(kKeyB, "elsewhere"));
  const std::string target = other.dir() + "/" + kKeyB.hex() + ".tte";
  const std::string link = t.dir() + "/" + kKeyB.hex() + ".tte";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  rejected.clear();
  EXPECT_FALSE(t.load(kKeyB, &rejected).has_value());
  EXPECT_NE(rejected.find("a symbolic link"), std::string::npos) << rejected;
  struct stat st;
  EXPECT_NE(lstat(link.c_str(), &st), 0);
  EXPECT_EQ(other.load(kKeyB).value_or(""), "elsewhere");
}

TEST(DiskTier, LockFileSymlinkIsNotFollowed) {
  TempDir tmp;
  DiskTier t(tmp.path() + "/c", kFp1, 1 << 20);
  ASSERT_TRUE(t.enabled()) << t.reason();
  const std::string outside = tmp.path() + "/outside-target";
  const std::string link = t.dir() + "/" + kKeyA.hex() + ".lock";
  ASSERT_EQ(symlink(outside.c_str(), link.c_str()), 0);
  DiskTier::KeyLock held = t.lock(kKeyA, 5);
  EXPECT_TRUE(held.held());
  EXPECT_FALSE(exists(outside));  // no file was created through the link
  struct stat st;
  ASSERT_EQ(lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));  // a plain lock file replaced the link
  held = DiskTier::KeyLock();

  // A FIFO in place of the lock file neither blocks nor is used.
  const std::string fifo_lock = t.dir() + "/" + kKeyB.hex() + ".lock";
  ASSERT_EQ(mkfifo(fifo_lock.c_str(), 0600), 0);
  EXPECT_TRUE(finishes_despite_fifo(fifo_lock, [&] { return t.lock(kKeyB, 5).held(); }));
  ASSERT_EQ(lstat(fifo_lock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(DiskTier, ClearRemovesOnlyThisFingerprint) {
  TempDir tmp;
  DiskTier a(tmp.path(), kFp1, 1 << 20), b(tmp.path(), kFp2, 1 << 20);
  ASSERT_TRUE(a.store(kKeyA, "a1"));
  ASSERT_TRUE(a.store(kKeyB, "a2"));
  ASSERT_TRUE(b.store(kKeyA, "b1"));
  EXPECT_EQ(a.clear(), 2);
  EXPECT_FALSE(a.load(kKeyA).has_value());
  EXPECT_FALSE(a.load(kKeyB).has_value());
  EXPECT_EQ(b.load(kKeyA).value_or(""), "b1");
}

// ------------------------------------------------- tiered executable cache

const char* kAdd = R"(module @m {
  func.func public @main(%arg0: tensor<2x3xf32>, %arg1: tensor<2x3xf32>) -> (tensor<2x3xf32>) {
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    "func.return"(%0) : (tensor<2x3xf32>) -> ()
  }
}
)";

std::string plugin_path() {
  const char* env = std::getenv("TORCHTPU_PJRT_PLUGIN");
  if (env != nullptr && *env != '\0') return env;
#ifdef TORCHTPU_TEST_PLUGIN_PATH
  return TORCHTPU_TEST_PLUGIN_PATH;
#else
  return "";
#endif
}

class TieredCache : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    try {
      client_ = pjrt::Client::create(pjrt::Plugin::load(plugin_path()), 1).release();
    } catch (const std::exception& e) {
      setup_error_ = std::string("cannot create a PJRT client from '") + plugin_path() + "': " + e.what();
    }
  }
  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  // A compile function that counts its calls.
  cache::ExecutableCache::Compile compiler(int delay_ms = 0) {
    return [this, delay_ms] {
      ++compiles_;
      if (delay_ms) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      return client_->compile(kAdd, options());
    };
  }
  static std::string options() { return pjrt::CompileOptions().encode(); }
  static void configure(cache::ExecutableCache& c, const std::string& local, const std::string& shared = "") {
    cache::DiskConfig cfg;
    cfg.local_dir = local;
    cfg.shared_dir = shared;
    cfg.shared_key = "the tests' shared tier key";  // the shared tier is off without one
    cfg.fingerprint = kFp1;
    c.configure_disk(cfg, [](const std::string& blob) { return client_->deserialize(blob, options()); });
  }
  static std::vector<float> run(const pjrt::Executable& exe) {
    std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {10, 20, 30, 40, 50, 60};
    auto ba = client_->buffer_from_host(a.data(), pjrt::ElementType::kF32, {2, 3}, 0);
    auto bb = client_->buffer_from_host(b.data(), pjrt::ElementType::kF32, {2, 3}, 0);
    pjrt::ExecuteResult r = exe.execute({ba.get(), bb.get()}, 0);
    std::vector<float> out(6);
    r.outputs[0]->to_host(out.data(), 24);
    return out;
  }
  const std::vector<float> kSum = {11, 22, 33, 44, 55, 66};

  std::atomic<int> compiles_{0};
  static pjrt::Client* client_;
  static std::string setup_error_;
};
pjrt::Client* TieredCache::client_ = nullptr;
std::string TieredCache::setup_error_;

TEST_F(TieredCache, ThreadsMissingTheSameKeyCompileOnce) {
  TempDir tmp;
  for (bool with_disk : {false, true}) {
    cache::ExecutableCache c;
    if (with_disk) configure(c, tmp.path());
    compiles_ = 0;
    std::vector<std::thread> threads;
    std::vector<pjrt::ExecutablePtr> got(8);
    std::atomic<int> hits{0};
    for (int i = 0; i < 8; ++i)
      threads.emplace_back([&, i] {
        bool hit = false;
        got[i] = c.get_or_compile(kKeyA, compiler(200), &hit);
        hits += hit;
      });
    for (auto& th : threads) th.join();
    EXPECT_EQ(compiles_.load(), 1) << "with_disk=" << with_disk;
    EXPECT_EQ(hits.load(), 7);
    for (const auto& e : got) EXPECT_EQ(e, got[0]);
    cache::CacheStats s = c.stats();
    EXPECT_EQ(s.requests, 8);
    EXPECT_EQ(s.misses, 1);
    EXPECT_EQ(s.memory_hits, 7);
    EXPECT_EQ(s.hits, 7);
    EXPECT_GT(s.compile_seconds, 0.15);
    EXPECT_EQ(run(*got[0]), kSum);
  }
}

TEST_F(TieredCache, CompileErrorReachesWaitersAndIsNotCached) {
  cache::ExecutableCache c;
  auto failing = [this] {
    ++compiles_;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return client_->compile("not stablehlo", options());
  };
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      bool hit;
      try {
        c.get_or_compile(kKeyA, failing, &hit);
      } catch (const pjrt::Error&) {
        ++errors;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 4);
  EXPECT_EQ(compiles_.load(), 1);
  EXPECT_EQ(c.size(), 0u);
  bool hit = true;
  EXPECT_EQ(run(*c.get_or_compile(kKeyA, compiler(), &hit)), kSum);
  EXPECT_FALSE(hit);
  EXPECT_EQ(compiles_.load(), 2);
}

TEST_F(TieredCache, LocalTierServesANewProcessAndRebuildsCorruptEntries) {
  TempDir tmp;
  {
    cache::ExecutableCache first;
    configure(first, tmp.path());
    bool hit = true;
    first.get_or_compile(kKeyA, compiler(), &hit);
    EXPECT_FALSE(hit);
    EXPECT_GT(first.stats().local_bytes, 0);
  }
  EXPECT_EQ(compiles_.load(), 1);
  {
    cache::ExecutableCache second;  // a fresh memory tier: another process
    configure(second, tmp.path());
    bool hit = false;
    cache::Source from = cache::Source::kCompiled;
    pjrt::ExecutablePtr exe = second.get_or_compile(kKeyA, compiler(), &hit, &from);
    EXPECT_TRUE(hit);
    EXPECT_EQ(from, cache::Source::kLocal);
    EXPECT_EQ(compiles_.load(), 1);
    EXPECT_EQ(second.stats().local_hits, 1);
    EXPECT_EQ(run(*exe), kSum);
    second.get_or_compile(kKeyA, compiler(), &hit, &from);
    EXPECT_EQ(from, cache::Source::kMemory);
  }
  const std::string path = tmp.path() + "/" + kFp1 + "/" + kKeyA.hex() + ".tte";
  const std::string good = read_file(path);
  const std::string truncated = good.substr(0, good.size() - 7);
  // Intact header and checksum, but a payload the plugin cannot load.
  const std::string refused = cache::encode_entry(kKeyA, "definitely not an executable");
  for (const std::string& bad : {truncated, refused}) {
    write_file(path, bad);
    cache::ExecutableCache c;
    configure(c, tmp.path());
    bool hit = true;
    const int before = compiles_.load();
    EXPECT_EQ(run(*c.get_or_compile(kKeyA, compiler(), &hit)), kSum);
    EXPECT_FALSE(hit);
    EXPECT_EQ(compiles_.load(), before + 1);
    EXPECT_EQ(c.stats().corrupt_entries, 1);
    std::string payload, why;
    EXPECT_TRUE(cache::decode_entry(read_file(path), kKeyA, &payload, &why)) << why;  // rewritten
  }
}

TEST_F(TieredCache, SharedTierHitIsCopiedToTheLocalTier) {
  TempDir local1, local2, shared;
  {
    cache::ExecutableCache host1;
    configure(host1, local1.path(), shared.path());
    bool hit;
    host1.get_or_compile(kKeyA, compiler(), &hit);
    EXPECT_GT(host1.stats().shared_bytes, 0);
  }
  cache::ExecutableCache host2;
  configure(host2, local2.path(), shared.path());
  bool hit = false;
  cache::Source from = cache::Source::kCompiled;
  EXPECT_EQ(run(*host2.get_or_compile(kKeyA, compiler(), &hit, &from)), kSum);
  EXPECT_EQ(from, cache::Source::kShared);
  EXPECT_EQ(compiles_.load(), 1);
  EXPECT_EQ(host2.stats().shared_hits, 1);
  EXPECT_TRUE(exists(local2.path() + "/" + kFp1 + "/" + kKeyA.hex() + ".tte"));
  EXPECT_EQ(host2.clear_disk(true, false), 1);
  EXPECT_FALSE(exists(local2.path() + "/" + kFp1 + "/" + kKeyA.hex() + ".tte"));
  EXPECT_TRUE(exists(shared.path() + "/" + kFp1 + "/" + kKeyA.hex() + ".tte"));
}

}  // namespace
