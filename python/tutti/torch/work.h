// tutti.torch's C++ shim: a c10d Work over a Tutti operation (WorkTutti), what it holds until the
// operation completes (Pending) and why its group was revoked (RevokeNote). backend.cpp's
// header comment says how Works complete and where the GIL is taken.
#pragma once

#include "shim.h"

namespace tutti_torch {

// The type of a Work's future's value, made once (ListType::create allocates).
inline const c10::TypePtr& tensor_list_type() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

// Why the group's communicator was revoked, shared by the group and its Works: an operation
// that failed afterwards reports this instead of the revocation's own error.
struct RevokeNote {
  std::mutex mutex;
  std::string text;
  // The tensors of the group's failed operations, kept while the group lives: a late peer
  // that still finds this rank's addresses posted (single-copy Direct writes into them) must
  // not write into memory that went back to the allocator, or to another tensor.
  std::vector<at::Tensor> failed_keep;

  void keep_failed(std::vector<at::Tensor>&& tensors) {
    std::lock_guard<std::mutex> lock(mutex);
    for (at::Tensor& t : tensors) failed_keep.push_back(std::move(t));
    tensors.clear();
  }

  void set(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (text.empty()) text = why;
  }
  std::string get() {
    std::lock_guard<std::mutex> lock(mutex);
    return text;
  }
};

// What an operation needs once it is issued: the tensors it reads and writes (kept alive until
// it completes), the outputs its future holds, the copies of inputs to make when its turn on
// the stream comes (`before`: issue() runs them once the operations queued ahead of it on its
// stream, which may write those inputs, are done) and the copies to run when it completes.
struct Pending {
  std::vector<at::Tensor> keep;
  std::vector<at::Tensor> outputs;
  std::vector<std::function<void()>> before;
  std::vector<at::Tensor> reads;  // the tensors `before` reads
  std::vector<std::function<void()>> after;

  // A contiguous tensor standing for `t`: t itself when it is contiguous, else a copy (of its
  // contents when `input`, made by issue()), copied back into t when the operation completes
  // when `output`. An output whose elements share memory (an expand()ed tensor) is refused
  // before anything runs: the copy back could not write it. The copies are not autograd's
  // business (a leaf that requires grad would refuse them); the copy back may run on the
  // completion thread.
  at::Tensor stage(const at::Tensor& t, bool input, bool output) {
    TORCH_CHECK(!output || at::has_internal_overlap(t) != at::MemOverlap::Yes,
                "tutti: an output tensor has elements that share memory (expand()ed?); "
                "pass one whose elements are distinct");
    keep.push_back(t);
    if (t.is_contiguous()) return t;
    at::Tensor c = at::empty_like(t, at::MemoryFormat::Contiguous);
    keep.push_back(c);
    if (input) {
      reads.push_back(t);
      at::Tensor src = t;
      before.push_back([src, c]() mutable {
        at::NoGradGuard no_grad;
        c.copy_(src);
      });
    }
    if (output) {
      at::Tensor dst = t;
      after.push_back([dst, c]() mutable {
        at::NoGradGuard no_grad;
        dst.copy_(c);
      });
    }
    return c;
  }

  // One contiguous tensor to hold the list's tensors, each shaped like `like`, end to end;
  // issue() fills it when the operation's turn comes (Pending::before).
  at::Tensor concatenated(const std::vector<at::Tensor>& list, const at::Tensor& like,
                          const char* what, bool equal_sizes = true) {
    int64_t total = 0;
    for (const at::Tensor& t : list) {
      check_cpu(t, what);
      same_type(t, like, what);
      TORCH_CHECK(!equal_sizes || t.numel() == like.numel(), "tutti: ", what, ": every tensor "
                  "of the list must have the output's ", like.numel(), " elements (got ",
                  t.numel(), ")");
      total += t.numel();
    }
    at::Tensor flat = at::empty({total}, like.options());
    std::vector<at::Tensor> ins = list;
    reads.insert(reads.end(), list.begin(), list.end());
    before.push_back([ins, flat]() mutable {
      at::NoGradGuard no_grad;
      int64_t off = 0;
      for (const at::Tensor& t : ins) {
        flat.narrow(0, off, t.numel()).view(t.sizes()).copy_(t);
        off += t.numel();
      }
    });
    keep.push_back(flat);
    return flat;
  }

