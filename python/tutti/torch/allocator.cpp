// tutti.torch's CPU allocator: large CPU tensors in memory the host's other ranks can map, so
// that ordinary tensors take Tutti's single-copy path (Direct over mapped buffers) without
// anybody registering them. Installed (c10::SetAllocator) when the first "tutti" process group
// is created, unless TUTTI_TORCH_ALLOCATOR=0; tensors allocated before keep their memory.
//
// Blocks of at least `min_bytes` come from tuttiMemAllocHost (a sealed memory file, mapped
// shared; host memory even where a CUDA device is current, where ncclMemAlloc would give
// device memory);
// smaller ones from the allocator that was installed before. A freed block is kept for reuse by
// a later allocation of the same rounded size, up to `cache_bytes` in all, so a training loop
// does not pay for a memory file per step and the peers' cached mappings of its blocks stay
// valid; a block is reused only once torch freed it, so no write is ever raced or lost.
//
// fork(): the blocks are shared mappings, which a child would share with its parent (a
// DataLoader worker writing a tensor would write the parent's). So in the child, before fork()
// returns there, every block is made private: its contents copied into private pages mremap'd
// over the same addresses, as copy-on-write would have left them; fork() returns in the parent
// once the child has copied them. The child frees such blocks
// with munmap (ncclMemFree there would release the parent's file).
//
// Each block keeps its memory file's descriptor: at most half the soft RLIMIT_NOFILE (as when
// installed) of blocks exist at once. At that budget a cached block of another size is freed to
// make room; with none cached, the fallback serves.
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>

#include "nccl.h"
#include "tutti.h"

namespace tutti_torch {

namespace {

struct Block {
  size_t bytes;  // rounded size
  bool private_copy;  // made private in a child of fork(): munmap it, never ncclMemFree
};

class TuttiAllocator final : public c10::Allocator {
 public:
  TuttiAllocator(c10::Allocator* fallback, size_t min_bytes, size_t cache_bytes)
      : fallback_(fallback), min_bytes_(min_bytes), cache_bytes_(cache_bytes) {
    // Half the process's descriptors at most (the soft RLIMIT_NOFILE when installed), so that
    // a model of thousands of large tensors never leaves the program's sockets and files
    // failing with EMFILE.
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
      fd_budget_ = static_cast<size_t>(rl.rlim_cur / 2);
  }

  c10::DataPtr allocate(size_t n) const override {
    if (n >= min_bytes_) {
      void* p = take(n);
      if (p != nullptr) return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
    }
    c10::DataPtr d = fallback_->allocate(n);
    void* p = d.get();
    TORCH_CHECK(d.get_context() == p, "tutti: the CPU allocator replaced has contexts");
    d.release_context();
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  static TuttiAllocator* instance;

  // (blocks made, blocks reused, live blocks, cached bytes), for tests and benchmarks.
  std::tuple<size_t, size_t, size_t, size_t> stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {made_, reused_, blocks_.size() - cached_.size(), cached_total_};
  }

  // The parent's forking thread waits until the child has copied the blocks (a pipe's end of
  // file): what the child copies is what the blocks held at the fork, not what the parent
  // wrote meanwhile, and no block is freed under the copy (the lock stays held).
  static void fork_prepare() {
    instance->mutex_.lock();
    if (pipe2(fork_pipe, O_CLOEXEC) != 0) fork_pipe[0] = fork_pipe[1] = -1;
  }
  static void fork_parent() {
    if (fork_pipe[0] >= 0) {
      close(fork_pipe[1]);
      char c;
      while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR) {
      }
      close(fork_pipe[0]);
    }
    instance->mutex_.unlock();
  }
  // A child of fork() calls no Tutti function (docs/semantics.md, "fork()"): a lock Tutti
  // held at the fork may stay held there. Its new tensors come from the fallback.
  static void fork_child() {
    instance->privatize();
    if (fork_pipe[0] >= 0) {
      close(fork_pipe[0]);
      close(fork_pipe[1]);  // the parent's end of file: copied
    }
    instance->forked_ = true;
    instance->mutex_.unlock();
  }

 private:
  static size_t rounded(size_t n) {
    const size_t grain = 64 << 10;
    return (n + grain - 1) / grain * grain;
  }

