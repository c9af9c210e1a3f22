"""GPU tests: the MoE layer (ggemm.moe_ffn, and its steps moe_route, the
gather + SwiGLU and row-scale grouped matmuls, moe_combine) against an fp32
PyTorch reference of the whole layer, on small and real model shapes.
Skipped, with the reason, without PyTorch, without a CUDA device, or when
ggemm cannot use GPU 0."""

from __future__ import annotations

import zlib

import pytest

import ggemm

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU tests compare against PyTorch")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)"
)

from gpu_routing import DEV  # noqa: E402  (needs torch, so after the skip above)
from moe_reference import TOL, assert_layer, reference  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}

# (hidden, moe ffn, experts, top-k)
SHAPES = {
    "small": (256, 128, 8, 2),
    "qwen3_30b_a3b": (2048, 768, 128, 8),
    "mixtral_8x7b": (4096, 14336, 8, 2),
}
TOKENS = [0, 1, 5, 64, 300]


@pytest.fixture(autouse=True)
def _seed_and_exact_fp32():
    torch.manual_seed(2718)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32, not TF32
    yield
    torch.backends.cuda.matmul.allow_tf32 = tf32


_weights = {}


def weights(shape: str, dtype):
    """w_gate_up [E, 2I, H] and w_down [E, H, I], as a model's (randn / sqrt(K)); made once per module."""
    key = (shape, dtype)
    if key not in _weights:
        if any(other != shape for other, _ in _weights):
            _weights.clear()  # one model's weights at a time: Mixtral's are 2.8 GB per dtype
        h, i, e, _ = SHAPES[shape]
        gen = torch.Generator(device=DEV).manual_seed(zlib.crc32(f"{shape} {dtype}".encode()))
        w_gate_up = (torch.randn(e, 2 * i, h, device=DEV, generator=gen) * h ** -0.5).to(dtype)
        w_down = (torch.randn(e, h, i, device=DEV, generator=gen) * i ** -0.5).to(dtype)
        _weights[key] = (w_gate_up, w_down)
    return _weights[key]


def top_k_routing(tokens: int, experts: int, k: int):
    """Softmax top-k of random router logits, renormalised: int32 ids [T, k] (distinct per token), fp32 weights."""
    probs = torch.softmax(torch.randn(tokens, experts, device=DEV), dim=-1)
    w, ids = torch.topk(probs, k, dim=-1)
    return ids.to(torch.int32), (w / w.sum(-1, keepdim=True)).contiguous()


def poisoned(t, h, dtype):
    return torch.full((t, h), float("nan"), dtype=dtype, device=DEV)


# ---- the layer against the reference --------------------------------------------------


@pytest.mark.parametrize("dt", list(DTYPES))
@pytest.mark.parametrize("tokens", TOKENS)
@pytest.mark.parametrize("shape", list(SHAPES))
def test_layer_matches_the_fp32_reference(handle, shape, tokens, dt):
    dtype = DTYPES[dt]
    h, _, e, k = SHAPES[shape]
    w_gate_up, w_down = weights(shape, dtype)
    x = torch.randn(tokens, h, device=DEV).to(dtype)
    ids, w = top_k_routing(tokens, e, k)
    out = poisoned(tokens, h, dtype)
    assert ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, out, handle=handle) is out
    torch.cuda.synchronize()
    assert_layer(out, reference(x, w_gate_up, w_down, ids, w), f"{shape} T={tokens} {dt}")
    # Allocated by the package: the same bits.
    fresh = ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, handle=handle)
    assert fresh.shape == (tokens, h) and fresh.dtype == dtype and torch.equal(fresh, out)


