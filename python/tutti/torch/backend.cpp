// tutti.torch's C++ shim: a c10d ProcessGroup for PyTorch 1.13 (Debian's python3-torch,
// CXX11 ABI) whose collectives are Tutti's. The first rank makes a unique id and publishes it
// in the c10d store the group was created with; every rank then joins with ncclCommInitRank.
// Operations run on CPU tensors, blocking on the calling thread (stream NULL), so the Work
// each returns is already complete and its future already holds the outputs, which is what
// DistributedDataParallel's default communication hook waits on.
#include <torch/python.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <pybind11/chrono.h>

#include <chrono>
#include <string>
#include <vector>

#include "nccl.h"

namespace tutti_torch {

namespace {

void check(ncclResult_t res, const char* call) {
  TORCH_CHECK(res == ncclSuccess, "tutti: ", call, " failed: ", ncclGetErrorString(res), ": ",
              ncclGetLastError(nullptr));
}

ncclDataType_t datatype(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kHalf: return ncclFloat16;
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    default: TORCH_CHECK(false, "tutti: tensors of type ", t.scalar_type(), " are not supported");
  }
}

ncclRedOp_t redop(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ncclSum;
    case c10d::ReduceOp::AVG: return ncclAvg;
    case c10d::ReduceOp::PRODUCT: return ncclProd;
    case c10d::ReduceOp::MIN: return ncclMin;
    case c10d::ReduceOp::MAX: return ncclMax;
    default: break;
  }
  TORCH_CHECK(false, "tutti: reduction op ", static_cast<int>(op.op_),
              " is not supported yet (SUM, AVG, PRODUCT, MIN, MAX are)");
}

// The one tensor of a c10d argument list, checked: on the CPU, dense and contiguous.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "tutti: ", what, " takes one tensor per rank, got ",
              tensors.size());
  at::Tensor& t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "tutti: ", what, " needs a CPU tensor (got ", t.device(),
              ")");
  TORCH_CHECK(t.layout() == at::kStrided && t.is_contiguous(), "tutti: ", what,
              " needs a dense contiguous tensor");
  return t;
}

}  // namespace

