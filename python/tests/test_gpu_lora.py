"""GPU tests: ggemm.lora_shrink_qkv and ggemm.lora_expand_qkv on PyTorch CUDA
tensors against a plain PyTorch reference (a loop over adapters with
torch.matmul in fp32: adapter -1 gives zeros, accumulate adds the result once
to the old value, rows in no group are never written). Skipped, with the
reason, without PyTorch, without a CUDA device, or when ggemm cannot use GPU 0."""

from __future__ import annotations

import pytest

import ggemm

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU tests compare against PyTorch")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)"
)

from gpu_routing import DEV, routing  # noqa: E402  (needs torch, so after the skip above)

NAN = float("nan")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@pytest.fixture(autouse=True)
def _seed_and_exact_fp32():
    torch.manual_seed(4321)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32, not TF32
    yield
    torch.backends.cuda.matmul.allow_tf32 = tf32


def shrink_reference(x, lora_a, offsets, ids, *, rank, scale=1.0, init=None):
    """fp32 [3, M, R]: P[s, m] = scale * x[m] @ A[a][s*R:(s+1)*R].T per group. Rows of
    adapter -1 are 0 (init when accumulating); rows in no group are NaN (or init)."""
    m = x.shape[0]
    p = torch.full((3, m, rank), NAN, device=x.device) if init is None else init.float().clone()
    for g, a in enumerate(ids):
        lo, hi = offsets[g], offsets[g + 1]
        if hi == lo:
            continue
        if a < 0:
            if init is None:
                p[:, lo:hi] = 0
            continue
        res = scale * torch.matmul(x[lo:hi].float(), lora_a[a].float().T)  # [rows, 3R]
        res = res.view(hi - lo, 3, rank).permute(1, 0, 2)
        p[:, lo:hi] = res if init is None else p[:, lo:hi] + res
    return p


def expand_reference(p, lora_b, offsets, ids, *, q_dim, kv_dim, scale=1.0, q_init=None, kv_init=None):
    """fp32 (q [M, q_dim], kv [2M, kv_dim]) as lora_expand_qkv defines them."""
    m = p.shape[1]
    q = torch.full((m, q_dim), NAN, device=p.device) if q_init is None else q_init.float().clone()
    kv = torch.full((2 * m, kv_dim), NAN, device=p.device) if kv_init is None else kv_init.float().clone()
    accumulate = q_init is not None
    for g, a in enumerate(ids):
        lo, hi = offsets[g], offsets[g + 1]
        if hi == lo:
            continue
        targets = ((q, slice(lo, hi)), (kv, slice(lo, hi)), (kv, slice(m + lo, m + hi)))
        if a < 0:
            if not accumulate:
                for out, rows in targets:
                    out[rows] = 0
            continue
        b = lora_b[a].float()
        parts = (b[:q_dim], b[q_dim : q_dim + kv_dim], b[q_dim + kv_dim :])
        for plane, ((out, rows), w) in enumerate(zip(targets, parts)):
            res = scale * torch.matmul(p[plane, lo:hi].float(), w.T)
            out[rows] = res if not accumulate else out[rows] + res
    return q, kv


def assert_matches(got, ref, rtol, atol, *, untouched=None, what=""):
    """got against ref where ref is not NaN; where it is, got must still equal `untouched`."""
    written = ~torch.isnan(ref)
    g = got.float()
    assert not torch.isnan(g[written]).any(), f"{what}: rows that belong to a group were not written"
    torch.testing.assert_close(g[written], ref[written], rtol=rtol, atol=atol, msg=lambda m: f"{what}: {m}")
    if untouched is not None:
        assert torch.equal(got[~written], untouched[~written]), f"{what}: rows in no group were written"


# Ragged groups: an empty one, a no-adapter one (-1), an adapter used twice, a 1-row one.
ROWS = [0, 37, 9, 128, 1, 64, 0, 23]
IDS = [2, 0, -1, 5, 3, 1, 4, 0]
G = 6
TAIL = 7  # rows past the last group: never written
TOL = {torch.float32: (1e-4, 1e-3), torch.bfloat16: (2e-2, 5e-2), torch.float16: (5e-3, 1e-2)}