def test_duplicates_empty_slots_foreign_ids_and_bad_weights(handle):
    """A token naming one expert twice, -1 slots, a token with no expert at all
    (its row must still be written: zeros), ids past the expert count, and
    NaN / inf weights (their slots are dropped)."""
    w_gate_up, w_down = weights("small", torch.bfloat16)
    h, _, e, _ = SHAPES["small"]
    tokens, k = 64, 4
    x = torch.randn(tokens, h, device=DEV).to(torch.bfloat16)
    ids = torch.randint(0, e, (tokens, k), device=DEV, dtype=torch.int32)
    ids[0] = torch.tensor([3, 3, 3, 1])  # duplicates
    ids[1] = torch.tensor([-1, 2, -1, 5])
    ids[2] = -1  # no expert: out[2] == 0
    ids[3] = torch.tensor([e, e + 7, 2, 0])  # outside [0, E): as -1
    w = torch.rand(tokens, k, device=DEV)
    w[4, 1], w[5, 0] = float("nan"), float("inf")
    out = poisoned(tokens, h, torch.bfloat16)
    ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, out, handle=handle)
    torch.cuda.synchronize()
    assert_layer(out, reference(x, w_gate_up, w_down, ids, w))
    assert (out[2] == 0).all()


@pytest.mark.parametrize("all_slots", [False, True], ids=["one_slot_each", "every_slot"])
def test_one_expert_takes_every_token(handle, all_slots):
    w_gate_up, w_down = weights("qwen3_30b_a3b", torch.bfloat16)
    h, _, e, k = SHAPES["qwen3_30b_a3b"]
    tokens = 300
    x = torch.randn(tokens, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(tokens, e, k)
    if all_slots:
        ids.fill_(17)  # every (token, slot) pair on expert 17: one group of T * k rows
    else:
        ids[:, 0] = 17
        ids[:, 1:][ids[:, 1:] == 17] = 18
    out = poisoned(tokens, h, torch.bfloat16)
    ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, out, handle=handle)
    torch.cuda.synchronize()
    assert_layer(out, reference(x, w_gate_up, w_down, ids, w))


def test_expert_parallel_ranges_sum_to_the_whole_layer(handle):
    """Ranks holding experts [0, 8) and [8, 16) of 16: each matches the reference
    of its own experts, and their sum matches the layer with all 16."""
    h, i, e, k, tokens = 512, 256, 16, 4, 300
    w_gate_up = (torch.randn(e, 2 * i, h, device=DEV) * h ** -0.5).to(torch.bfloat16)
    w_down = (torch.randn(e, h, i, device=DEV) * i ** -0.5).to(torch.bfloat16)
    x = torch.randn(tokens, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(tokens, e, k)
    total = torch.zeros(tokens, h, device=DEV)
    for first, local in ((0, 8), (8, 8)):
        wg, wd = w_gate_up[first:first + local], w_down[first:first + local]
        out = poisoned(tokens, h, torch.bfloat16)
        ggemm.moe_ffn(x, wg, wd, ids, w, out, first_expert=first, num_experts=e, handle=handle)
        torch.cuda.synchronize()
        assert_layer(out, reference(x, wg, wd, ids, w, first_expert=first), f"experts [{first}, {first + local})")
        total += out.float()
    assert_layer(total.to(torch.bfloat16), reference(x, w_gate_up, w_down, ids, w), "sum over the ranks")
    # An inner range of 4 experts.
    out = poisoned(tokens, h, torch.bfloat16)
    ggemm.moe_ffn(x, w_gate_up[4:8], w_down[4:8], ids, w, out, first_expert=4, num_experts=e, handle=handle)
    torch.cuda.synchronize()
    assert_layer(out, reference(x, w_gate_up[4:8], w_down[4:8], ids, w, first_expert=4), "experts [4, 8)")


def test_bitwise_determinism(handle):
    w_gate_up, w_down = weights("qwen3_30b_a3b", torch.bfloat16)
    h, _, e, k = SHAPES["qwen3_30b_a3b"]
    x = torch.randn(300, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(300, e, k)
    ids[:50, 1] = ids[:50, 0]  # duplicates too: their order in the sum is fixed by the slot
    first = ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, handle=handle)
    for _ in range(4):
        assert torch.equal(ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, handle=handle), first)


# ---- the steps, one by one ------------------------------------------------------------


