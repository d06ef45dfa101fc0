// tutti.torch's C++ shim: a c10d process group for PyTorch 1.13 (Debian's python3-torch, CXX11
// ABI) whose operations are Tutti's. The first rank makes a unique id and publishes it in the
// c10d store the group was created with; every rank then joins with ncclCommInitRank.
//
// A small collective with nothing queued ahead of it runs inline: on the calling thread, as a
// blocking call, and its Work is complete when returned (ProcessGroupTutti::issue says when
// and why). Every other operation is issued on a Tutti host stream and returns at once with a
// Work backed by a per-operation event (tuttiEventRecord): collectives go on one stream in
// issue order, sends and receives on one stream per peer and direction, so an isend/irecv pair
// between two ranks never waits on itself. A Work completes when its event does: Work::wait()
// synchronizes the event on the caller's thread (which drives Tutti's engine meanwhile), and a
// completion thread sleeps on the pending events (tuttiEventWait) so that futures (what
// DistributedDataParallel waits on) complete without anybody calling wait(). Copies into
// staging buffers (tensor lists, non-contiguous inputs) are made at issue, once the queued
// operations holding those tensors are done, and copies out of them when the operation
// completes, before its future does (ProcessGroupTutti::order_behind_queued keeps both in
// stream order). The group's timeout is enforced by the completion thread: an
// operation pending longer (inline or queued) revokes the communicator (ncclCommRevoke), which
// fails everything in flight, and its Work raises a timeout error.
//
// The GIL: a tensor made in Python whose Python object was dropped while a Work still held it
// is owned by the tensor, and releasing it takes the GIL. Any thread may hold the last
// reference to a Work (the completion thread often does) and so need the GIL, and futures'
// callbacks may be Python. Hence no thread needs the GIL while holding one of the shim's
// locks, and no thread waits for another while holding the GIL: the group's destructor,
// which Python calls with the GIL held, lets it go (GilRelease). Nor may a completion thread
// take the GIL once the interpreter is finalizing (Python ends such a thread where it stands,
// which inside a destructor is std::terminate): an atexit handler stops them all first
// (stop_completion_threads), and later completions run on the thread that asks for them.
//
// This file is the process group; work.h its Work (and what an operation holds until it
// completes), shim.h the includes and the helpers that map torch's types to Tutti's.
#include "work.h"

namespace tutti_torch {

// Whether this process issued a send or receive on any group (ProcessGroupTutti::issue).
static std::atomic<bool> point_to_point_seen{false};

class ProcessGroupTutti : public BackendBase {
 public:
  ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout, int64_t inline_bytes)
      : BackendBase(rank, size), timeout_(timeout), inline_bytes_(inline_bytes) {
    ncclUniqueId id;
    const std::string key = "tutti_unique_id";
    if (rank == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<uint8_t> raw = store->get(key);  // waits for rank 0, up to the store timeout
      TORCH_CHECK(raw.size() == sizeof(id.internal), "tutti: bad unique id in the store");
      std::copy(raw.begin(), raw.end(), id.internal);
    }
    check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
    // Point-to-point gets a communicator of its own, as ProcessGroupNCCL's does: sends and
    // receives run on streams of their own, so they may be issued in another order than the
    // collectives, and on one communicator an irecv posted before an all_to_all (whose blocks
    // are sends and receives across hosts, matched in issue order) would take its block.
    ncclResult_t res = ncclCommSplit(comm_, 0, rank, &p2p_comm_, nullptr);
    if (res != ncclSuccess) {
      ncclCommAbort(comm_);
      fail(res, "ncclCommSplit (the point-to-point communicator)");
    }
    res = tuttiStreamCreate(&coll_stream_);
    if (res != ncclSuccess) {
      ncclCommAbort(p2p_comm_);
      ncclCommAbort(comm_);
      fail(res, "tuttiStreamCreate");
    }
    completer_ = std::thread([this] { complete_loop(); });
    std::lock_guard<std::mutex> lock(live_mutex());
    live().insert(this);
  }

