// tutti.torch's C++ shim: the c10d operations of ProcessGroupTutti, each a Tutti call issued
// through ProcessGroupTutti::issue (backend.cpp). Included by backend.cpp after the class, the
// one translation unit that defines it.
#pragma once

namespace tutti_torch {

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const char* what = "all_reduce";
  at::Tensor& t = single(tensors, what);
  ncclRedOp_t op = redop(opts.reduceOp, t.scalar_type(), what);
  Pending p;
  p.outputs = tensors;
  Buf b = buf(p.stage(t, true, true), what);
  return issue(c10d::OpType::ALLREDUCE, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclAllReduce(b.ptr, b.ptr, b.count, b.dtype, op, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const char* what = "broadcast";
  at::Tensor& t = single(tensors, what);
  const int root = static_cast<int>(opts.rootRank);
  Pending p;
  p.outputs = tensors;
  Buf b = buf(p.stage(t, true, true), what);
  return issue(c10d::OpType::BROADCAST, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclBroadcast(b.ptr, b.ptr, b.count, b.dtype, root, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const char* what = "reduce";
  at::Tensor& t = single(tensors, what);
  ncclRedOp_t op = redop(opts.reduceOp, t.scalar_type(), what);
  const int root = static_cast<int>(opts.rootRank);
  Pending p;
  p.outputs = tensors;
  Buf b = buf(p.stage(t, true, true), what);
  return issue(c10d::OpType::REDUCE, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclReduce(b.ptr, b.ptr, b.count, b.dtype, op, root, comm_, s);
  });
}

// AllGather into a list of size() tensors: gathered into one contiguous buffer, copied out
// when it completes (the list's tensors need not be adjacent in memory). Tensors of different
// sizes, as PyTorch's NCCL backend takes them, go through tuttiAllGatherV: block q has output
// q's size, and this rank's output must have the input's.
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /* opts */) {
  const char* what = "all_gather";
  at::Tensor& in = single(inputs, what);
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
              "tutti: all_gather needs one list of ", getSize(), " output tensors");
  // Blocks in the elements Tutti moves (complex: pairs of reals); `total` in the tensors'.
  const size_t per = moved_per_element(in.scalar_type());
  std::vector<size_t> counts, displs;
  size_t total = 0;
  bool even = true;
  for (const at::Tensor& o : outputs[0]) {
    check_cpu(o, what);
    same_type(in, o, what);
    counts.push_back(static_cast<size_t>(o.numel()) * per);
    displs.push_back(total * per);
    total += static_cast<size_t>(o.numel());
    even = even && o.numel() == in.numel();
  }
  TORCH_CHECK(outputs[0][getRank()].numel() == in.numel(),
              "tutti: all_gather: this rank's "
              "output tensor (",
              getRank(), ") must have the input's ", in.numel(), " elements (got ",
              outputs[0][getRank()].numel(), ")");
  Pending p;
  p.outputs = outputs[0];
  Buf src = buf(p.stage(in, true, false), what);
  at::Tensor flat = at::empty({static_cast<int64_t>(total)}, in.options());
  p.keep.push_back(flat);
  p.split_into(flat, outputs[0]);
  Buf dst = buf(flat, what);
  return issue(c10d::OpType::ALLGATHER, coll_stream_, std::move(p), [&](cudaStream_t s) {
    if (even) return ncclAllGather(src.ptr, dst.ptr, src.count, src.dtype, comm_, s);
    return tuttiAllGatherV(src.ptr, dst.ptr, counts.data(), displs.data(), src.dtype, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /* opts */) {
  const char* what = "all_gather_into_tensor";
  check_cpu(input, what);
  check_cpu(output, what);
  same_type(input, output, what);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "tutti: ", what,
              ": the output must hold world_size x the input's elements (", getSize(), " x ",
              input.numel(), "), got ", output.numel());
  Pending p;
  p.outputs = {output};
  Buf src = buf(p.stage(input, true, false), what);
  Buf dst = buf(p.stage(output, false, true), what);
  return issue(c10d::OpType::_ALLGATHER_BASE, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclAllGather(src.ptr, dst.ptr, src.count, src.dtype, comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor";
  check_cpu(input, what);
  check_cpu(output, what);
  same_type(input, output, what);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "tutti: ", what,
              ": the input must hold world_size x the output's elements (", getSize(), " x ",
              output.numel(), "), got ", input.numel());
  ncclRedOp_t op = redop(opts.reduceOp, input.scalar_type(), what);
  Pending p;
  p.outputs = {output};
  Buf src = buf(p.stage(input, true, false), what);
  Buf dst = buf(p.stage(output, false, true), what);
  return issue(c10d::OpType::_REDUCE_SCATTER_BASE, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclReduceScatter(src.ptr, dst.ptr, dst.count, dst.dtype, op, comm_, s);
  });
}

// ReduceScatter from a list of size() tensors: concatenated into one buffer first. Tensors
// of different sizes go through tuttiReduceScatterV, block q the size of input q, which for
// this rank must be the output's.
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  at::Tensor& out = single(outputs, what);
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
              "tutti: reduce_scatter needs one list of ", getSize(), " input tensors");
  ncclRedOp_t op = redop(opts.reduceOp, out.scalar_type(), what);
  TORCH_CHECK(inputs[0][getRank()].numel() == out.numel(),
              "tutti: reduce_scatter: this "
              "rank's input tensor (",
              getRank(), ") must have the output's ", out.numel(), " elements (got ",
              inputs[0][getRank()].numel(), ")");
  // Blocks in the elements Tutti moves (complex: pairs of reals).
  const size_t per = moved_per_element(out.scalar_type());
  std::vector<size_t> counts, displs;
  size_t total = 0;
  bool even = true;
  for (const at::Tensor& t : inputs[0]) {
    counts.push_back(static_cast<size_t>(t.numel()) * per);
    displs.push_back(total);
    total += counts.back();
    even = even && t.numel() == out.numel();
  }
  Pending p;
  p.outputs = outputs;
  at::Tensor flat = p.concatenated(inputs[0], out, what, even);
  Buf src = buf(flat, what);
  Buf dst = buf(p.stage(out, false, true), what);
  return issue(c10d::OpType::REDUCE_SCATTER, coll_stream_, std::move(p), [&](cudaStream_t s) {
    if (even) return ncclReduceScatter(src.ptr, dst.ptr, dst.count, dst.dtype, op, comm_, s);
    return tuttiReduceScatterV(src.ptr, dst.ptr, counts.data(), displs.data(), dst.dtype, op, comm_,
                               s);
  });
}

// AlltoAll of one tensor: NCCL's AlltoAll for equal blocks, else tuttiAlltoAllV with the rows
// each split size names (the split sizes count rows of the first dimension).
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /* opts */) {
  const char* what = "all_to_all_single";
  check_cpu(input, what);
  check_cpu(output, what);
  same_type(input, output, what);
  // Each block is received while others are still to be sent: in place would lose data.
  // A non-contiguous tensor goes through a copy of its own, so only two contiguous ones
  // can meet.
  TORCH_CHECK(!(input.is_contiguous() && output.is_contiguous() && overlap(input, output)),
              "tutti: ", what, ": input and output overlap; AlltoAll needs distinct tensors");
  const int n = getSize();
  std::vector<int64_t> send_rows = splits(input, input_splits, getSize(), "input");
  std::vector<int64_t> recv_rows = splits(output, output_splits, getSize(), "output");
  Pending p;
  p.outputs = {output};
  Buf src = buf(p.stage(input, true, false), what);
  Buf dst = buf(p.stage(output, false, true), what);
  const size_t send_row = input.dim() > 0 && input.size(0) > 0 ? src.count / input.size(0) : 0;
  const size_t recv_row = output.dim() > 0 && output.size(0) > 0 ? dst.count / output.size(0) : 0;
  // Without split sizes, equal blocks (NCCL's AlltoAll). With them, tuttiAlltoAllV even when
  // this rank's happen to be equal: a peer whose are not must run the same call.
  const bool even = input_splits.empty() && output_splits.empty();
  TORCH_CHECK(!even || send_rows[0] * send_row == recv_rows[0] * recv_row,
              "tutti: all_to_all_single: input and output blocks differ (", send_rows[0], " and ",
              recv_rows[0], " rows); give split sizes");
  return issue(c10d::OpType::ALLTOALL_BASE, coll_stream_, std::move(p), [&](cudaStream_t s) {
    if (even) {
      return ncclAlltoAll(src.ptr, dst.ptr, send_rows[0] * send_row, src.dtype, comm_, s);
    }
    std::vector<size_t> sc(n), sd(n), rc(n), rd(n);
    size_t send_off = 0, recv_off = 0;
    for (int q = 0; q < n; q++) {
      sc[q] = send_rows[q] * send_row;
      rc[q] = recv_rows[q] * recv_row;
      sd[q] = send_off;
      rd[q] = recv_off;
      send_off += sc[q];
      recv_off += rc[q];
    }
    return tuttiAlltoAllV(src.ptr, sc.data(), sd.data(), dst.ptr, rc.data(), rd.data(), src.dtype,
                          comm_, s);
  });
}