// A Work that is complete when made: Tutti ran the operation before returning it.
class WorkTutti : public c10d::Work {
 public:
  WorkTutti(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {
    future_->markCompleted(c10::IValue(outputs_));
    finish();
  }
  bool isCompleted() override { return true; }
  bool isSuccess() const override { return true; }
  bool wait(std::chrono::milliseconds /* timeout */) override { return true; }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupTutti : public c10d::ProcessGroup {
 public:
  ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size)
      : c10d::ProcessGroup(rank, size) {
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
  }

  ~ProcessGroupTutti() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "tutti"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    at::Tensor& t = single(tensors, "allreduce");
    check(ncclAllReduce(t.data_ptr(), t.data_ptr(), t.numel(), datatype(t),
                        redop(opts.reduceOp), comm_, nullptr),
          "ncclAllReduce");
    return done(c10d::OpType::ALLREDUCE, tensors);
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    at::Tensor& t = single(tensors, "broadcast");
    check(ncclBroadcast(t.data_ptr(), t.data_ptr(), t.numel(), datatype(t),
                        static_cast<int>(opts.rootRank), comm_, nullptr),
          "ncclBroadcast");
    return done(c10d::OpType::BROADCAST, tensors);
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override {
    at::Tensor& t = single(tensors, "reduce");
    check(ncclReduce(t.data_ptr(), t.data_ptr(), t.numel(), datatype(t),
                     redop(opts.reduceOp), static_cast<int>(opts.rootRank), comm_, nullptr),
          "ncclReduce");
    return done(c10d::OpType::REDUCE, tensors);
  }

  // AllGather into a list of size() tensors: gathered into one contiguous buffer, then copied
  // out (the list's tensors need not be adjacent in memory).
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& /* opts */) override {
    at::Tensor& in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "tutti: allgather needs one list of ", getSize(), " output tensors");
    at::Tensor flat = at::empty({static_cast<int64_t>(getSize()) * in.numel()}, in.options());
    check(ncclAllGather(in.data_ptr(), flat.data_ptr(), in.numel(), datatype(in), comm_,
                        nullptr),
          "ncclAllGather");
    for (int r = 0; r < getSize(); r++) {
      outputs[0][r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view_as(in));
    }
    return done(c10d::OpType::ALLGATHER, outputs[0]);
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& /* opts */) override {
    std::vector<at::Tensor> in{input}, out{output};
    single(in, "_allgather_base");
    single(out, "_allgather_base");
    TORCH_CHECK(output.numel() == input.numel() * getSize(),
                "tutti: _allgather_base output must hold world_size x input elements");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "tutti: _allgather_base input and output types differ");
    check(ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), datatype(input),
                        comm_, nullptr),
          "ncclAllGather");
    return done(c10d::OpType::_ALLGATHER_BASE, out);
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override {
    std::vector<at::Tensor> in{input}, out{output};
    single(in, "_reduce_scatter_base");
    single(out, "_reduce_scatter_base");
    TORCH_CHECK(input.numel() == output.numel() * getSize(),
                "tutti: _reduce_scatter_base input must hold world_size x output elements");
    TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                "tutti: _reduce_scatter_base input and output types differ");
    check(ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(),
                            datatype(input), redop(opts.reduceOp), comm_, nullptr),
          "ncclReduceScatter");
    return done(c10d::OpType::_REDUCE_SCATTER_BASE, out);
  }

  // ReduceScatter from a list of size() tensors: concatenated into one buffer first.
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    at::Tensor& out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "tutti: reduce_scatter needs one list of ", getSize(), " input tensors");
    at::Tensor flat = concatenated(inputs[0], out);
    check(ncclReduceScatter(flat.data_ptr(), out.data_ptr(), out.numel(), datatype(out),
                            redop(opts.reduceOp), comm_, nullptr),
          "ncclReduceScatter");
    return done(c10d::OpType::REDUCE_SCATTER, outputs);
  }

  // AlltoAll of one tensor in equal blocks (torch's all_to_all_single without split sizes).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& /* opts */) override {
    std::vector<at::Tensor> in{input}, out{output};
    single(in, "alltoall_base");
    single(out, "alltoall_base");
    TORCH_CHECK(input.dim() >= 1, "tutti: all_to_all_single needs a tensor of one or more dims");
    const int64_t block = input.numel() / getSize();
    // Split sizes count rows (the first dimension); equal blocks are all that is supported.
    const int64_t row = input.size(0) > 0 ? input.numel() / input.size(0) : 0;
    for (const std::vector<int64_t>* splits : {&output_splits, &input_splits}) {
      for (int64_t n : *splits) {
        TORCH_CHECK(n * row == block,
                    "tutti: all_to_all with uneven split sizes is not supported yet");
      }
    }
    TORCH_CHECK(input.numel() % getSize() == 0 && output.numel() == input.numel() &&
                    output.scalar_type() == input.scalar_type(),
                "tutti: all_to_all_single needs equal input and output tensors whose length "
                "divides into world_size blocks");
    check(ncclAlltoAll(input.data_ptr(), output.data_ptr(), block, datatype(input), comm_,
                       nullptr),
          "ncclAlltoAll");
    return done(c10d::OpType::ALLTOALL_BASE, out);
  }

  // Gather into a list of size() tensors at the root (through one contiguous buffer).
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override {
    at::Tensor& in = single(inputs, "gather");
    const int root = static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (getRank() == root) {
      TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                  "tutti: gather needs one list of ", getSize(), " output tensors at the root");
      flat = at::empty({static_cast<int64_t>(getSize()) * in.numel()}, in.options());
    }
    check(ncclGather(in.data_ptr(), flat.defined() ? flat.data_ptr() : nullptr, in.numel(),
                     datatype(in), root, comm_, nullptr),
          "ncclGather");
    if (!flat.defined()) return done(c10d::OpType::GATHER, {});
    for (int r = 0; r < getSize(); r++) {
      outputs[0][r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view_as(in));
    }
    return done(c10d::OpType::GATHER, outputs[0]);
  }

  // Scatter from a list of size() tensors at the root (concatenated into one buffer first).
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override {
    at::Tensor& out = single(outputs, "scatter");
    const int root = static_cast<int>(opts.rootRank);
    at::Tensor flat;
    if (getRank() == root) {
      TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                  "tutti: scatter needs one list of ", getSize(), " input tensors at the root");
      flat = concatenated(inputs[0], out);
    }
    check(ncclScatter(flat.defined() ? flat.data_ptr() : nullptr, out.data_ptr(), out.numel(),
                      datatype(out), root, comm_, nullptr),
          "ncclScatter");
    return done(c10d::OpType::SCATTER, outputs);
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& /* opts */) override {
    at::Tensor one = at::zeros({1}, at::kByte);
    check(ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclUint8, ncclSum, comm_, nullptr),
          "ncclAllReduce (barrier)");
    return done(c10d::OpType::BARRIER, {});
  }

  // Blocking point to point: the matching recv must be posted by the peer (an isend/irecv
  // pair in both directions at once is not supported yet).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int /* tag */) override {
    at::Tensor& t = single(tensors, "send");
    check(ncclSend(t.data_ptr(), t.numel(), datatype(t), dst, comm_, nullptr), "ncclSend");
    return done(c10d::OpType::SEND, tensors);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int /* tag */) override {
    at::Tensor& t = single(tensors, "recv");
    check(ncclRecv(t.data_ptr(), t.numel(), datatype(t), src, comm_, nullptr), "ncclRecv");
    return done(c10d::OpType::RECV, tensors);
  }

  static c10::intrusive_ptr<c10d::ProcessGroup> create(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      const std::chrono::duration<float>& /* timeout */) {
    return c10::make_intrusive<ProcessGroupTutti>(store, rank, size);
  }

 private:
  // The list's tensors, each shaped like `like`, laid end to end in one contiguous tensor.
  at::Tensor concatenated(const std::vector<at::Tensor>& list, const at::Tensor& like) {
    std::vector<at::Tensor> flat;
    for (const at::Tensor& t : list) {
      TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type() &&
                      t.device().is_cpu(),
                  "tutti: every tensor of the list must be a CPU tensor like the output");
      flat.push_back(t.reshape({-1}));
    }
    return at::cat(flat);
  }

  c10::intrusive_ptr<c10d::Work> done(c10d::OpType type, std::vector<at::Tensor> outputs) {
    return c10::make_intrusive<WorkTutti>(getRank(), type, std::move(outputs));
  }

  ncclComm_t comm_ = nullptr;
};

}  // namespace tutti_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("create_process_group", &tutti_torch::ProcessGroupTutti::create,
        "A Tutti process group (store, rank, size, timeout)", pybind11::arg("store"),
        pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"),
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