  // Copies block r of `flat` into list[r] when the operation completes.
  void split_into(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
    std::vector<at::Tensor> outs = list;
    at::Tensor src = flat;
    after.push_back([outs, src]() mutable {
      at::NoGradGuard no_grad;  // as stage(): outputs may be leaves that require grad
      int64_t off = 0;
      for (at::Tensor& o : outs) {
        o.copy_(src.narrow(0, off, o.numel()).view(o.sizes()));
        off += o.numel();
      }
    });
  }
};

class WorkTutti : public c10d::Work {
 public:
  // An inline Work (run on the caller's thread, complete when issue() returns) has no event:
  // complete_inline() gives it its result.
  WorkTutti(int rank, c10d::OpType type, uint64_t seq, Pending pending, Clock::time_point deadline,
            std::shared_ptr<RevokeNote> note, bool inline_run)
      : c10d::Work(rank, type),
        type_(type),
        seq_(seq),
        pending_(std::move(pending)),
        deadline_(deadline),
        note_(std::move(note)),
        future_(c10::make_intrusive<c10::ivalue::Future>(tensor_list_type())),
        copies_back_(!pending_.after.empty()) {
    if (!inline_run) check(tuttiEventCreate(&event_), "tuttiEventCreate");
  }

  ~WorkTutti() override {
    // A child of fork() must not call Tutti: a Work it inherited leaves its event alone.
    if (event_ == nullptr || getpid() != pid_) return;
    if (!done_.load(std::memory_order_acquire)) tuttiEventSynchronize(event_);
    tuttiEventDestroy(event_);
  }

  tuttiEvent_t event() const { return event_; }
  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t stream) { stream_ = stream; }

  bool isCompleted() override {
    if (!done_.load(std::memory_order_acquire) && event_ != nullptr &&
        tuttiEventQuery(event_) != ncclInProgress)
      complete();
    return future_->completed();
  }