// AlltoAll of tensor lists, of any sizes: one grouped send and receive per peer.
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& /* opts */) {
  const char* what = "all_to_all";
  const int n = getSize();
  TORCH_CHECK(static_cast<int>(outputs.size()) == n && static_cast<int>(inputs.size()) == n,
              "tutti: all_to_all needs lists of ", n, " input and output tensors");
  Pending p;
  p.outputs = outputs;
  std::vector<Buf> src, dst;
  for (int q = 0; q < n; q++) {
    check_cpu(inputs[q], what);
    check_cpu(outputs[q], what);
    same_type(inputs[q], outputs[q], what);
    src.push_back(buf(p.stage(inputs[q], true, false), what));
    dst.push_back(buf(p.stage(outputs[q], false, true), what));
  }
  return issue(c10d::OpType::ALLTOALL, coll_stream_, std::move(p), [&](cudaStream_t s) {
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) return res;
    for (int q = 0; q < n && res == ncclSuccess; q++) {
      res = ncclSend(src[q].ptr, src[q].count, src[q].dtype, q, comm_, s);
      if (res == ncclSuccess) res = ncclRecv(dst[q].ptr, dst[q].count, dst[q].dtype, q, comm_, s);
    }
    ncclResult_t end = ncclGroupEnd();
    return res != ncclSuccess ? res : end;
  });
}

