// cublas_baselines.h — the two cuBLAS baselines ggemm is measured against:
// one cublasGemmEx per group captured in a CUDA graph, and
// cublasGemmGroupedBatchedEx with one group per expert.
// Header-only: ggemm_demo's sources are fixed to demo.cpp + gpu_buffers.cpp.
#ifndef GGEMM_BENCH_CUBLAS_BASELINES_H
#define GGEMM_BENCH_CUBLAS_BASELINES_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "gpu_buffers.h"

namespace ggemm::bench {

#define CUBLAS_CHECK(expr)                                                                  \
  do {                                                                                      \
    const cublasStatus_t cublas_check_st_ = (expr);                                         \
    if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS) {                                        \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #expr,                  \
                   cublasGetStatusName(cublas_check_st_));                                  \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

// A cuBLAS handle bound to one stream, with a fixed workspace: graph capture
// must not allocate, and every call then uses the same memory.
class CublasHandle {
 public:
  explicit CublasHandle(cudaStream_t stream) : workspace_(kWorkspaceBytes) {
    CUBLAS_CHECK(cublasCreate(&handle_));
    CUBLAS_CHECK(cublasSetStream(handle_, stream));
    CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
    // The grouped API takes alpha/beta arrays only in host pointer mode.
    CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  }
  ~CublasHandle() { cublasDestroy(handle_); }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS's advice for Hopper
  DeviceBuffer workspace_;
  cublasHandle_t handle_ = nullptr;
};

// ggemm is row-major, cuBLAS column-major. A row-major r x c matrix with
// leading dimension ld is, byte for byte, the column-major c x r matrix of
// its transpose with the same ld. So for one group (rows tokens, expert e):
//   C_g row-major [rows, N], ld N  ==  col-major C_g^T  (N x rows), ldc = N
//   A_g row-major [rows, K], ld K  ==  col-major A_g^T  (K x rows), ldb = K
//   W_e row-major [N, K],    ld K  ==  col-major W_e^T  (K x N),    lda = K
// C_g = A_g W_e^T is the same as C_g^T = W_e A_g^T, an (N x K)(K x rows)
// product, which cuBLAS computes as
//   m = N, n = rows, k = K,
//   op(A) = W_e   : the stored K x N matrix W_e^T with CUBLAS_OP_T, lda = K,
//   op(B) = A_g^T : the stored K x rows matrix as is, CUBLAS_OP_N,  ldb = K,
//   C = C_g^T     : N x rows, ldc = N.
// Both operands are then K-major, the layout the tensor cores read best.
inline cublasStatus_t gemm_rows_times_wt(cublasHandle_t h, const void* w, const void* a, void* c,
                                         int rows, int n, int k) {
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, w, CUDA_R_16BF, k, a,
                      CUDA_R_16BF, k, &zero, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
}

// One used group's operands, from the problem's host copies of the arrays.
struct GroupGemm {
  const void* w;  // expert's [N, K] weights
  const void* a;  // the group's first activation row
  void* c;        // the group's first output row
  int rows;
};

inline std::vector<GroupGemm> group_gemms(const MoeProblem& p) {
  const size_t n = static_cast<size_t>(p.shape.n), k = static_cast<size_t>(p.shape.k);
  const auto* a = p.a.as<const uint16_t>();
  const auto* b = p.b.as<const uint16_t>();
  auto* c = p.c.as<uint16_t>();
  std::vector<GroupGemm> groups;
  for (int g = 0; g < p.used_groups; ++g) {
    const size_t e = static_cast<size_t>(p.expert_of[g]), r0 = p.offsets[g];
    groups.push_back({b + e * n * k, a + r0 * k, c + r0 * n,
                      static_cast<int>(p.offsets[g + 1] - p.offsets[g])});
  }
  return groups;
}

// Baseline 1: a loop of cublasGemmEx, one per used group, captured once in a
// CUDA graph so that replays pay one launch instead of one per expert. It
// needs the group sizes on the host, which ggemm does not.
class CublasLoopGraph {
 public:
  CublasLoopGraph(const CublasHandle& h, const MoeProblem& p, cudaStream_t stream) {
    const auto groups = group_gemms(p);
    const int n = static_cast<int>(p.shape.n), k = static_cast<int>(p.shape.k);
    auto enqueue_all = [&] {
      for (const GroupGemm& g : groups)
        CUBLAS_CHECK(gemm_rows_times_wt(h.get(), g.w, g.a, g.c, g.rows, n, k));
    };
    enqueue_all();  // eager run first: kernel loading and heuristics stay out of the capture
    CUDA_CHECK(cudaStreamSynchronize(stream));
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    enqueue_all();
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CublasLoopGraph() {
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
  }
  CublasLoopGraph(const CublasLoopGraph&) = delete;
  CublasLoopGraph& operator=(const CublasLoopGraph&) = delete;

  void launch(cudaStream_t stream) const { CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Baseline 2: cublasGemmGroupedBatchedEx with one group (of one problem)
// per used expert. Shapes, leading dimensions and scalars are host arrays;
// the matrix pointer arrays live on the device and are uploaded here, once.
class CublasGrouped {
 public:
  explicit CublasGrouped(const MoeProblem& p) {
    const auto groups = group_gemms(p);
    const size_t count = groups.size();
    const int n = static_cast<int>(p.shape.n), k = static_cast<int>(p.shape.k);
    transa_.assign(count, CUBLAS_OP_T);
    transb_.assign(count, CUBLAS_OP_N);
    m_.assign(count, n);  // the same mapping as gemm_rows_times_wt
    k_.assign(count, k);
    lda_.assign(count, k);
    ldb_.assign(count, k);
    ldc_.assign(count, n);
    group_size_.assign(count, 1);
    alpha_.assign(count, 1.0f);
    beta_.assign(count, 0.0f);
    std::vector<const void*> w_ptrs, a_ptrs;
    std::vector<void*> c_ptrs;
    for (const GroupGemm& g : groups) {
      n_.push_back(g.rows);
      w_ptrs.push_back(g.w);
      a_ptrs.push_back(g.a);
      c_ptrs.push_back(g.c);
    }
    w_ptrs_ = upload(w_ptrs.data(), count * sizeof(void*));
    a_ptrs_ = upload(a_ptrs.data(), count * sizeof(void*));
    c_ptrs_ = upload(c_ptrs.data(), count * sizeof(void*));
  }

  cublasStatus_t run(cublasHandle_t h) const {
    return cublasGemmGroupedBatchedEx(
        h, transa_.data(), transb_.data(), m_.data(), n_.data(), k_.data(), alpha_.data(),
        w_ptrs_.as<const void* const>(), CUDA_R_16BF, lda_.data(),
        a_ptrs_.as<const void* const>(), CUDA_R_16BF, ldb_.data(), beta_.data(),
        c_ptrs_.as<void* const>(), CUDA_R_16BF, ldc_.data(), static_cast<int>(m_.size()),
        group_size_.data(), CUBLAS_COMPUTE_32F);
  }

 private:
  std::vector<cublasOperation_t> transa_, transb_;
  std::vector<int> m_, n_, k_, lda_, ldb_, ldc_, group_size_;
  std::vector<float> alpha_, beta_;
  DeviceBuffer w_ptrs_, a_ptrs_, c_ptrs_;
};

}  // namespace ggemm::bench

#endif  // GGEMM_BENCH_CUBLAS_BASELINES_H