  ~ProcessGroupTutti() override {
    // In a child of fork() (its interpreter ending) neither the completion thread nor the
    // communicators exist, and the child must not call Tutti: everything is left as it is.
    // The thread's handle, the queued Works and the condition variable are leaked, not
    // destroyed (a joinable std::thread's destructor terminates; a Work's would wait for its
    // event; the variable's, for the parent's thread that waited on it at the fork).
    if (getpid() != pid_) {
      new std::thread(std::move(completer_));
      for (auto& work : queue_) (void)work.release();
      (void)queue_cv_.release();
      // Off the list the child's atexit handler reads, unless a parent thread held its lock
      // at the fork (it stays held here): the handler skips the parent's groups by pid anyway.
      std::unique_lock<std::mutex> lock(live_mutex(), std::try_to_lock);
      if (lock.owns_lock()) live().erase(this);
      return;
    }
    // The completion thread may need the GIL to finish (a Work's last tensor), and Python
    // destroys the group holding it.
    GilRelease unlocked;
    {
      std::lock_guard<std::mutex> lock(live_mutex());
      live().erase(this);
    }
    stop_completer();
    // What is still queued completes (or fails, if the communicator failed) before its streams
    // go, within the group's timeout as everywhere else: past an operation's deadline the
    // communicator is revoked, which fails it at once. A failed communicator is aborted, a
    // healthy one destroyed.
    for (auto& work : queue_) {
      while (timeout_.count() > 0 && !work->done() &&
             tuttiEventQuery(work->event()) == ncclInProgress) {
        if (Clock::now() > work->deadline()) {
          revoke_for_timeout(work->seq(), work->retrieveOpType());
          break;
        }
        tuttiEventWait(work->event(), 1000);
      }
      work->complete();
    }
    queue_.clear();
    for (ncclComm_t* c : {&p2p_comm_, &comm_}) {
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(*c, &async);
      if (async != ncclSuccess && async != ncclInProgress) {
        ncclCommAbort(*c);
        *c = nullptr;
      }
    }
    for (auto& kv : p2p_streams_) tuttiStreamDestroy(kv.second);
    if (coll_stream_ != nullptr) tuttiStreamDestroy(coll_stream_);
    if (p2p_comm_ != nullptr) ncclCommDestroy(p2p_comm_);
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "tutti"; }

