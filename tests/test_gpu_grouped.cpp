// GPU tests of ggemm_grouped_matmul against the CPU reference, a call for
// each case of the table below: fresh random inputs every case, outputs
// poisoned (0xFF) before the call, so unwritten or wrongly written elements
// fail, and rows outside every group must keep their poison bit for bit.
// Skipped, with the reason, without a GPU. Graph replay and chained calls:
// test_gpu_grouped_graph.cpp; malformed routing and gather indices:
// test_gpu_grouped_hostile.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_grouped_problem.h"

namespace ggemm::testing {
namespace {

class GroupedMatmulGpu : public ::testing::TestWithParam<Case> {};

TEST_P(GroupedMatmulGpu, MatchesReference) {
  GGEMM_REQUIRE_GPU(handle);
  const Case &c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  Rng rng(seed);
  Problem p(c, rng);
  ASSERT_NO_FATAL_FAILURE(upload(p));
  const ggemm_config cfg = make_config(c);
  const bool override = c.tile_m || c.swizzle || c.stages || c.cluster_m;
  ggemm_grouped_matmul_args dev = p.args(true, override ? &cfg : nullptr);
  GGEMM_OK(ggemm_grouped_matmul(handle, &dev, nullptr));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<uint8_t> got(p.c_init.size());
  CUDA_OK(cudaMemcpy(got.data(), p.d_c.get(), got.size(), cudaMemcpyDeviceToHost));
  const std::vector<uint8_t> expected = reference_output(p);
  EXPECT_TRUE(compare_matrix(c.out, expected.data(), got.data(), p.m, p.c_cols, default_atol(c.out, c.k),
                             default_rtol(c.out)));
}

std::vector<Case> cases() {
  std::vector<Case> v;
  auto add = [&](Case c) { v.push_back(std::move(c)); };
  const std::vector<int64_t> ragged = {27, 1500, 300, 150};

  // Ragged groups, both weight layouts, every dtype pair.
  for (bool tb : {true, false})
    for (ggemm_dtype in : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
      for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32}) {
        Case c;
        c.name = std::string("ragged_") + (tb ? "kmajor_" : "mnmajor_") + dtype_label(in) + "_" +
                 dtype_label(out);
        c.rows = ragged;
        c.n = 384;
        c.k = 520;
        c.in = in;
        c.out = out;
        c.transpose_b = tb;
        add(c);
      }
  // Extreme N and K (multiples of 8, not of the tiles).
  for (bool tb : {true, false}) {
    const std::string l = tb ? "_kmajor" : "_mnmajor";
    add({"wide_n14336_k64" + l, {40, 3, 200}, {}, 14336, 64, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"deep_k14336_n64" + l, {100, 1, 260}, {}, 64, 14336, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"n4096_k4096" + l, {130, 70}, {}, 4096, 4096, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"tiny_n8_k8" + l, {3, 17, 1}, {}, 8, 8, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb});
    add({"odd_n200_k72" + l, {33, 90}, {}, 200, 72, 2, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32, tb});
  }
  // K-sliced stages (several 64-wide slices of K per TMA box; the config
  // rules take the fewest slices making a stage >= 20 KB,
  // ChooseSm90Config.KSliced...). Two slices: decode tiles (tile_m 16) with
  // 128-row weight boxes, K of 9 and 7 slices (the last stage half past K),
  // fp16 out. Four slices: narrow (shrink-like) weight boxes of 48 and 40
  // rows on tile_m 16 (few tiles: the rules halve tile_m), K of 17 slices
  // (the last stage one real slice, three past K), fp16 in with the
  // accumulate epilogue, and bf16 in with fp32 out.
  add({"sliced2_k576_n200", {9, 16, 3, 0, 12}, {}, 200, 576, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, true});
  add({"sliced2_k448_n1024", {16, 9, 13, 0, 16, 5, 11, 2}, {}, 1024, 448, 5, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16,
       true});
  {
    Case c{"sliced4_narrow_n48_k1088_fp16_accumulate"};
    c.rows = {20, 31, 7};
    c.n = 48;
    c.k = 1088;
    c.in = GGEMM_DTYPE_FP16;
    c.out = GGEMM_DTYPE_FP32;
    c.epilogue = GGEMM_EPILOGUE_ACCUMULATE;
    add(c);
  }
  add({"sliced4_narrow_n40_k1088_fp32", {13, 16, 0, 7}, {}, 40, 1088, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32, true});
  // Many decode-sized groups (1..16 rows) over many experts; -1 and empty groups.
  {
    Case c{"decode_256_groups"};
    for (int g = 0; g < 256; ++g) c.rows.push_back(1 + (g * 7) % 16);
    c.n = 256;
    c.k = 512;
    c.num_experts = 300;
    for (int g = 0; g < 256; ++g) c.experts.push_back(g % 11 == 5 ? -1 : (g * 37) % 300);
    add(c);
  }
  {
    Case c{"empty_and_inactive_groups"};
    c.rows = {0, 64, 0, 0, 129, 1, 0, 300, 0};
    c.experts = {0, 1, -1, 2, -1, 3, 1, 0, 2};
    c.n = 640;
    c.k = 136;
    add(c);
  }
  {
    Case c{"one_group"};
    c.rows = {1000};
    c.n = 512;
    c.k = 512;
    c.unowned_rows = 0;
    add(c);
  }
  {
    Case c{"skewed_128_groups"};
    for (int g = 0; g < 128; ++g) c.rows.push_back(g == 3 ? 2000 : (g % 5 == 0 ? 0 : g % 9));
    c.n = 256;
    c.k = 256;
    c.num_experts = 128;
    add(c);
  }
  {
    // Large groups: the token-major kernel's tiles, its partial token tiles
    // at every group's end (on the persistent kernel, in the forced-off run:
    // tile_m 256 and a narrower MMA for each group's last row block).
    Case c{"large_groups_auto_tile"};
    c.rows = {600, 700, 513, 1100};
    c.n = 384;
    c.k = 320;
    add(c);
  }
  // The token-major kernel (prefill: 128 rows a group or more, K-major,
  // 16-bit outputs, store or row scale): ragged groups with partial token
  // tiles, an inactive and an empty group, N past its 192-feature tiles and
  // its 64-feature chunks, K past its 64-wide stages; each operand and
  // output dtype; N below one tile (a narrower weight box); group ends.
  {
    Case c{"token_major_ragged_bf16"};
    c.rows = {129, 300, 0, 1000, 127, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 1000;
    c.k = 200;
    add(c);
  }
  {
    Case c{"token_major_row_scale_fp16_bf16"};
    c.rows = {200, 385, 140};
    c.n = 456;
    c.k = 520;
    c.in = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  {
    // N below one tile: the persistent kernel in the automatic plan, the
    // token-major one's narrow weight box in the forced run.
    Case c{"token_major_n104_row_scale_bf16_fp16"};
    c.rows = {300, 260};
    c.n = 104;
    c.k = 64;
    c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  // Several tiles a CTA (~300 tiles on 132 SMs): both consumer warpgroups,
  // their order barriers, the skipped stages, inactive tiles owned by
  // either; K of 4 stages, and of 3 (the 4-stage ring wraps mid-tile).
  for (int64_t k : {200, 136}) {
    Case c{"token_major_many_tiles_k" + std::to_string(k)};
    c.rows = {1500, 700, 2100, 900, 1300};
    c.experts = {0, -1, 1, 2, 3};
    c.n = 1000;
    c.k = k;
    if (k == 136) c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    add(c);
  }
  {
    Case c{"token_major_group_ends_fp16"};
    c.rows = {400, 129, 513};
    c.n = 384;
    c.k = 2048;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.group_ends = true;
    add(c);
  }
  // The token-major SwiGLU kernel (N = 2I, 96 output features a tile as
  // three 32-feature chunks): I past its tiles by 40 features (a partial
  // chunk and a chunk wholly past I) and by 8 (one octet), ragged groups
  // with partial token tiles, inactive and empty groups, many tiles a CTA
  // with the ring wrapping mid-tile (K 136), fp16 and mixed dtypes, group
  // ends.
  {
    Case c{"token_major_swiglu_ragged_i1000_bf16"};
    c.rows = {129, 300, 0, 1000, 127, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 2000;
    c.k = 200;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"token_major_swiglu_many_tiles_i776_fp16"};
    c.rows = {1500, 700, 2100, 900, 1300};
    c.experts = {0, -1, 1, 2, 3};
    c.n = 1552;
    c.k = 136;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"token_major_swiglu_group_ends_bf16_fp16"};
    c.rows = {400, 129, 513};
    c.n = 384;
    c.k = 2048;
    c.out = GGEMM_DTYPE_FP16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.group_ends = true;
    add(c);
  }
  {
    Case c{"active_count_below_groups"};
    c.rows = {50, 60, 70, 80};
    c.active = 2;  // groups 2 and 3 are past the active count: untouched
    add(c);
  }
  {
    Case c{"zero_active_groups"};
    c.rows = {50, 60};
    c.active = 0;
    add(c);
  }
  // Activation planes (LoRA Q/K/V layout), aligned and unaligned to the tile.
  for (bool tb : {true, false}) {
    const std::string l = tb ? "_kmajor" : "_mnmajor";
    add({"planes_aligned" + l, {37, 300, 5}, {}, 768, 64, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 512, 640});
    add({"planes_unaligned" + l, {37, 300, 5}, {}, 584, 128, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 328,
         456});
  }
  // Epilogues.
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32}) {
    for (ggemm_epilogue e : {GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
      Case c;
      c.name = std::string(e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : "row_scale_") + dtype_label(out);
      c.rows = {27, 400, 0, 150};
      c.experts = {0, 1, 2, -1};
      c.n = 384;
      c.k = 256;
      c.out = out;
      c.epilogue = e;
      add(c);
    }
  }
  // The row-scale epilogue at tile_m 256, whose weights come through shared
  // memory (ptx/sm90/row_scales.h): two multiplying warpgroups and one (N
  // 64, narrow tiles), pairs, groups above and below one staging chunk (128
  // rows), an inactive group, both 16-bit outputs, K of two stages (the
  // ring holds whole tiles: a warpgroup may run a tile ahead) and of many.
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
    for (int64_t n : {int64_t(384), int64_t(64)})
      for (int64_t k : {int64_t(128), int64_t(520)})
        for (int cluster : {1, 2}) {
          if (cluster == 2 && (n == 64 || out == GGEMM_DTYPE_FP16)) continue;
          Case c;
          c.name = "row_scale_tile_m256_n" + std::to_string(n) + "_k" + std::to_string(k) +
                   (cluster == 2 ? "_cluster2_" : "_") + dtype_label(out);
          c.rows = {27, 400, 0, 150, 600, 256};
          c.experts = {0, 1, 2, -1, 3, 1};
          c.n = n;
          c.k = k;
          c.in = c.out = out;
          c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
          c.tile_m = 256;
          c.cluster_m = cluster == 2 ? 2 : 0;
          add(c);
        }
  {
    // MN-major weights, N 64: two warpgroups, the second with no columns
    // (it still takes part in the row scales' barriers).
    Case c{"row_scale_tile_m256_mnmajor_n64"};
    c.rows = {27, 400, 0, 150, 600, 256};
    c.experts = {0, 1, 2, -1, 3, 1};
    c.n = 64;
    c.k = 520;
    c.transpose_b = false;
    c.epilogue = GGEMM_EPILOGUE_ROW_SCALE;
    c.tile_m = 256;
    add(c);
  }
  // SwiGLU (gate rows [0, I), up rows [I, 2I); C [M, I]) and gather on load
  // (row m reads A row a_row_index[m]), apart and together: I a multiple of
  // 64 and not (a partial last tile), I = 8 (one octet), decode tiles of 16
  // tokens (a staging chunk of two octets), large groups on the automatic
  // tile_m 256 (two staging chunks), inactive and empty groups, fp16, and
  // indices outside A (they read zeros).
  for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16}) {
    Case c{std::string("swiglu_i200_") + dtype_label(out)};
    c.rows = {27, 400, 0, 150};
    c.experts = {0, 1, 2, -1};
    c.n = 400;
    c.k = 256;
    c.in = out;
    c.out = out;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
  }
  {
    Case c{"swiglu_i768_k2048_large_groups"};
    c.rows = {600, 9, 513, 1100};
    c.n = 1536;
    c.k = 2048;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    add(c);
    c.name = "swiglu_i8_tile16";
    c.rows = {3, 16, 1, 40};
    c.n = 16;
    c.k = 72;
    c.tile_m = 16;
    add(c);
  }
  // Decode's narrow tiles past a wave (runtime/plan_rules.h, narrow_tiles):
  // 9 routed rows in 10 groups (one empty, one inactive) x 22 wide column
  // blocks = 198 wide tiles, whose last wave of 66 runs on half the H200's
  // SMs, so 64-feature tiles. Every epilogue; SwiGLU's narrow tile is 4
  // octet pairs (I 1400: the last tile has 3, the box's fourth past I), with
  // and without gather on load, both 16-bit types.
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU})
    for (ggemm_dtype t : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16})
      for (bool gather : {false, true}) {
        if (e != GGEMM_EPILOGUE_SWIGLU && (gather || t == GGEMM_DTYPE_FP16)) continue;
        Case c{std::string("decode_narrow_last_wave_") + (gather ? "gather_" : "") +
               (e == GGEMM_EPILOGUE_STORE ? "store_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "swiglu_") +
               dtype_label(t)};
        c.rows = {1, 1, 0, 1, 1, 1, 1, 1, 1, 1};
        c.experts = {0, 1, 2, 3, -1, 5, 6, 7, 8, 9};
        c.num_experts = 10;
        c.n = 2800;
        c.k = 192;
        c.in = c.out = t;
        c.epilogue = e;
        c.gather_rows = gather ? 6 : 0;
        c.unowned_rows = 0;  // M = 9 <= 10 groups: decode (rows past the groups would make M 14)
        add(c);
      }
  for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ROW_SCALE, GGEMM_EPILOGUE_SWIGLU}) {
    Case c{std::string("gather_") +
           (e == GGEMM_EPILOGUE_STORE ? "store" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "swiglu")};
    c.rows = {27, 400, 0, 150, 8};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 384;
    c.k = 320;
    c.epilogue = e;
    c.gather_rows = 97;
    add(c);
  }
  {
    Case c{"gather_hostile_indices_fp16"};
    c.rows = {31, 64, 5};
    c.n = 256;
    c.k = 128;
    c.in = c.out = GGEMM_DTYPE_FP16;
    c.gather_rows = 40;
    c.hostile_index = true;
    add(c);
    c.name = "gather_swiglu_large_groups";
    c.rows = {600, 700, 513, 1100};
    c.n = 1536;
    c.k = 512;
    c.in = c.out = GGEMM_DTYPE_BF16;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = 2000;
    c.hostile_index = false;
    add(c);
    c.name = "gather_decode_tile16";
    c.rows = {1, 2, 1, 3, 1, 1, 1, 1};
    c.num_experts = 8;
    c.n = 512;
    c.k = 1024;
    c.epilogue = GGEMM_EPILOGUE_STORE;
    c.gather_rows = 3;
    add(c);
    // K <= 32, whose automatic swizzle without a gather is 64 or 32 bytes:
    // gathered rows land 128 bytes apart whatever K (a one-row box at a
    // 64-byte offset was a misaligned TMA destination), past K zero fill.
    for (int64_t k : {24, 16}) {
      c.name = "gather_short_k" + std::to_string(k);
      c.rows = {9, 40, 0, 3};
      c.num_experts = 4;
      c.n = 200;
      c.k = k;
      c.gather_rows = 50;
      c.hostile_index = true;
      add(c);
    }
  }
  // sm_90a's short-K kernel (K <= 128, K-major; the automatic config takes it
  // where its tiles fit one wave, as here): every output dtype and
  // epilogue, inactive (-1) and empty groups, K not a multiple of 16 (the
  // MMA's K is zero-filled), tiles of 8, 16 and 32 tokens, a partial
  // column block, fp16 operands, activation planes with segment views.
  // One case per output dtype and epilogue (fp16 operands for fp16 outputs,
  // bf16 otherwise), named prefix + epilogue + dtype.
  auto add_every_output_and_epilogue = [&](const std::string &prefix, std::vector<int64_t> rows,
                                           std::vector<int32_t> experts, int64_t n, int64_t k) {
    for (ggemm_dtype out : {GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
      for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
        Case c;
        c.name = prefix +
                 (e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "store_") +
                 dtype_label(out);
        c.rows = rows;
        c.experts = experts;
        c.n = n;
        c.k = k;
        c.in = out == GGEMM_DTYPE_FP16 ? GGEMM_DTYPE_FP16 : GGEMM_DTYPE_BF16;
        c.out = out;
        c.epilogue = e;
        add(c);
      }
  };
  add_every_output_and_epilogue("short_k_", {5, 0, 30, 3, 14}, {0, 1, -1, 2, 1}, 200, 24);
  add({"short_k_tile8_k8", {1, 7, 8, 2}, {}, 136, 8, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true});
  add({"short_k_tile32_k128", {20, 64, 33}, {}, 392, 128, 3, GGEMM_DTYPE_FP16, GGEMM_DTYPE_BF16, true});
  add({"short_k_planes_k72", {9, 30, 2}, {}, 584, 72, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, 328, 456});
  // The split short-K kernel (a cluster of 8 CTAs a tile, each a slice of
  // K; decode groups with 128 < K <= 4096, few tiles: the automatic config
  // takes it here): every output dtype and epilogue at K 1000 (slices of
  // 128, the last one 104 long), -1 and empty groups; K 136 (slices of 32:
  // ranks 5-7 hold no K at all); K 4096 over two column blocks; fp16
  // operands; activation planes with segment views.
  add_every_output_and_epilogue("short_k_split_", {5, 0, 8, 3, 7}, {0, 1, -1, 2, 1}, 48, 1000);
  // The decode GEMV (ptx/sm90/decode_gemv.cuh; groups of at most 8 rows as
  // the caller's bound tells): K past a multiple of 256 (a lane's second
  // 256-element step only partly inside K), N past a multiple of 32 (a
  // partial last tile whose warps 1 to 3 hold no rows), groups of 0 to 8
  // rows (tiles of 4: the groups of 5 and 8 take two), an inactive group;
  // every output and epilogue. Then SwiGLU with a partial last tile (I 24:
  // tiles of 16 and 8 outputs), plain and gathering with hostile indices.
  // The GEMV runs them in the forced-plan suite (--decode_gemv=
  // where_possible, which puts it before the short-K kernels); the
  // automatic plan gives calls this small to the split short-K kernel.
  add_every_output_and_epilogue("decode_gemv_", {1, 0, 3, 8, 2, 5, 1}, {0, 1, -1, 2, 3, 0, 1}, 72, 264);
  for (bool gather : {false, true}) {
    Case c{std::string("decode_gemv_swiglu_i24_") + (gather ? "gather_hostile" : "plain")};
    c.rows = {1, 2, 0, 4, 1};
    c.experts = {0, 1, 2, -1, 3};
    c.n = 48;
    c.k = 520;
    c.epilogue = GGEMM_EPILOGUE_SWIGLU;
    c.gather_rows = gather ? 7 : 0;
    c.hostile_index = gather;
    c.unowned_rows = 0;
    add(c);
  }
  // Tiles of 1 row under the automatic plan (8 groups of 1 row, the bound
  // 1): Qwen3-30B-A3B's gate_up and down at one token, 384 and 512 tiles,
  // which on the H200's 132 SMs take the kernels of three and of four CTAs
  // an SM (decode_gemv_layout.h); store, row scale, fp32 accumulate.
  for (const auto &[n, k] : {std::pair<int64_t, int64_t>{1536, 2048}, {2048, 768}})
    for (const auto &[epilogue, out] : {std::pair{GGEMM_EPILOGUE_STORE, GGEMM_DTYPE_BF16},
                                        {GGEMM_EPILOGUE_ROW_SCALE, GGEMM_DTYPE_BF16},
                                        {GGEMM_EPILOGUE_ACCUMULATE, GGEMM_DTYPE_FP32}}) {
      Case c{"decode_gemv_one_row_n" + std::to_string(n) + "_" +
             (epilogue == GGEMM_EPILOGUE_STORE ? "store" : epilogue == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale" : "accumulate")};
      c.rows = {1, 1, 1, 1, 1, 1, 1, 1};
      c.num_experts = 8;
      c.n = n;
      c.k = k;
      c.out = out;
      c.epilogue = epilogue;
      add(c);
    }
  add({"short_k_split_k136", {8, 2, 0, 6}, {}, 104, 136, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true});
  add({"short_k_split_k4096_two_col_blocks", {8, 5, 8, 1}, {}, 192, 4096, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_FP32,
       true});
  add({"short_k_split_tile16_fp16", {16, 12, 9}, {}, 136, 512, 3, GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP16, true});
  add({"short_k_split_planes_k512", {3, 8, 2}, {}, 584, 512, 3, GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, true, 328,
       456});
  // Tiles of 64 features, one consumer warpgroup multiplying (narrow_tiles
  // in runtime/plan_rules.h; CPU test Sm90Plan.NarrowTilesWhere...): decode
  // groups of 1..16 rows, so few that tiles of 128 would fill at most half
  // the SMs, K past the split short-K kernel's 4096: every output dtype and
  // epilogue, -1 and empty groups, N 1096 (a last column block of 8).
  add_every_output_and_epilogue("narrow_tiles_", {1, 0, 16, 3}, {0, 1, -1, 2}, 1096, 4160);
  // A decode call listing every expert, as torch's offs do: 300 groups, 9 of
  // them routed, placed so that the warp walk (GroupedTileScheduler::
  // next_warp, 32 groups a step) stops at group 0, at a step's last and
  // first lanes, crosses steps of empty groups, and ends on the last group;
  // with narrow tiles (N 2048: M 28, 28 x 16 = 448 wide tiles, a last wave
  // of 52; N 512: 112, short of a wave), and with wide ones (N 2048 under a
  // config, which keeps tiles wide); all again as group ends (below).
  for (int64_t n : {2048, 512, -2048}) {
    Case c{"decode_listing_every_expert_n" + std::to_string(n < 0 ? -n : n) + (n < 0 ? "_wide" : "")};
    c.rows.assign(300, 0);
    for (int g : {0, 31, 32, 95, 96, 200, 263, 298, 299}) c.rows[size_t(g)] = 1 + g % 5;
    c.n = n < 0 ? -n : n;
    c.k = 768;
    c.num_experts = 16;  // group g multiplies expert g % 16
    if (n < 0) c.tile_m = 16;
    add(c);
  }
  // Its routing table holds 256 groups: exactly that many, and more (the
  // walk then reads global memory). One column block and groups of at most
  // 8 rows, so the rule takes the kernel for both (CPU test
  // Sm90ShortK.TakesManyDecodeGroupsPastItsRoutingTable).
  for (int groups : {256, 300}) {
    Case c{"short_k_" + std::to_string(groups) + "_groups"};
    for (int g = 0; g < groups; ++g) c.rows.push_back(g % 13 == 4 ? 0 : 1 + (g * 5) % 8);
    c.n = 120;
    c.k = 16;
    c.num_experts = 40;
    for (int g = 0; g < groups; ++g) c.experts.push_back(g % 11 == 5 ? -1 : (g * 7) % 40);
    add(c);
  }
  // Decode routing at its most fragmented: groups of one row or none (up to
  // 8 groups in one 8-token tile's rows), -1 and out-of-range expert ids;
  // and the decode expand's shape in small, 8 groups of 8 rows filling M =
  // 64 with no unowned rows, three segments of activation planes. (Written
  // for a resident short-K kernel that was refuted and not landed, see
  // docs/performance.md; they run on the tiled kernel, automatic and forced
  // where possible: ggemm_tests_forced_plan.)
  {
    Case c{"short_k_one_row_groups"};
    for (int g = 0; g < 60; ++g) c.rows.push_back(g % 7 == 3 ? 0 : 1);
    for (int g = 0; g < 60; ++g) c.experts.push_back(g % 9 == 4 ? -1 : g % 13 == 6 ? 99 : g % 40);
    c.n = 264;
    c.k = 16;
    c.num_experts = 40;
    c.unowned_rows = 3;
    add(c);
  }
  {
    Case c{"short_k_decode_expand_shape"};
    c.rows = {8, 8, 8, 8, 8, 8, 8, 8};
    c.experts = {3, 0, 7, 1, 6, 2, 5, 4};
    c.n = 1024 + 2 * 256;
    c.k = 16;
    c.num_experts = 8;
    c.split0 = 1024;
    c.split1 = 1280;
    c.unowned_rows = 0;
    add(c);
  }
  // Every tile_m the heuristic or an override can choose, both layouts.
  for (bool tb : {true, false})
    for (int tm : {16, 32, 64, 128, 256}) {
      Case c;
      c.name = std::string("tile_m") + std::to_string(tm) + (tb ? "_kmajor" : "_mnmajor");
      c.rows = {5, 300, 17, 600};
      c.n = 264;
      c.k = 200;
      c.transpose_b = tb;
      c.tile_m = tm;
      add(c);
    }
  // Pairs sharing their token tile through TMA multicast (cluster_m 2): odd
  // column-block counts (the second CTA's share of the last pair tile is
  // empty), inactive groups, segment splits with activation planes, both
  // layouts, every epilogue and output dtype the pair kernels have.
  for (bool tb : {true, false})
    for (int tm : {128, 256}) {
      Case c;
      c.name = std::string("cluster2_tile_m") + std::to_string(tm) + (tb ? "_kmajor" : "_mnmajor");
      c.rows = {5, 300, 0, 17, 600, 130};
      c.experts = {0, 1, 2, -1, 3, 1};
      c.n = 392;  // 4 column blocks, the last partial: pair tiles [0, 256) and [256, 392)
      c.k = 520;
      c.transpose_b = tb;
      c.tile_m = tm;
      c.cluster_m = 2;
      add(c);
    }
  {
    Case c{"cluster2_n136_second_share_partial"};
    c.rows = {129, 77, 256};
    c.n = 136;
    c.k = 64;
    c.tile_m = 128;
    c.cluster_m = 2;
    add(c);
  }
  for (bool tb : {true, false}) {
    Case c{std::string("cluster2_planes") + (tb ? "_kmajor" : "_mnmajor"), {37, 300, 5}, {}, 584, 128, 3,
           GGEMM_DTYPE_BF16, GGEMM_DTYPE_BF16, tb, 328, 456};
    c.tile_m = 128;
    c.cluster_m = 2;
    add(c);
  }
  for (ggemm_dtype out : {GGEMM_DTYPE_FP16, GGEMM_DTYPE_FP32})
    for (ggemm_epilogue e : {GGEMM_EPILOGUE_STORE, GGEMM_EPILOGUE_ACCUMULATE, GGEMM_EPILOGUE_ROW_SCALE}) {
      Case c;
      c.name = std::string("cluster2_") +
               (e == GGEMM_EPILOGUE_ACCUMULATE ? "accumulate_" : e == GGEMM_EPILOGUE_ROW_SCALE ? "row_scale_" : "store_") +
               dtype_label(out);
      c.rows = {27, 400, 0, 150};
      c.experts = {0, 1, 2, -1};
      c.n = 640;
      c.k = 256;
      c.out = out;
      c.epilogue = e;
      c.tile_m = 128;
      c.cluster_m = 2;
      add(c);
    }
  // Swizzle / tile_k overrides and a shallow pipeline.
  for (int sw : {32, 64, 128}) {
    Case c;
    c.name = "swizzle" + std::to_string(sw);
    c.rows = {90, 200};
    c.k = 328;
    c.swizzle = sw;
    add(c);
  }
  {
    Case c{"two_stages"};
    c.rows = {90, 200};
    c.k = 1024;
    c.stages = 2;
    add(c);
  }
  // Odd stage counts of small stages (32- and 64-byte rows, narrow weights)
  // end between two 1024-byte boundaries; the 128B-swizzled epilogue staging
  // after them must not (the stress test's n=120, k=24 call caught it).
  for (int stages : {3, 5}) {
    Case c;
    c.name = "odd_stages" + std::to_string(stages) + "_swizzle32_tile_m16";
    c.rows = {9, 14, 1, 16};
    c.n = 256;
    c.k = 40;
    c.swizzle = 32;
    c.tile_m = 16;
    c.stages = stages;
    add(c);
  }
  {
    Case c{"narrow_n120_k24"};
    c.rows = {1, 71, 80, 7};
    c.experts = {-1, 0, 1, 0};
    c.n = 120;
    c.k = 24;
    c.num_experts = 2;
    add(c);
  }
  // Group ends (torch._grouped_mm's offs) in place of a_offsets, on every
  // kind of kernel: the automatic persistent tiles, tile_m 256 of both
  // layouts and its pairs, SwiGLU's own tile_m 256 kernel, gather, the
  // short-K kernel (its routing table, and past it) and its split form,
  // activation planes, decode's narrow SwiGLU tiles; empty, inactive and
  // uncounted groups.
  for (const char *name :
       {"ragged_kmajor_bf16_bf16", "ragged_mnmajor_fp16_fp32", "empty_and_inactive_groups", "one_group",
        "large_groups_auto_tile", "active_count_below_groups", "zero_active_groups", "tile_m256_kmajor",
        "tile_m256_mnmajor", "cluster2_tile_m256_kmajor", "cluster2_tile_m128_mnmajor",
        "swiglu_i768_k2048_large_groups", "gather_swiglu_large_groups", "gather_decode_tile16", "decode_256_groups",
        "decode_listing_every_expert_n2048", "decode_listing_every_expert_n512",
        "decode_listing_every_expert_n2048_wide",
        "short_k_store_bf16", "short_k_300_groups", "short_k_split_accumulate_fp32", "planes_unaligned_kmajor",
        "row_scale_bf16", "decode_narrow_last_wave_gather_swiglu_bf16"}) {
    const auto found = std::find_if(v.begin(), v.end(), [&](const Case &c) { return c.name == name; });
    if (found == v.end()) continue;  // AreCallsTheAbiAccepts' count catches a renamed case
    Case c = *found;
    c.name += "_group_ends";
    c.group_ends = true;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GroupedMatmulGpu, ::testing::ValuesIn(cases()), CaseName());

// Runs without a GPU: every case above is a call the C ABI accepts, so a
// case written wrong fails here, on the CPU, not on the GPU as a refused
// call (the split K 136 case once asked N 100 and was caught only on the
// H200). The arguments are checked before the handle, so with no handle a
// valid call stops at the handle.
TEST(GroupedMatmulCases, AreCallsTheAbiAccepts) {
  Rng rng(fresh_seed());
  const std::vector<Case> all = cases();
  // 24 from the group-ends list, token_major_group_ends_fp16 and
  // token_major_swiglu_group_ends_bf16_fp16.
  EXPECT_EQ(std::count_if(all.begin(), all.end(), [](const Case &c) { return c.group_ends; }), 26)
      << "a case the group-ends list names is gone";
  for (const Case &c : all) {
    SCOPED_TRACE(c.name);
    const Problem p(c, rng);
    const ggemm_config cfg = make_config(c);
    const bool override = c.tile_m || c.swizzle || c.stages || c.cluster_m;
    ggemm_grouped_matmul_args x = p.args(false, override ? &cfg : nullptr);
    std::vector<uint8_t> out = p.c_init;
    x.c = out.data();
    EXPECT_EQ(ggemm_grouped_matmul(nullptr, &x, nullptr), GGEMM_STATUS_INVALID_HANDLE) << ggemm_last_error_message();
  }
}

}  // namespace
}  // namespace ggemm::testing