def expected_routing(ids, w, first_expert, local_experts):
    """What ggemm_moe_route must write (ggemm.h), computed on the host."""
    t, k = ids.shape
    flat = ids.cpu().reshape(-1).long() - first_expert
    weights_flat = w.cpu().reshape(-1)
    pairs = [p for p in range(t * k) if 0 <= flat[p] < local_experts and torch.isfinite(weights_flat[p])]
    pairs.sort(key=lambda p: (int(flat[p]), p))
    counts = [sum(1 for p in pairs if flat[p] == e) for e in range(local_experts)]
    used = [e for e in range(local_experts) if counts[e]]
    offsets = [0]
    for e in used:
        offsets.append(offsets[-1] + counts[e])
    rows = len(pairs)
    slot_row = [-1] * (t * k)
    for m, p in enumerate(pairs):
        slot_row[p] = m
    pad = t * k - rows
    return {
        "a_offsets": offsets + [rows] * (local_experts - len(used)),
        "expert_ids": used + [-1] * (local_experts - len(used)),
        "usage_stats": [max(counts, default=0), len(used)],
        "row_token": [p // k for p in pairs] + [-1] * pad,
        "row_slot": pairs + [-1] * pad,
        "row_weight": [float(weights_flat[p]) for p in pairs] + [0.0] * pad,
        "slot_row": slot_row,
    }


def test_route_writes_the_sorted_rows_of_the_header(handle):
    tokens, e, k = 64, 16, 4
    ids, w = top_k_routing(tokens, e, k)
    ids[0, 1], ids[1, 2], ids[2, 0] = ids[0, 0], -1, e + 3  # a duplicate, an empty slot, a foreign id
    w[3, 3] = float("nan")
    r = ggemm.moe_route(ids, w, num_experts=e, first_expert=4, local_experts=8, handle=handle)
    torch.cuda.synchronize()
    want = expected_routing(ids, w, 4, 8)
    for name in r._fields:
        got = getattr(r, name).cpu().reshape(-1).tolist()
        assert got == want[name], name


def test_steps_compose_to_the_layer(handle):
    """route, gather + SwiGLU gate_up, row-scaled down, combine: the layer, step by step."""
    w_gate_up, w_down = weights("small", torch.float16)
    h, i, e, k = SHAPES["small"]
    tokens = 300
    x = torch.randn(tokens, h, device=DEV).to(torch.float16)
    ids, w = top_k_routing(tokens, e, k)
    r = ggemm.moe_route(ids, w, num_experts=e, handle=handle)
    act = torch.full((tokens * k, i), float("nan"), dtype=torch.float16, device=DEV)
    ggemm.grouped_matmul(x, w_gate_up, act, r.a_offsets, r.expert_ids, r.usage_stats, a_row_index=r.row_token,
                         epilogue="swiglu", handle=handle)
    y = torch.empty(tokens * k, h, dtype=torch.float16, device=DEV)
    ggemm.grouped_matmul(act, w_down, y, r.a_offsets, r.expert_ids, r.usage_stats, epilogue="row_scale",
                         row_scale=r.row_weight, handle=handle)
    out = ggemm.moe_combine(y, r.slot_row, handle=handle)
    torch.cuda.synchronize()
    assert_layer(out, reference(x, w_gate_up, w_down, ids, w), "the steps")
    # The gathered SwiGLU product alone, group by group, against fp32.
    tok = r.row_token.long()
    bounds = r.a_offsets.tolist()
    for g, expert in enumerate(r.expert_ids.tolist()):
        if expert < 0:
            break
        rows = slice(bounds[g], bounds[g + 1])
        res = x[tok[rows]].float() @ w_gate_up[expert].float().T
        want = (torch.nn.functional.silu(res[:, :i]) * res[:, i:]).to(torch.float16)
        torch.testing.assert_close(act[rows].float(), want.float(), rtol=TOL[torch.float16][0], atol=TOL[torch.float16][1])
    fp32 = ggemm.moe_combine(y, r.slot_row, out_dtype="float32", handle=handle)
    torch.cuda.synchronize()
    assert torch.equal(fp32.to(torch.float16), out)  # one rounding of the same fp32 sum


# ---- torch.compile and CUDA graphs -----------------------------------------------------


def test_compile_fullgraph_matches_eager(handle):
    import ggemm.torch as gt

    w_gate_up, w_down = weights("small", torch.bfloat16)
    h, _, e, k = SHAPES["small"]
    x = torch.randn(64, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(64, e, k)

    def layer(x, ids, w):
        return gt.moe_ffn(x, w_gate_up, w_down, ids, w) * 2 + 1

    eager = layer(x, ids, w)
    compiled = torch.compile(layer, fullgraph=True)(x, ids, w)
    assert torch.equal(compiled, eager)
    assert torch.equal(gt.moe_ffn(x, w_gate_up, w_down, ids, w), ggemm.moe_ffn(x, w_gate_up, w_down, ids, w))


def test_graph_capture_replays_with_new_tokens_ids_and_weights(handle):
    """One call into a given out and one whose out (and workspace) are allocated
    during the capture; replayed with new x, ids and weights copied in."""
    w_gate_up, w_down = weights("qwen3_30b_a3b", torch.bfloat16)
    h, _, e, k = SHAPES["qwen3_30b_a3b"]
    tokens = 64
    x = torch.randn(tokens, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(tokens, e, k)
    out = poisoned(tokens, h, torch.bfloat16)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm: library, kernels, size query
        ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, out, handle=handle)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, out, handle=handle)
        inner = ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, handle=handle)

    for step in range(3):
        new_ids, new_w = top_k_routing(tokens, e, k)
        if step == 2:
            new_ids[:, 0] = 3  # skewed: one expert in every token
        x.copy_(torch.randn(tokens, h, device=DEV).to(torch.bfloat16))
        ids.copy_(new_ids)
        w.copy_(new_w)
        out.fill_(float("nan"))
        graph.replay()
        # Eager calls between replays must not share the graph's workspace.
        eager = ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, handle=handle)
        torch.cuda.synchronize()
        ref = reference(x, w_gate_up, w_down, ids, w)
        assert_layer(out, ref, f"replay {step}, given out")
        assert_layer(inner, ref, f"replay {step}, out allocated in the capture")
        assert torch.equal(eager, out), f"replay {step}: eager and replayed calls differ"


