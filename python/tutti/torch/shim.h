// tutti.torch's C++ shim, its common part: the includes, the version-dependent base class and
// the helpers that check tensors and map torch's types and operators to Tutti's. Included
// by work.h (and so by backend.cpp, the one translation unit that uses it).
#pragma once

#include <torch/python.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <pybind11/chrono.h>

#include <ATen/MemoryOverlap.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tutti.h"

namespace tutti_torch {

// allocator.cpp
bool install_allocator(size_t min_bytes, size_t cache_bytes);
std::tuple<bool, size_t, size_t, size_t, size_t> allocator_stats();

// What differs in torch 2.x's interface is kept here: there a backend derives from
// c10d::Backend (ProcessGroup became a dispatcher over backends), Work lives in c10d::Work as
// here, and the creator registered from Python receives the same (store, rank, size, timeout).
using BackendBase = c10d::ProcessGroup;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(ncclResult_t res, const char* call) {
  TORCH_CHECK(false, "tutti: ", call, " failed: ", ncclGetErrorString(res), ": ",
              ncclGetLastError(nullptr));
}

void check(ncclResult_t res, const char* call) {
  if (res != ncclSuccess) fail(res, call);
}

ncclDataType_t datatype(at::ScalarType type, const char* what) {
  switch (type) {
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    case at::kBool: return ncclUint8;
    case at::kInt: return ncclInt32;
    case at::kLong: return ncclInt64;
    case at::kHalf: return ncclFloat16;
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    default: break;
  }
  TORCH_CHECK(false, "tutti: ", what, ": tensors of type ", type,
              " are not supported (int8, uint8, bool, int32, int64, float16, bfloat16, float32, "
              "float64, complex64 and complex128 are)");
}

// NCCL's operator for a reduction over tensors of `type`. Booleans reduce as bytes holding 0 or
// 1, where a sum is a logical or (MAX) and a product a logical and (MIN), as PyTorch's NCCL
// backend does.
ncclRedOp_t redop(const c10d::ReduceOp& op, at::ScalarType type, const char* what) {
  const bool logical = type == at::kBool;
  const bool complex = at::isComplexType(type);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return logical ? ncclMax : ncclSum;
    case c10d::ReduceOp::AVG:
      TORCH_CHECK(!logical, "tutti: ", what, ": AVG of bool tensors is not supported");
      return ncclAvg;
    case c10d::ReduceOp::PRODUCT:
      TORCH_CHECK(!complex, "tutti: ", what, ": PRODUCT of complex tensors is not supported");
      return logical ? ncclMin : ncclProd;
    case c10d::ReduceOp::MIN:
      TORCH_CHECK(!complex, "tutti: ", what, ": MIN of complex tensors is not supported");
      return ncclMin;
    case c10d::ReduceOp::MAX:
      TORCH_CHECK(!complex, "tutti: ", what, ": MAX of complex tensors is not supported");
      return ncclMax;
    default: break;
  }
  TORCH_CHECK(false, "tutti: ", what, ": reduction op ", static_cast<int>(op.op_),
              " is not supported (SUM, AVG, PRODUCT, MIN and MAX are)");
}

// A tensor as Tutti moves it: its contiguous storage, the datatype and the element count
// (complex tensors move as pairs of reals).
struct Buf {
  at::Tensor t;  // contiguous, on the CPU
  void* ptr;
  size_t count;
  ncclDataType_t dtype;
};

Buf buf(const at::Tensor& contiguous, const char* what) {
  at::ScalarType type = contiguous.scalar_type();
  if (at::isComplexType(type)) {
    at::Tensor real = at::view_as_real(contiguous);
    return {contiguous, real.data_ptr(), static_cast<size_t>(real.numel()),
            datatype(real.scalar_type(), what)};
  }
  return {contiguous, contiguous.data_ptr(), static_cast<size_t>(contiguous.numel()),
          datatype(type, what)};
}

// Elements Tutti moves per element of a tensor of `type`: 2 for complex (a pair of reals).
size_t moved_per_element(at::ScalarType type) {
  return at::isComplexType(type) ? 2 : 1;
}

// Whether the bytes two tensors span (from their first to their last element) overlap.
bool overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  auto span = [](const at::Tensor& t) {
    int64_t last = 0;
    for (int64_t d = 0; d < t.dim(); d++) last += (t.size(d) - 1) * t.stride(d);
    const char* p = static_cast<const char*>(t.data_ptr());
    return std::make_pair(p, p + (last + 1) * static_cast<int64_t>(t.element_size()));
  };
  auto x = span(a), y = span(b);
  return x.first < y.second && y.first < x.second;
}

// Rows per peer of an all_to_all_single tensor: the split sizes given, or equal blocks.
std::vector<int64_t> splits(const at::Tensor& t, const std::vector<int64_t>& given, int n,
                          const char* which) {
  const int64_t rows = t.dim() > 0 ? t.size(0) : t.numel();
  if (given.empty()) {
    TORCH_CHECK(rows % n == 0, "tutti: all_to_all_single: the ", which, "'s ", rows,
                " rows do not divide into ", n, " equal blocks (give split sizes)");
    return std::vector<int64_t>(n, rows / n);
  }
  TORCH_CHECK(static_cast<int>(given.size()) == n, "tutti: all_to_all_single: ", which,
              " split sizes must have ", n, " entries, got ", given.size());
  int64_t sum = 0;
  for (int64_t s : given) {
    TORCH_CHECK(s >= 0, "tutti: all_to_all_single: negative ", which, " split size ", s);
    sum += s;
  }
  TORCH_CHECK(sum == rows, "tutti: all_to_all_single: ", which, " split sizes add up to ",
              sum, " but the tensor has ", rows, " rows");
  return given;
}

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "tutti: ", what, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "tutti: ", what, " needs CPU tensors (got ", t.device(),
              ")");
  TORCH_CHECK(t.layout() == at::kStrided, "tutti: ", what, " needs dense (strided) tensors");
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "tutti: ", what, " takes one tensor per rank, got ",
              tensors.size());
  check_cpu(tensors[0], what);
  return tensors[0];
}

void same_type(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tutti: ", what,
              ": input and output types differ (", a.scalar_type(), " and ", b.scalar_type(),
              ")");
}

const char* op_name(c10d::OpType type) {
  switch (type) {
    case c10d::OpType::BROADCAST: return "broadcast";
    case c10d::OpType::ALLREDUCE: return "all_reduce";
    case c10d::OpType::REDUCE: return "reduce";
    case c10d::OpType::ALLGATHER: return "all_gather";
    case c10d::OpType::_ALLGATHER_BASE: return "all_gather_into_tensor";
    case c10d::OpType::GATHER: return "gather";
    case c10d::OpType::SCATTER: return "scatter";
    case c10d::OpType::REDUCE_SCATTER: return "reduce_scatter";
    case c10d::OpType::_REDUCE_SCATTER_BASE: return "reduce_scatter_tensor";
    case c10d::OpType::ALLTOALL_BASE: return "all_to_all_single";
    case c10d::OpType::ALLTOALL: return "all_to_all";
    case c10d::OpType::SEND: return "send";
    case c10d::OpType::RECV: return "recv";
    case c10d::OpType::BARRIER: return "barrier";
    default: return "operation";
  }
}

// Lets the GIL go for its lifetime if the calling thread holds it. Once the interpreter is
// finalizing (Py_IsInitialized() false) nothing is released: torch then leaks the Python
// objects of tensors released late instead of taking the GIL.
class GilRelease {
 public:
  GilRelease()
      : state_(Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr) {}
  ~GilRelease() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

}  // namespace

}  // namespace tutti_torch