  // A block of n bytes or more: a cached one of the same rounded size, else a new one (NULL if
  // tuttiMemAllocHost fails; the fallback serves then).
  void* take(size_t n) const {
    const size_t bytes = rounded(n);
    std::unique_lock<std::mutex> lock(mutex_);
    auto it = cached_.find(bytes);
    if (it != cached_.end()) {
      void* p = it->second;
      cached_.erase(it);
      cached_total_ -= bytes;
      reused_++;
      return p;
    }
    if (forked_) return nullptr;
    // Each block holds a descriptor (its memory file): at the budget a cached block of another
    // size, the largest, makes room; with none cached, the fallback serves.
    if (blocks_.size() >= fd_budget_) {
      if (cached_.empty()) return nullptr;
      auto victim = std::prev(cached_.end());
      void* v = victim->second;
      cached_total_ -= victim->first;
      cached_.erase(victim);
      blocks_.erase(v);
      lock.unlock();
      ncclMemFree(v);
      lock.lock();
      if (forked_ || blocks_.size() >= fd_budget_) return nullptr;
    }
    void* p = nullptr;
    if (tuttiMemAllocHost(&p, bytes) != ncclSuccess) return nullptr;
    blocks_[p] = Block{bytes, false};
    made_++;
    return p;
  }

  static void release(void* p) {
    TuttiAllocator* self = instance;
    std::unique_lock<std::mutex> lock(self->mutex_);
    auto it = self->blocks_.find(p);
    if (it == self->blocks_.end()) {
      lock.unlock();
      self->fallback_->raw_deleter()(p);
      return;
    }
    Block& b = it->second;
    if (!b.private_copy && self->cached_total_ + b.bytes <= self->cache_bytes_) {
      self->cached_.emplace(b.bytes, p);
      self->cached_total_ += b.bytes;
      return;
    }
    Block gone = b;
    self->blocks_.erase(it);
    lock.unlock();
    if (gone.private_copy) {
      munmap(p, gone.bytes);
    } else {
      ncclMemFree(p);
    }
  }

  // In a child of fork() (only the forking thread exists, the lock is held): every block gets
  // private pages holding its contents; cached blocks are unmapped.
  void privatize() {
    for (auto& kv : cached_) {
      blocks_.erase(kv.second);
      munmap(kv.second, kv.first);
    }
    cached_.clear();
    cached_total_ = 0;
    for (auto& kv : blocks_) {
      const size_t bytes = kv.second.bytes;
      void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                        0);
      if (copy == MAP_FAILED) abort();  // nothing sane is left to do in the child
      memcpy(copy, kv.first, bytes);
      if (mremap(copy, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, kv.first) == MAP_FAILED)
        abort();
      kv.second.private_copy = true;
    }
  }

  c10::Allocator* fallback_;
  size_t min_bytes_;
  size_t cache_bytes_;
  size_t fd_budget_ = SIZE_MAX;  // most blocks alive at once (each holds a descriptor)
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Block> blocks_;  // every block made, cached ones included
  mutable std::multimap<size_t, void*> cached_;      // freed blocks by rounded size
  mutable size_t cached_total_ = 0;
  mutable size_t made_ = 0, reused_ = 0;
  bool forked_ = false;  // in a child of fork(): nothing new from Tutti
  static int fork_pipe[2];  // from fork_prepare to fork_parent/fork_child (the lock held)
};

TuttiAllocator* TuttiAllocator::instance = nullptr;
int TuttiAllocator::fork_pipe[2] = {-1, -1};

}  // namespace

// Installs the allocator once (later calls change nothing); returns whether it is installed.
bool install_allocator(size_t min_bytes, size_t cache_bytes) {
  static std::mutex once;
  std::lock_guard<std::mutex> lock(once);
  if (TuttiAllocator::instance != nullptr) return true;
  c10::Allocator* fallback = c10::GetAllocator(c10::DeviceType::CPU);
  if (fallback == nullptr || fallback->raw_deleter() == nullptr) return false;
  TuttiAllocator::instance = new TuttiAllocator(fallback, min_bytes, cache_bytes);
  pthread_atfork(&TuttiAllocator::fork_prepare, &TuttiAllocator::fork_parent,
                 &TuttiAllocator::fork_child);
  c10::SetAllocator(c10::DeviceType::CPU, TuttiAllocator::instance, /* priority */ 10);
  return true;
}

// (installed, blocks made, blocks reused, live blocks, cached bytes)
std::tuple<bool, size_t, size_t, size_t, size_t> allocator_stats() {
  TuttiAllocator* a = TuttiAllocator::instance;
  if (a == nullptr) return {false, 0, 0, 0, 0};
  auto s = a->stats();
  return {true, std::get<0>(s), std::get<1>(s), std::get<2>(s), std::get<3>(s)};
}

}  // namespace tutti_torch
