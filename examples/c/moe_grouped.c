/*
 * moe_grouped.c: ggemm from plain C99.
 *
 * One small Mixture-of-Experts grouped matrix product on device 0:
 * 4 experts, 5 groups of ragged sizes (one empty, one inactive), bf16 in and
 * out, weights W[E, N, K] (transpose_b = 1). Device memory comes from the CUDA
 * runtime; the result is checked element by element against a host
 * computation. Exit status: 0 on success and when there is no usable GPU
 * (it prints why), 1 on a mismatch or an error.
 *
 * Build against an installed ggemm (see examples/README.md):
 *   cc -std=c99 moe_grouped.c $(pkg-config --cflags --libs ggemm) \
 *      -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lcudart
 */
#include <ggemm.h>

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { E = 4, G = 5, N = 64, K = 128 };

/* Group g owns rows [offsets[g], offsets[g + 1]) and uses expert ids[g]. */
static const uint32_t kRows[G] = {7, 0, 21, 4, 12};
static const int32_t kIds[G] = {2, 0, 3, -1, 1}; /* -1: inactive, rows zeroed */

/* bf16 <-> float on the host: bf16 is the top half of an IEEE float. */
static uint16_t float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even (inputs are finite) */
  return (uint16_t)(u >> 16);
}
static float bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Small multiples of 1/8 in [-1, 1]: exact in bf16, so the products and
 * their sums are exact in the kernel's fp32 accumulator and in the host's
 * double; the only difference left is the final rounding to bf16. */
static uint32_t rng_state = 12345u;
static float next_value(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((int)((rng_state >> 16) % 17u) - 8) / 8.0f;
}