@pytest.mark.parametrize("x_dt, p_dt", [("bf16", "bf16"), ("bf16", "fp32"), ("fp16", "fp16")])
@pytest.mark.parametrize("rank", [16, 64])
def test_shrink_store(handle, x_dt, p_dt, rank):
    xd, pd = DTYPES[x_dt], DTYPES[p_dt]
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m, k = offsets[-1] + TAIL, 4096
    x = torch.randn(m, k, device=DEV).to(xd)
    lora_a = (torch.randn(G, 3 * rank, k, device=DEV) * k ** -0.5).to(xd)
    p = torch.full((3, m, rank), 7.0, dtype=pd, device=DEV)
    before = p.clone()
    r = ggemm.lora_shrink_qkv(x, lora_a, p, offsets_t, ids_t, stats_t, scale=0.5, handle=handle)
    assert r is p
    torch.cuda.synchronize()
    ref = shrink_reference(x, lora_a, offsets, IDS, rank=rank, scale=0.5)
    rtol, atol = TOL[pd]
    assert_matches(p, ref, rtol, atol, untouched=before, what="p")
    assert (p[:, offsets[2] : offsets[3]] == 0).all(), "rows of adapter -1 must be zero"


def test_shrink_accumulate_adds_once(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m, k, rank = offsets[-1] + TAIL, 2048, 16
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    lora_a = (torch.randn(G, 3 * rank, k, device=DEV) * k ** -0.5).to(torch.bfloat16)
    init = torch.randn(3, m, rank, device=DEV)
    p = init.clone()
    ggemm.lora_shrink_qkv(x, lora_a, p, offsets_t, ids_t, stats_t, accumulate=True, handle=handle)
    torch.cuda.synchronize()
    ref = shrink_reference(x, lora_a, offsets, IDS, rank=rank, init=init)  # -1 and tail rows: init
    torch.testing.assert_close(p, ref, rtol=1e-4, atol=1e-3)
    assert torch.equal(p[:, offsets[2] : offsets[3]], init[:, offsets[2] : offsets[3]]), "adapter -1 rows changed"
    assert torch.equal(p[:, offsets[-1] :], init[:, offsets[-1] :]), "rows in no group changed"


@pytest.mark.parametrize("q_dim, kv_dim", [(4096, 1024), (512, 512)], ids=["gqa_4096_1024", "mha_512"])
@pytest.mark.parametrize("out_dt", ["fp32", "bf16"])
@pytest.mark.parametrize("rank", [16, 64])
def test_expand_store(handle, q_dim, kv_dim, out_dt, rank):
    od = DTYPES[out_dt]
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1] + TAIL
    p = torch.randn(3, m, rank, device=DEV).to(torch.bfloat16)
    lora_b = (torch.randn(G, q_dim + 2 * kv_dim, rank, device=DEV) * rank ** -0.5).to(torch.bfloat16)
    q_out = torch.full((m, q_dim), 7.0, dtype=od, device=DEV)
    kv_out = torch.full((2 * m, kv_dim), 7.0, dtype=od, device=DEV)
    q0, kv0 = q_out.clone(), kv_out.clone()
    r = ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, offsets_t, ids_t, stats_t, scale=2.0, handle=handle)
    assert r[0] is q_out and r[1] is kv_out
    torch.cuda.synchronize()
    q_ref, kv_ref = expand_reference(p, lora_b, offsets, IDS, q_dim=q_dim, kv_dim=kv_dim, scale=2.0)
    rtol, atol = TOL[od]
    assert_matches(q_out, q_ref, rtol, atol, untouched=q0, what="q_out")
    assert_matches(kv_out, kv_ref, rtol, atol, untouched=kv0, what="kv_out")