  // torch's _set/_get_sequence_number_for_group: the collectives issued on the group so far,
  // equal on every rank of a group in step (point-to-point is not counted: it differs between
  // ranks). Every group starts at 0, so there is nothing to agree on, as with ProcessGroupNCCL.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override {
    return coll_seq_.load(std::memory_order_relaxed);
  }

  // Stops every group's completion thread (an atexit handler calls it, before the interpreter
  // finalizes). The groups stay usable: Work::wait() and the destructor complete what is left.
  // A child of fork() inherits the list but none of the threads: it skips its parent's groups
  // (joining a thread that is not there would wait forever).
  // It does not join them holding the list's lock: a callback running on one of them may drop
  // a group's last reference, and that group's destructor takes the lock to leave the list. It
  // asks them all to stop and looks again every millisecond until each has left its loop.
  static void stop_completion_threads() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(live_mutex());
        bool stopped = true;
        for (ProcessGroupTutti* group : live()) {
          if (group->pid_ != getpid()) continue;
          group->request_stop();
          stopped = stopped && group->completer_exited_.load();
        }
        if (stopped) return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;

  // AllGather into a list of size() tensors: gathered into one contiguous buffer, copied out
  // when it completes (the list's tensors need not be adjacent in memory). Tensors of different
  // sizes, as PyTorch's NCCL backend takes them, go through tuttiAllGatherV: block q has output
  // q's size, and this rank's output must have the input's.
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& /* opts */) override;

  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /* opts */) override;

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;

  // ReduceScatter from a list of size() tensors: concatenated into one buffer first. Tensors
  // of different sizes go through tuttiReduceScatterV, block q the size of input q, which for
  // this rank must be the output's.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;

  // AlltoAll of one tensor: NCCL's AlltoAll for equal blocks, else tuttiAlltoAllV with the rows
  // each split size names (the split sizes count rows of the first dimension).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& /* opts */) override;

  // AlltoAll of tensor lists, of any sizes: one grouped send and receive per peer.
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& /* opts */) override;

  // Gather into a list of size() tensors at the root (through one contiguous buffer).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;

  // Scatter from a list of size() tensors at the root (concatenated into one buffer first).
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;

  // A one-byte AllReduce after everything issued before it on the collective stream.
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& /* opts */) override;

  // Point to point on the stream of this peer and direction: the sends to a peer match its
  // receives from this rank in issue order (tags are not matched).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int /* tag */) override;

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int /* tag */) override;

  static c10::intrusive_ptr<BackendBase> create(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int size,
                                                const std::chrono::duration<float>& timeout,
                                                int64_t inline_bytes) {
    return c10::make_intrusive<ProcessGroupTutti>(
        store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
        inline_bytes);
  }

 private:
  // Issues one operation: `launch(stream)` makes the Tutti call(s) on `stream` and returns the
  // result; an argument error raises here, with Tutti's message. Issue order is the order of
  // the calls, whatever thread makes them.
  //
  // A collective runs inline, on the calling thread with stream NULL (blocking), when nothing
  // is queued ahead of it on the collective stream and its largest tensor has at most
  // inline_bytes_ bytes: its Work is complete when returned, and no other thread is woken.
  // Handing an operation to Tutti's engine thread and the completion thread costs some tens of
  // microseconds on a loaded machine, more than a small collective takes, and a caller that
  // waits at once (dist.all_reduce without async_op) gains nothing from the hand-off; so below
  // that size the overlap that DDP wants is worth less than what it costs. Larger operations,
  // and everything behind a queued one, go on the stream and complete asynchronously (the
  // group's timeout covers both: the completion thread watches the inline one's deadline).
  // Point-to-point operations never run inline: an isend followed by an irecv on the same
  // thread would wait for a peer that waits for this rank's receive. And once the process has
  // issued one (on any group), no collective runs inline any more: a program that mixes them
  // (pipeline stages sending activations while data-parallel groups reduce gradients) may have
  // a peer wait for a send this rank issues after an asynchronous collective, which an inline
  // collective would hold back until the group's timeout.
  template <typename Launch>
  c10::intrusive_ptr<c10d::Work> issue(c10d::OpType type, cudaStream_t stream, Pending pending,
                                       Launch&& launch) {
    const bool coll = stream == coll_stream_;
    if (!coll) point_to_point_seen.store(true, std::memory_order_relaxed);
    // Stream order for what the shim copies on the host (outside the issuing lock: completing
    // a Work runs its future's callbacks, which may issue operations).
    order_behind_queued(stream, pending);
    for (auto& copy : pending.before) copy();
    pending.before.clear();
    std::unique_lock<std::mutex> lock(coll ? coll_mutex_ : p2p_mutex_);
    TORCH_CHECK(!timed_out_.load(), "tutti: ", op_name(type), ": ", note_->get());
    const uint64_t seq = ++seq_;
    if (coll) coll_seq_.fetch_add(1, std::memory_order_relaxed);
    const Clock::time_point deadline = Clock::now() + timeout_;
    const bool coalescing = coalescing_here();
    if (coll && !coalescing && runs_inline(pending)) {
      auto work = c10::make_intrusive<WorkTutti>(getRank(), type, seq, std::move(pending),
                                                 deadline, note_, true);
      inline_seq_.store(seq, std::memory_order_relaxed);
      inline_type_.store(static_cast<int>(type), std::memory_order_relaxed);
      inline_deadline_.store(deadline.time_since_epoch().count(), std::memory_order_release);
      ncclResult_t res = launch(nullptr);
      inline_deadline_.store(0, std::memory_order_release);
      lock.unlock();
      // As on the stream, an argument Tutti refuses raises at the call; anything else (a peer
      // that passed other arguments, a revocation) is the Work's error, raised by wait().
      if (res == ncclInvalidArgument) fail(res, op_name(type));
      work->complete_inline(res);
      return work;
    }
    auto work = c10::make_intrusive<WorkTutti>(getRank(), type, seq, std::move(pending),
                                               deadline, note_, false);
    ncclResult_t res = launch(stream);
    if (res != ncclSuccess) fail(res, op_name(type));
    if (coalescing) {
      coalesced_.push_back({work, coll ? comm_ : p2p_comm_, stream});
      return work;
    }
    enqueue(work, coll ? comm_ : p2p_comm_, stream);
    lock.unlock();
    // A collective issued by a future's callback on this group's completion thread, which
    // alone completes the group's futures: the callback may wait on it (PowerSGD's hook does),
    // so it is completed here, driving the stream, before the callback gets it. Not a send or
    // receive, which may need this rank's next call (a receive) to complete.
    if (coll && completing_for() == this) work->complete();
    return work;
  }

  // The group whose completion thread this is (nullptr on other threads).
  static ProcessGroupTutti*& completing_for() {
    static thread_local ProcessGroupTutti* group = nullptr;
    return group;
  }

  // Records the Work's event behind its operation on `stream` and hands it to the completion
  // thread.
  void enqueue(const c10::intrusive_ptr<WorkTutti>& work, ncclComm_t comm, cudaStream_t stream) {
    ncclResult_t recorded = tuttiEventRecord(work->event(), comm, stream);
    // Without its event the Work could not wait for the operation when it goes: the stream
    // is waited for here, before the error frees the tensors the operation still uses.
    if (recorded != ncclSuccess) tuttiStreamSynchronize(stream);
    check(recorded, "tuttiEventRecord");
    work->set_stream(stream);
    bool wake;
    {
      std::lock_guard<std::mutex> q(queue_mutex_);
      wake = queue_.empty();
      queue_.push_back(work);
    }
    if (wake) queue_cv_->notify_one();
    if (work->copies_back()) work->count_in(copies_pending_);
  }

  // batch_isend_irecv (torch's coalescing manager): what the calling thread issues between
  // startCoalescing and endCoalescing is one Tutti group, so its peers are met all at once (a
  // ring of first contacts, each rank sending before it receives, would otherwise wait for
  // itself until TUTTI_TIMEOUT_MS). Their events are recorded, and the Works queued, at the
  // group's end; a failed group ran none of them, and its Works are dropped with the error.
  bool coalescing_here() const {
    return coalescing_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }

  void startCoalescing() override {
    std::thread::id none;
    TORCH_CHECK(coalescing_thread_.compare_exchange_strong(none, std::this_thread::get_id()),
                "tutti: startCoalescing while this process group coalesces already");
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) {
      coalescing_thread_.store(std::thread::id());
      fail(res, "ncclGroupStart");
    }
    coalesce_failed_ = false;
  }

  // An operation that raised while coalescing (CoalesceGuard) fails the whole batch: the group
  // ends without running any of it (ncclGroupSimulateEnd), as C does when a call inside a group
  // fails, and the operation's own exception goes on; the peers fail at their deadline.
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /* reqs */) override {
    TORCH_CHECK(coalescing_here(), "tutti: endCoalescing without startCoalescing on this thread");
    coalescing_thread_.store(std::thread::id());
    std::vector<Coalesced> ops;
    std::swap(ops, coalesced_);
    if (coalesce_failed_) {
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      (void)ncclGroupSimulateEnd(&sim);
      return;
    }
    check(ncclGroupEnd(), "ncclGroupEnd (batch_isend_irecv)");
    // In issue order with other threads' operations on the same streams.
    std::lock(coll_mutex_, p2p_mutex_);
    std::lock_guard<std::mutex> coll_lock(coll_mutex_, std::adopt_lock);
    std::lock_guard<std::mutex> p2p_lock(p2p_mutex_, std::adopt_lock);
    for (size_t i = 0; i < ops.size(); i++) {
      try {
        enqueue(ops[i].work, ops[i].comm, ops[i].stream);
      } catch (...) {
        // The Works not queued hold tensors their operations (running) still use.
        for (size_t j = i; j < ops.size(); j++) tuttiStreamSynchronize(ops[j].stream);
        throw;
      }
    }
  }

  // Marks the batch failed when the operation it guards raises while its thread coalesces
  // (C++14: std::uncaught_exception, the operations never being called while unwinding).
  struct CoalesceGuard {
    explicit CoalesceGuard(ProcessGroupTutti* group) : group(group) {}
    ~CoalesceGuard() {
      if (std::uncaught_exception() && group->coalescing_here()) group->coalesce_failed_ = true;
    }
    ProcessGroupTutti* group;
  };

  // What the shim copies on the host is ordered with the stream: the copies into a contiguous
  // buffer that `pending` makes before it is issued (Pending::before) read tensors only once
  // the Works queued ahead on `stream` that hold them are complete (they may write them), and
  // make (so copies back into one tensor also land in issue order). Those Works are completed
  // here, waiting for them; the others are left alone, so nothing waits where stream order
  // suffices (contiguous tensors, as DDP's buckets are): the queue is looked at only when
  // `pending` copies inputs or a queued Work still has copies back to make (copies_pending_).
  void order_behind_queued(cudaStream_t stream, const Pending& pending) {
    if (pending.reads.empty() && copies_pending_->load(std::memory_order_acquire) == 0) return;
    std::vector<at::Tensor> mine = pending.keep;
    mine.insert(mine.end(), pending.outputs.begin(), pending.outputs.end());
    mine.insert(mine.end(), pending.reads.begin(), pending.reads.end());
    std::vector<c10::intrusive_ptr<WorkTutti>> ahead;
    {
      std::lock_guard<std::mutex> q(queue_mutex_);
      for (const auto& w : queue_)
        if (w->stream() == stream && !w->done()) ahead.push_back(w);
    }
    for (auto& w : ahead) {
      if ((w->copies_back() && w->touches(mine)) || w->touches(pending.reads)) w->complete();
    }
  }

  // Whether a collective may run inline (collective lock held): small enough, and nothing
  // queued on the collective stream ahead of it (tuttiStreamQuery never blocks; the error it
  // may report and forget is the events' too, which is where the shim takes errors from).
  bool runs_inline(const Pending& pending) {
    if (inline_bytes_ < 0 || point_to_point_seen.load(std::memory_order_relaxed)) return false;
    for (const at::Tensor& t : pending.keep)
      if (static_cast<int64_t>(t.nbytes()) > inline_bytes_) return false;
    return tuttiStreamQuery(coll_stream_) != ncclInProgress;
  }

  void request_stop() {
    {
      std::lock_guard<std::mutex> lock(queue_mutex_);
      stop_ = true;
    }
    queue_cv_->notify_one();
  }

  // Ends the completion thread, once; safe to call again.
  void stop_completer() {
    request_stop();
    std::lock_guard<std::mutex> lock(join_mutex_);
    if (!completer_.joinable()) return;
    // The group released for the last time by a future's callback on its own completion
    // thread: that thread cannot join itself. It is let go, and told (destroyed_here) to
    // return from complete_loop without touching the group again.
    if (completer_.get_id() == std::this_thread::get_id()) {
      completer_.detach();
      destroyed_here() = true;
      completing_for() = nullptr;
      return;
    }
    completer_.join();
  }

  // Set on a completion thread whose group was destroyed on it (stop_completer).
  static bool& destroyed_here() {
    static thread_local bool destroyed = false;
    return destroyed;
  }

  // The live groups, for stop_completion_threads.
  static std::mutex& live_mutex() {
    static std::mutex mutex;
    return mutex;
  }
  static std::set<ProcessGroupTutti*>& live() {
    static std::set<ProcessGroupTutti*> groups;
    return groups;
  }

  cudaStream_t p2p_stream(int peer, bool sending) {
    TORCH_CHECK(peer >= 0 && peer < getSize(), "tutti: peer ", peer, " is not a rank of this ",
                getSize(), "-rank process group");
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    cudaStream_t& s = p2p_streams_[2 * peer + (sending ? 1 : 0)];
    if (s == nullptr) check(tuttiStreamCreate(&s), "tuttiStreamCreate");
    return s;
  }

  // Completes the Works whose events completed, in any order, so that a future never waits for
  // an earlier operation that depends on the user; revokes the communicator when one is older
  // than the group's timeout. While work is pending it sleeps in tuttiEventWait (woken when an
  // event completes, at least every millisecond); while none is, on the queue's condition
  // variable (waking every timeout/10, at most 100 ms, for the inline collective's deadline).
  void complete_loop() {
    completing_for() = this;
    std::unique_lock<std::mutex> lock(queue_mutex_);
    // While idle it still looks at the inline collective's deadline this often.
    const auto idle_poll = std::chrono::milliseconds(
        std::max<int64_t>(1, std::min<int64_t>(100, timeout_.count() / 10)));
    for (;;) {
      if (timeout_.count() > 0) check_inline_deadline();
      if (queue_.empty()) {
        if (stop_) return exit_loop();
        if (timeout_.count() > 0)
          queue_cv_->wait_for(lock, idle_poll);
        else
          queue_cv_->wait(lock);
        continue;
      }
      std::vector<c10::intrusive_ptr<WorkTutti>> batch(queue_.begin(), queue_.end());
      lock.unlock();
      bool progressed = false;
      c10::intrusive_ptr<WorkTutti> watch;  // the pending Work to sleep on
      const Clock::time_point now = Clock::now();
      for (auto& work : batch) {
        if (tuttiEventQuery(work->event()) != ncclInProgress) {
          work->complete();
          // Its future's callbacks may have let go of the group's last reference: it is gone.
          if (destroyed_here()) return;
          progressed = true;
          continue;
        }
        if (timeout_.count() > 0 && now > work->deadline()) {
          revoke_for_timeout(work->seq(), work->retrieveOpType());
          progressed = true;
        }
        if (!watch || (work->stream() == coll_stream_ && watch->stream() != coll_stream_))
          watch = work;
      }
      // Released without the lock: the last reference to a Work may take the GIL.
      batch.clear();
      if (!progressed && watch) {
        // Sleeps until the oldest pending collective (else the oldest pending operation)
        // completes, or 1 ms passes: no polling takes a CPU from the threads moving the data,
        // and the futures DDP waits on complete as soon as their events do. Others are seen
        // within the millisecond.
        tuttiEventWait(watch->event(), 1000);
      }
      watch.reset();
      std::vector<c10::intrusive_ptr<WorkTutti>> finished;
      lock.lock();
      for (auto it = queue_.begin(); it != queue_.end();) {
        if ((*it)->done()) {
          finished.push_back(std::move(*it));
          it = queue_.erase(it);
        } else {
          ++it;
        }
      }
      if (!finished.empty()) {
        lock.unlock();
        finished.clear();
        lock.lock();
      }
      if (stop_) return exit_loop();
    }
  }

  // complete_loop's end when it was asked to stop (queue lock held), for
  // stop_completion_threads. Not when its group was destroyed on it: the group is gone.
  void exit_loop() { completer_exited_.store(true); }

  // Revokes the communicator when the inline collective running now is past its deadline.
  void check_inline_deadline() {
    const int64_t deadline = inline_deadline_.load(std::memory_order_acquire);
    if (deadline == 0 || Clock::now().time_since_epoch().count() <= deadline) return;
    revoke_for_timeout(inline_seq_.load(std::memory_order_relaxed),
                       static_cast<c10d::OpType>(inline_type_.load(std::memory_order_relaxed)));
  }

  // The note goes first, so that every Work the revocation fails reports it.
  void revoke_for_timeout(uint64_t seq, c10d::OpType type) {
    if (timed_out_.load()) return;
    note_->set("operation " + std::to_string(seq) + " (" + op_name(type) +
               ") timed out after " +
               std::to_string(timeout_.count()) +
               " ms (the process group's timeout), and the communicator was revoked");
    timed_out_.store(true);
    tuttiCommDump(comm_);  // logs who waits for whom
    tuttiCommDump(p2p_comm_);
    ncclCommRevoke(comm_, 0);
    ncclCommRevoke(p2p_comm_, 0);
  }

  ncclComm_t comm_ = nullptr;
  ncclComm_t p2p_comm_ = nullptr;  // send and recv (split from comm_ at creation)
  cudaStream_t coll_stream_ = nullptr;
  std::map<int, cudaStream_t> p2p_streams_;
  std::chrono::milliseconds timeout_;
  int64_t inline_bytes_;  // collectives up to this size may run inline; -1: none does
  std::mutex coll_mutex_;   // issue order on the collective stream, and inline runs
  std::mutex p2p_mutex_;    // the point-to-point streams
  std::atomic<uint64_t> seq_{0};       // every operation: names them in errors
  std::atomic<uint64_t> coll_seq_{0};  // collectives only: getSequenceNumberForGroup
  // The inline collective running now, for the completion thread's timeout: its deadline
  // (Clock's ticks since its epoch; 0 when none runs), number and type.
  std::atomic<int64_t> inline_deadline_{0};
  std::atomic<uint64_t> inline_seq_{0};
  std::atomic<int> inline_type_{0};
  std::atomic<bool> timed_out_{false};
  // The thread coalescing now (none: std::thread::id()) and what it issued so far.
  struct Coalesced {
    c10::intrusive_ptr<WorkTutti> work;
    ncclComm_t comm;
    cudaStream_t stream;
  };
  std::atomic<std::thread::id> coalescing_thread_{};
  std::vector<Coalesced> coalesced_;
  bool coalesce_failed_ = false;  // by the coalescing thread only
  std::shared_ptr<RevokeNote> note_ = std::make_shared<RevokeNote>();

  // Queued Works whose copies back have not run yet.
  std::shared_ptr<std::atomic<int64_t>> copies_pending_ =
      std::make_shared<std::atomic<int64_t>>(0);
  std::mutex queue_mutex_;
  // On the heap so that a child of fork() can leave it: the parent's completion thread may
  // have been waiting on it, and destroying it then waits for that waiter forever.
  std::unique_ptr<std::condition_variable> queue_cv_ = std::make_unique<std::condition_variable>();
  std::deque<c10::intrusive_ptr<WorkTutti>> queue_;
  bool stop_ = false;
  std::atomic<bool> completer_exited_{false};  // complete_loop returned, asked to stop
  std::mutex join_mutex_;
  std::thread completer_;
  const pid_t pid_ = getpid();  // the process that made the group (a child of fork() is not)
};

}  // namespace tutti_torch

#include "operations.h"  // the operations' definitions

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("create_process_group", &tutti_torch::ProcessGroupTutti::create,
        "A Tutti process group (store, rank, size, timeout, inline_bytes)",
        pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"),
        pybind11::arg("timeout"), pybind11::arg("inline_bytes"),
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("stop_completion_threads", &tutti_torch::ProcessGroupTutti::stop_completion_threads,
        "Stops every process group's completion thread (at exit, before finalization)",
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("install_allocator", &tutti_torch::install_allocator,
        "Large CPU tensors from shareable host memory (min_bytes, cache_bytes)",
        pybind11::arg("min_bytes"), pybind11::arg("cache_bytes"));
  m.def("allocator_stats", &tutti_torch::allocator_stats,
        "(installed, blocks made, blocks reused, live blocks, cached bytes)");
}