#define CUDA_CHECK(call)                                                              \
  do {                                                                                \
    cudaError_t err_ = (call);                                                        \
    if (err_ != cudaSuccess) {                                                        \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                   \
              cudaGetErrorString(err_));                                              \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

int main(void) {
  ggemm_handle_t handle = NULL;
  ggemm_grouped_matmul_args args;
  uint32_t offsets[G + 1], stats[2];
  uint16_t *h_a, *h_w, *h_c;
  void *d_a, *d_w, *d_c, *d_offsets, *d_ids, *d_stats;
  cudaStream_t stream;
  int64_t m = 0;
  uint32_t max_rows = 0;
  int g, r, n, k, bad = 0;
  double max_err = 0.0;

  printf("ggemm %d (header %d)\n", ggemm_version(), GGEMM_VERSION);

  /* 1. The handle first: without a driver or a GPU, ggemm says so. */
  {
    ggemm_status s = ggemm_create(&handle, 0);
    if (s == GGEMM_STATUS_DRIVER_NOT_FOUND || s == GGEMM_STATUS_NO_DEVICE ||
        s == GGEMM_STATUS_UNSUPPORTED_DEVICE) {
      printf("SKIPPED: no usable GPU, nothing to run: %s: %s\n", ggemm_status_string(s),
             ggemm_last_error_message());
      return 0;
    }
    if (s != GGEMM_STATUS_SUCCESS) {
      fprintf(stderr, "ggemm_create: %s: %s\n", ggemm_status_string(s), ggemm_last_error_message());
      return 1;
    }
  }

  /* 2. Routing: prefix sums of the group sizes, and the device-read counts. */
  offsets[0] = 0;
  for (g = 0; g < G; ++g) {
    offsets[g + 1] = offsets[g] + kRows[g];
    if (kRows[g] > max_rows) max_rows = kRows[g];
  }
  m = offsets[G];
  stats[0] = max_rows; /* max rows in any group */
  stats[1] = G;        /* groups walked this call */

  /* 3. Host data: A[M, K], W[E, N, K]; C is poisoned (0xFF = NaN) so that a
   *    row the kernel failed to write cannot pass. */
  h_a = malloc((size_t)m * K * sizeof *h_a);
  h_w = malloc((size_t)E * N * K * sizeof *h_w);
  h_c = malloc((size_t)m * N * sizeof *h_c);
  if (!h_a || !h_w || !h_c) {
    fprintf(stderr, "host allocation failed\n");
    return 1;
  }
  for (r = 0; r < m * K; ++r) h_a[r] = float_to_bf16(next_value());
  for (r = 0; r < E * N * K; ++r) h_w[r] = float_to_bf16(next_value());

  CUDA_CHECK(cudaSetDevice(0)); /* the runtime shares the primary context with ggemm */
  CUDA_CHECK(cudaStreamCreate(&stream));
  CUDA_CHECK(cudaMalloc(&d_a, (size_t)m * K * 2));
  CUDA_CHECK(cudaMalloc(&d_w, (size_t)E * N * K * 2));
  CUDA_CHECK(cudaMalloc(&d_c, (size_t)m * N * 2));
  CUDA_CHECK(cudaMalloc(&d_offsets, sizeof offsets));
  CUDA_CHECK(cudaMalloc(&d_ids, sizeof kIds));
  CUDA_CHECK(cudaMalloc(&d_stats, sizeof stats));
  CUDA_CHECK(cudaMemcpy(d_a, h_a, (size_t)m * K * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_w, h_w, (size_t)E * N * K * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_offsets, offsets, sizeof offsets, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_ids, kIds, sizeof kIds, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_stats, stats, sizeof stats, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemset(d_c, 0xFF, (size_t)m * N * 2));

  /* 4. One grouped matmul, enqueued on our stream. */
  memset(&args, 0, sizeof args);
  args.struct_size = sizeof args;
  args.a_dtype = GGEMM_DTYPE_BF16;
  args.b_dtype = GGEMM_DTYPE_BF16;
  args.c_dtype = GGEMM_DTYPE_BF16;
  args.m = m;
  args.n = N;
  args.k = K;
  args.num_experts = E;
  args.a = d_a;
  args.b = d_w;
  args.c = d_c;
  args.transpose_b = 1; /* W is [E, N, K] */
  args.a_offsets = (const uint32_t *)d_offsets;
  args.expert_ids = (const int32_t *)d_ids;
  args.expert_usage_stats = (const uint32_t *)d_stats;
  args.num_groups = G;
  args.max_rows_per_group = max_rows;
  args.epilogue = GGEMM_EPILOGUE_STORE;
  args.config = NULL; /* automatic */
  {
    ggemm_status s = ggemm_grouped_matmul(handle, &args, stream);
    if (s != GGEMM_STATUS_SUCCESS) {
      fprintf(stderr, "ggemm_grouped_matmul: %s: %s\n", ggemm_status_string(s), ggemm_last_error_message());
      return 1;
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaMemcpy(h_c, d_c, (size_t)m * N * 2, cudaMemcpyDeviceToHost));

  /* 5. Check every element against the host: C[m, n] = sum_k A[m, k] W[e][n, k]. */
  for (g = 0; g < G; ++g) {
    for (r = (int)offsets[g]; r < (int)offsets[g + 1]; ++r) {
      for (n = 0; n < N; ++n) {
        double ref = 0.0, got = bf16_to_float(h_c[(size_t)r * N + n]), err;
        if (kIds[g] >= 0) {
          const uint16_t *w = h_w + ((size_t)kIds[g] * N + n) * K;
          for (k = 0; k < K; ++k) ref += (double)bf16_to_float(h_a[(size_t)r * K + k]) * bf16_to_float(w[k]);
        }
        err = fabs(got - ref);
        if (!(err <= 1e-3 + fabs(ref) / 128.0)) { /* bf16 keeps 8 bits: half an ulp is 1/256 */
          if (bad < 10)
            fprintf(stderr, "MISMATCH at row %d (group %d, expert %d) col %d: got %g, expected %g\n", r, g,
                    (int)kIds[g], n, got, ref);
          ++bad;
        } else if (err > max_err) {
          max_err = err;
        }
      }
    }
  }

  CUDA_CHECK(cudaFree(d_a));
  CUDA_CHECK(cudaFree(d_w));
  CUDA_CHECK(cudaFree(d_c));
  CUDA_CHECK(cudaFree(d_offsets));
  CUDA_CHECK(cudaFree(d_ids));
  CUDA_CHECK(cudaFree(d_stats));
  CUDA_CHECK(cudaStreamDestroy(stream));
  ggemm_destroy(handle);
  free(h_a);
  free(h_w);
  free(h_c);

  if (bad) {
    fprintf(stderr, "FAILED: %d of %lld elements differ from the host computation\n", bad, (long long)(m * N));
    return 1;
  }
  printf("OK: %lld x %d output of %d groups over %d experts matches the host (max abs error %.3g)\n",
         (long long)m, N, G, E, max_err);
  return 0;
}