def test_expand_accumulate_gqa(handle):
    """The LoRA delta added into base projections in place (q 4096, kv 1024): once, rounded once."""
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m, rank, q_dim, kv_dim = offsets[-1] + TAIL, 16, 4096, 1024
    p = torch.randn(3, m, rank, device=DEV).to(torch.bfloat16)
    lora_b = (torch.randn(G, q_dim + 2 * kv_dim, rank, device=DEV) * rank ** -0.5).to(torch.bfloat16)
    q_init = torch.randn(m, q_dim, device=DEV).to(torch.bfloat16)
    kv_init = torch.randn(2 * m, kv_dim, device=DEV).to(torch.bfloat16)
    q_out, kv_out = q_init.clone(), kv_init.clone()
    scale = 32 / rank  # alpha / rank
    ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, offsets_t, ids_t, stats_t, scale=scale, accumulate=True,
                          handle=handle)
    torch.cuda.synchronize()
    q_ref, kv_ref = expand_reference(p, lora_b, offsets, IDS, q_dim=q_dim, kv_dim=kv_dim, scale=scale,
                                     q_init=q_init, kv_init=kv_init)
    torch.testing.assert_close(q_out.float(), q_ref, rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(kv_out.float(), kv_ref, rtol=2e-2, atol=5e-2)
    lo, hi = offsets[2], offsets[3]  # adapter -1
    for name, got, init in (("q_out", q_out, q_init), ("kv_out", kv_out, kv_init)):
        assert torch.equal(got[lo:hi], init[lo:hi]), f"{name}: adapter -1 rows changed"
        assert torch.equal(got[offsets[-1] : m], init[offsets[-1] : m]), f"{name}: rows in no group changed"
    assert torch.equal(kv_out[m + lo : m + hi], kv_init[m + lo : m + hi]), "kv_out: V rows of adapter -1 changed"
    assert torch.equal(kv_out[m + offsets[-1] :], kv_init[m + offsets[-1] :]), "kv_out: V rows in no group changed"


def test_shrink_then_expand_chain(handle):
    """x -> P (bf16, on the device) -> q_out/kv_out += scale * delta: against a plain PyTorch chain."""
    rows, ids = [48, 16, 80, 0, 33], [1, -1, 0, 2, 3]
    offsets_t, ids_t, stats_t, offsets = routing(rows, ids)
    m, hidden, rank, q_dim, kv_dim, adapters = offsets[-1], 4096, 16, 4096, 1024, 4
    x = torch.randn(m, hidden, device=DEV).to(torch.bfloat16)
    lora_a = (torch.randn(adapters, 3 * rank, hidden, device=DEV) * hidden ** -0.5).to(torch.bfloat16)
    lora_b = (torch.randn(adapters, q_dim + 2 * kv_dim, rank, device=DEV) * rank ** -0.5).to(torch.bfloat16)
    q_base = torch.randn(m, q_dim, device=DEV).to(torch.bfloat16)
    kv_base = torch.randn(2 * m, kv_dim, device=DEV).to(torch.bfloat16)
    q_out, kv_out = q_base.clone(), kv_base.clone()
    p = torch.empty(3, m, rank, dtype=torch.bfloat16, device=DEV)
    scale = 2.0
    ggemm.lora_shrink_qkv(x, lora_a, p, offsets_t, ids_t, stats_t, handle=handle)
    ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, offsets_t, ids_t, stats_t, scale=scale, accumulate=True,
                          handle=handle)
    torch.cuda.synchronize()
    p_ref = shrink_reference(x, lora_a, offsets, ids, rank=rank).to(torch.bfloat16)  # P is stored as bf16
    torch.testing.assert_close(p.float(), p_ref.float(), rtol=2e-2, atol=2e-2)
    q_ref, kv_ref = expand_reference(p_ref, lora_b, offsets, ids, q_dim=q_dim, kv_dim=kv_dim, scale=scale,
                                     q_init=q_base, kv_init=kv_base)
    torch.testing.assert_close(q_out.float(), q_ref, rtol=2e-2, atol=5e-2)
    torch.testing.assert_close(kv_out.float(), kv_ref, rtol=2e-2, atol=5e-2)
    lo, hi = offsets[1], offsets[2]  # adapter -1: the base projections, bit for bit
    assert torch.equal(q_out[lo:hi], q_base[lo:hi]) and torch.equal(kv_out[m + lo : m + hi], kv_base[m + lo : m + hi])