# ---- errors ------------------------------------------------------------------------------


def test_errors_on_the_gpu(handle):
    w_gate_up, w_down = weights("small", torch.bfloat16)
    h, i, e, k = SHAPES["small"]
    x = torch.randn(5, h, device=DEV).to(torch.bfloat16)
    ids, w = top_k_routing(5, e, k)
    with pytest.raises(ValueError, match="CUDA tensor"):
        ggemm.moe_ffn(x.cpu(), w_gate_up, w_down, ids, w, handle=handle)
    with pytest.raises(TypeError, match="topk_ids: dtype int64"):
        ggemm.moe_ffn(x, w_gate_up, w_down, ids.long(), w, handle=handle)
    with pytest.raises(ValueError, match="w_down"):
        ggemm.moe_ffn(x, w_gate_up, w_down[:, :, :64].contiguous(), ids, w, handle=handle)
    # H = 260: the shapes agree, the library refuses the size.
    xs = torch.randn(5, 260, device=DEV).to(torch.bfloat16)
    wg = torch.randn(e, 2 * i, 260, device=DEV).to(torch.bfloat16)
    wd = torch.randn(e, 260, i, device=DEV).to(torch.bfloat16)
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.moe_ffn(xs, wg, wd, ids, w, handle=handle)
    assert info.value.status == ggemm.Status.INVALID_DIMENSION and "hidden" in info.value.message
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.moe_ffn(x, w_gate_up, w_down, ids, w, first_expert=4, num_experts=8, handle=handle)  # [4, 12) of 8
    assert info.value.status in (ggemm.Status.INVALID_VALUE, ggemm.Status.INVALID_DIMENSION)