// Gather into a list of size() tensors at the root (through one contiguous buffer).
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const char* what = "gather";
  at::Tensor& in = single(inputs, what);
  const int root = static_cast<int>(opts.rootRank);
  Pending p;
  Buf src = buf(p.stage(in, true, false), what);
  void* dst = nullptr;
  if (getRank() == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(),
                "tutti: gather needs one list of ", getSize(), " output tensors at the root");
    for (const at::Tensor& o : outputs[0]) {
      check_cpu(o, what);
      same_type(in, o, what);
      TORCH_CHECK(o.numel() == in.numel(),
                  "tutti: gather: every output tensor must have the "
                  "input's ",
                  in.numel(), " elements (got ", o.numel(), ")");
    }
    at::Tensor flat = at::empty({static_cast<int64_t>(getSize()) * in.numel()}, in.options());
    p.keep.push_back(flat);
    p.outputs = outputs[0];
    p.split_into(flat, outputs[0]);
    dst = buf(flat, what).ptr;
  } else {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(),
                "tutti: gather: only the root passes output tensors");
  }
  return issue(c10d::OpType::GATHER, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclGather(src.ptr, dst, src.count, src.dtype, root, comm_, s);
  });
}

// Scatter from a list of size() tensors at the root (concatenated into one buffer first).
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  at::Tensor& out = single(outputs, what);
  const int root = static_cast<int>(opts.rootRank);
  Pending p;
  p.outputs = outputs;
  void* src = nullptr;
  if (getRank() == root) {
    TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(),
                "tutti: scatter needs one list of ", getSize(), " input tensors at the root");
    at::Tensor flat = p.concatenated(inputs[0], out, what);
    src = buf(flat, what).ptr;
  } else {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(),
                "tutti: scatter: only the root passes input tensors");
  }
  Buf dst = buf(p.stage(out, false, true), what);
  return issue(c10d::OpType::SCATTER, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclScatter(src, dst.ptr, dst.count, dst.dtype, root, comm_, s);
  });
}

// A one-byte AllReduce after everything issued before it on the collective stream.
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::barrier(const c10d::BarrierOptions& /* opts */) {
  Pending p;
  at::Tensor one = at::zeros({1}, at::kByte);
  p.keep.push_back(one);
  return issue(c10d::OpType::BARRIER, coll_stream_, std::move(p), [&](cudaStream_t s) {
    return ncclAllReduce(one.data_ptr(), one.data_ptr(), 1, ncclUint8, ncclSum, comm_, s);
  });
}

// Point to point on the stream of this peer and direction: the sends to a peer match its
// receives from this rank in issue order (tags are not matched).
c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::send(std::vector<at::Tensor>& tensors, int dst,
                                                       int /* tag */) {
  const char* what = "send";
  CoalesceGuard guard(this);  // an error here fails the whole batch_isend_irecv
  at::Tensor& t = single(tensors, what);
  Pending p;
  p.outputs = tensors;
  Buf b = buf(p.stage(t, true, false), what);
  cudaStream_t stream = p2p_stream(dst, true);
  return issue(c10d::OpType::SEND, stream, std::move(p), [&](cudaStream_t s) {
    return ncclSend(b.ptr, b.count, b.dtype, dst, p2p_comm_, s);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::recv(std::vector<at::Tensor>& tensors, int src,
                                                       int /* tag */) {
  const char* what = "recv";
  CoalesceGuard guard(this);
  at::Tensor& t = single(tensors, what);
  Pending p;
  p.outputs = tensors;
  Buf b = buf(p.stage(t, false, true), what);
  cudaStream_t stream = p2p_stream(src, false);
  return issue(c10d::OpType::RECV, stream, std::move(p), [&](cudaStream_t s) {
    return ncclRecv(b.ptr, b.count, b.dtype, src, p2p_comm_, s);
  });
}

}  // namespace tutti_torch