  bool isSuccess() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
  }

  // Waits for the operation (forever, or at most `timeout`) and raises its error. A timeout
  // given here only ends this wait; the group's own timeout fails the operation itself.
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout != kNoTimeout && event_ != nullptr) {
      const Clock::time_point until = Clock::now() + timeout;
      std::chrono::microseconds nap(10);
      while (tuttiEventQuery(event_) == ncclInProgress) {
        TORCH_CHECK(Clock::now() < until, "tutti: ", op_name(type_), " (operation ", seq_,
                    " of this process group) did not complete within ", timeout.count(),
                    " ms");
        std::this_thread::sleep_for(nap);
        nap = std::min(nap * 2, std::chrono::microseconds(1000));
      }
    }
    complete();
    std::lock_guard<std::mutex> lock(mutex_);
    if (exception_) std::rethrow_exception(exception_);
    return true;
  }

  std::vector<at::Tensor> result() override { return pending_.outputs; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  // Ends the operation once: waits for its event, runs its copies, completes the Work and its
  // future with the outputs or the error. Safe from any thread; the first caller does it, and
  // the others return only once the future is complete too (wait() followed by
  // get_future().value() must find it so). The future's callbacks and the release of the
  // tensors the operation held (either may take the GIL) come after the lock, so a thread
  // holding the GIL may wait for the lock; the future is marked complete before its callbacks
  // run, so the others' wait never waits for a callback.
  void complete() {
    Pending held;
    std::exception_ptr error;
    {
      std::unique_lock<std::mutex> lock(complete_mutex_);
      if (done_.load(std::memory_order_relaxed)) {
        lock.unlock();
        future_->wait();
        return;
      }
      ncclResult_t res = event_ != nullptr ? tuttiEventSynchronize(event_) : inline_result_;
      if (res == ncclSuccess) {
        try {
          for (auto& copy : pending_.after) copy();
        } catch (...) {
          error = std::current_exception();
        }
      } else {
        std::string why = note_->get();
        // A failed event leaves the failure's reason as this thread's last error.
        const char* last = event_ != nullptr ? ncclGetLastError(nullptr) : nullptr;
        if (why.empty() && last != nullptr && last[0] != '\0')
          why = std::string(ncclGetErrorString(res)) + ": " + last;
        if (why.empty() && !inline_error_.empty())
          why = std::string(ncclGetErrorString(res)) + ": " + inline_error_;
        if (why.empty())
          why = std::string(ncclGetErrorString(res)) +
                " (Tutti's WARN line on stderr names the rank and the reason)";
        error = std::make_exception_ptr(std::runtime_error(
            std::string("tutti: ") + op_name(type_) + " (operation " + std::to_string(seq_) +
            " of this process group) failed: " + why));
      }
      {
        std::lock_guard<std::mutex> held_lock(held_mutex_);
        std::swap(held.after, pending_.after);
        std::swap(held.keep, pending_.keep);
        done_.store(true, std::memory_order_release);
      }
      if (counted_in_) counted_in_->fetch_sub(1, std::memory_order_acq_rel);
      // Not for a mismatch of arguments, which every rank finds before any writes.
      if (res != ncclSuccess && res != ncclInvalidUsage && res != ncclInvalidArgument)
        note_->keep_failed(std::move(held.keep));
      finish(error);
    }
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(pending_.outputs));
    }
  }

  // Ends an inline Work with the result of its blocking call, on the thread that made it (so
  // ncclGetLastError still holds the call's message).
  void complete_inline(ncclResult_t res) {
    inline_result_ = res;
    if (res != ncclSuccess) {
      const char* last = ncclGetLastError(nullptr);
      if (last != nullptr) inline_error_ = last;
    }
    complete();
  }

  bool done() const { return done_.load(std::memory_order_acquire); }
  bool copies_back() const { return copies_back_; }

  // Counts it in `pending` until its copies back have run (complete()).
  void count_in(const std::shared_ptr<std::atomic<int64_t>>& pending) {
    std::lock_guard<std::mutex> lock(complete_mutex_);
    if (done()) return;
    pending->fetch_add(1, std::memory_order_acq_rel);
    counted_in_ = pending;
  }

  // Whether it is not complete yet and holds a tensor whose bytes overlap one of `tensors`.
  // Under held_mutex_, not complete_mutex_, which complete() holds while it waits.
  bool touches(const std::vector<at::Tensor>& tensors) {
    if (tensors.empty() || done()) return false;
    std::lock_guard<std::mutex> lock(held_mutex_);
    if (done()) return false;
    for (const std::vector<at::Tensor>* held : {&pending_.keep, &pending_.outputs})
      for (const at::Tensor& a : *held)
        for (const at::Tensor& b : tensors)
          if (overlap(a, b)) return true;
    return false;
  }
  Clock::time_point deadline() const { return deadline_; }
  uint64_t seq() const { return seq_; }

 private:
  c10d::OpType type_;
  uint64_t seq_;
  Pending pending_;
  Clock::time_point deadline_;
  std::shared_ptr<RevokeNote> note_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  tuttiEvent_t event_ = nullptr;
  cudaStream_t stream_ = nullptr;  // the stream its event was recorded on
  ncclResult_t inline_result_ = ncclSuccess;
  std::string inline_error_;
  std::mutex complete_mutex_;
  std::mutex held_mutex_;  // pending_.keep's and .outputs' readers (touches) against complete()
  std::atomic<bool> done_{false};
  bool copies_back_;
  const pid_t pid_ = getpid();  // the process that made it
  std::shared_ptr<std::atomic<int64_t>> counted_in_;  // count_in()
};

}  // namespace tutti_torch