def test_current_stream_and_graph_replay(handle):
    """shrink + expand captured in a CUDA graph on PyTorch's current stream, replayed with new routing."""
    m, hidden, rank, q_dim, kv_dim = 96, 1024, 16, 1024, 256
    x = torch.randn(m, hidden, device=DEV).to(torch.bfloat16)
    lora_a = (torch.randn(3, 3 * rank, hidden, device=DEV) * hidden ** -0.5).to(torch.bfloat16)
    lora_b = (torch.randn(3, q_dim + 2 * kv_dim, rank, device=DEV) * rank ** -0.5).to(torch.bfloat16)
    p = torch.empty(3, m, rank, dtype=torch.bfloat16, device=DEV)
    q_out = torch.empty(m, q_dim, dtype=torch.float32, device=DEV)
    kv_out = torch.empty(2 * m, kv_dim, dtype=torch.float32, device=DEV)
    rows_1, ids_1 = [10, 0, 50, 36], [1, 2, -1, 0]
    rows_2, ids_2 = [60, 6, 0, 30], [2, 2, 1, -1]
    offsets_t, ids_t, stats_t, _ = routing(rows_1, ids_1)
    call = dict(handle=handle, max_rows_per_group=m)

    def lora():
        ggemm.lora_shrink_qkv(x, lora_a, p, offsets_t, ids_t, stats_t, **call)
        ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, offsets_t, ids_t, stats_t, scale=0.5, **call)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        lora()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        lora()
    for rows, ids in ((rows_1, ids_1), (rows_2, ids_2)):
        o, i, s, offsets = routing(rows, ids)
        offsets_t.copy_(o)
        ids_t.copy_(i)
        stats_t.copy_(s)
        graph.replay()
        torch.cuda.synchronize()
        p_ref = shrink_reference(x, lora_a, offsets, ids, rank=rank).to(torch.bfloat16)
        torch.testing.assert_close(p.float(), p_ref.float(), rtol=2e-2, atol=2e-2)
        # The expand is checked on the P ggemm wrote (a 1-ulp bf16 difference in P would
        # exceed the fp32 tolerance); P itself against the reference above.
        q_ref, kv_ref = expand_reference(p, lora_b, offsets, ids, q_dim=q_dim, kv_dim=kv_dim, scale=0.5)
        torch.testing.assert_close(q_out, q_ref, rtol=1e-4, atol=1e-3)
        torch.testing.assert_close(kv_out, kv_ref, rtol=1e-4, atol=1e-3)


def test_lora_errors_on_the_gpu(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m, k, rank = offsets[-1], 256, 16
    x = torch.randn(m, k, device=DEV).to(torch.bfloat16)
    lora_a = torch.randn(G, 3 * rank, k, device=DEV).to(torch.bfloat16)
    # One element past a 16-byte boundary: contiguous, but not aligned for TMA.
    flat = torch.zeros(3 * m * rank + 8, device=DEV, dtype=torch.bfloat16)
    p_misaligned = flat[1 : 1 + 3 * m * rank].view(3, m, rank)
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.lora_shrink_qkv(x, lora_a, p_misaligned, offsets_t, ids_t, stats_t, handle=handle)
    assert info.value.status == ggemm.Status.MISALIGNED_POINTER and "p = " in info.value.message
    # R = 12: the shapes agree, the library refuses the rank.
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.lora_shrink_qkv(x, lora_a[:, :36].contiguous(), torch.empty(3, m, 12, dtype=torch.bfloat16, device=DEV),
                              offsets_t, ids_t, stats_t, handle=handle)
    assert info.value.status == ggemm.Status.INVALID_DIMENSION and "rank = 12" in info.value.message
    with pytest.raises(ValueError, match="lora_a"):
        ggemm.lora_shrink_qkv(x, lora_a, torch.empty(3, m, 8, dtype=torch.bfloat16, device=DEV),
                              offsets_t, ids_t, stats_t, handle=handle)
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.lora_shrink_qkv(x, lora_a, torch.empty(3, m, rank, dtype=torch.bfloat16, device=DEV),
                              offsets_t, ids_t, stats_t, scale=float("inf"), handle=handle)
    assert info.value.status == ggemm.Status.INVALID_VALUE and "scale" in info.value.message
    q_out = torch.empty(m, 512, dtype=torch.bfloat16, device=DEV)
    kv_out = torch.empty(2 * m, 128, dtype=torch.bfloat16, device=DEV)
    p = torch.empty(3, m, rank, dtype=torch.bfloat16, device=DEV)
    lora_b = torch.randn(G, 512 + 2 * 128, rank, device=DEV).to(torch.bfloat16)
    with pytest.raises(ValueError, match="kv_out"):
        ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out[:m], offsets_t, ids_t, stats_t, handle=handle)
    with pytest.raises(ValueError, match="CUDA tensor"):
        ggemm.lora_expand_qkv(p.cpu(), lora_b, q_out, kv_out, offsets_t, ids_t, stats_t, handle=handle)
