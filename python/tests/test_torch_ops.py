"""ggemm.torch: the custom operators (registration and fake implementations
on any machine with PyTorch; values, gradients, torch.compile and CUDA graphs
on a GPU, against PyTorch references: torch._grouped_mm and float64)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: ggemm.torch needs it")

import ggemm  # noqa: E402
import ggemm.torch as gt  # noqa: E402

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)")
DEV = "cuda:0"


def test_ops_are_registered():
    for name in ("grouped_mm", "grouped_matmul", "lora_shrink_qkv", "lora_expand_qkv", "moe_ffn", "moe_route",
                 "moe_combine"):
        assert hasattr(torch.ops.ggemm, name), name


def test_fake_grouped_mm_gives_torch_shape_and_dtype():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a = torch.empty(40, 64, dtype=torch.bfloat16)
        b = torch.empty(3, 64, 96, dtype=torch.bfloat16)
        offs = torch.empty(3, dtype=torch.int32)
        out = torch.ops.ggemm.grouped_mm(a, b, offs, None)
        out32 = torch.ops.ggemm.grouped_mm(a, b, offs, torch.float32)
    assert tuple(out.shape) == (40, 96) and out.dtype == torch.bfloat16
    assert out32.dtype == torch.float32


def test_cpu_tensors_are_refused_with_a_message():
    a = torch.zeros(8, 16, dtype=torch.bfloat16)
    b = torch.zeros(2, 16, 8, dtype=torch.bfloat16)
    out = torch.zeros(8, 8, dtype=torch.bfloat16)
    i = torch.zeros(3, dtype=torch.int32)
    with pytest.raises((ValueError, NotImplementedError, RuntimeError), match="CUDA|cuda"):
        torch.ops.ggemm.grouped_matmul(a, b, out, i, i[:2], i[:2], False)


def _moe_on(device, t=5, h=256, i=96, e=8, k=2, dtype=torch.bfloat16):
    """x, w_gate_up, w_down, topk_ids, topk_weights (empty) on `device`."""
    return (torch.empty(t, h, dtype=dtype, device=device), torch.empty(e, 2 * i, h, dtype=dtype, device=device),
            torch.empty(e, h, i, dtype=dtype, device=device), torch.empty(t, k, dtype=torch.int32, device=device),
            torch.empty(t, k, dtype=torch.float32, device=device))


def test_moe_fakes_give_the_shapes_and_dtypes_of_the_header():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, wgu, wd, ids, w = _moe_on("cpu", t=7, h=256, i=96, e=8, k=3, dtype=torch.float16)
        out = torch.ops.ggemm.moe_ffn(x, wgu, wd, ids, w, 0, None)
        routing = torch.ops.ggemm.moe_route(ids, w, 64, 16, 8)
        y = torch.empty(21, 256, dtype=torch.float16)
        summed = torch.ops.ggemm.moe_combine(y, routing[6], None)
        summed32 = torch.ops.ggemm.moe_combine(y, routing[6], torch.float32)
    assert tuple(out.shape) == (7, 256) and out.dtype == torch.float16
    got = {name: (tuple(r.shape), r.dtype) for name, r in zip(ggemm.MoeRouting._fields, routing)}
    assert got == {
        "a_offsets": ((9,), torch.int32), "expert_ids": ((8,), torch.int32), "usage_stats": ((2,), torch.int32),
        "row_token": ((21,), torch.int32), "row_slot": ((21,), torch.int32), "row_weight": ((21,), torch.float32),
        "slot_row": ((7, 3), torch.int32),
    }
    assert tuple(summed.shape) == (7, 256) and summed.dtype == torch.float16 and summed32.dtype == torch.float32


def test_compile_fullgraph_keeps_the_moe_ops():
    """Traced on meta tensors (no GPU): the operators stay single nodes of one
    graph, and the fakes' shapes flow through the code around them."""
    seen = []

    def record(gm, inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    def layer(x, wgu, wd, ids, w):
        r = gt.moe_route(ids, w, num_experts=8)
        y = x.new_empty(ids.numel(), x.shape[1])
        return gt.moe_ffn(x, wgu, wd, ids, w) * 2, gt.moe_combine(y, r.slot_row, torch.float32), r.row_weight

    out, summed, weights = torch.compile(layer, backend=record, fullgraph=True)(*_moe_on("meta"))
    assert [t for t in seen if t.startswith("ggemm.")] == ["ggemm.moe_route", "ggemm.moe_ffn", "ggemm.moe_combine"]
    assert (tuple(out.shape), tuple(summed.shape), tuple(weights.shape)) == ((5, 256), (5, 256), (10,))
    assert summed.dtype == torch.float32 and weights.dtype == torch.float32


def test_moe_ffn_refuses_cpu_tensors_before_the_library():
    with pytest.raises(ValueError, match="x: ggemm needs CUDA tensors"):
        gt.moe_ffn(*_moe_on("cpu"))
    with pytest.raises(ValueError, match="topk_ids: ggemm needs CUDA tensors"):
        gt.moe_route(*_moe_on("cpu")[3:], num_experts=8)


def test_grouped_matmul_op_takes_a_gather_index():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(5, 128, dtype=torch.bfloat16)
        w = torch.empty(4, 64, 128, dtype=torch.bfloat16)
        h = torch.empty(10, 32, dtype=torch.bfloat16)
        i = torch.empty(5, dtype=torch.int32)
        torch.ops.ggemm.grouped_matmul(x, w, h, i, i[:4], i[:2], True, "swiglu", None, 0, i.new_empty(10))


def _matmul_on(device, m=40, n=64, k=128, e=4, groups=4):
    return (torch.empty(m, k, dtype=torch.bfloat16, device=device), torch.empty(e, n, k, dtype=torch.bfloat16, device=device),
            torch.empty(m, n, dtype=torch.bfloat16, device=device), torch.empty(groups + 1, dtype=torch.int32, device=device),
            torch.empty(groups, dtype=torch.int32, device=device), torch.empty(2, dtype=torch.int32, device=device))


def test_ops_declare_what_they_write():
    """The schemas torch.compile's functionalization reads: out, p, q_out and
    kv_out are written in place, nothing else is."""
    written = {}
    for name in ("grouped_matmul", "lora_shrink_qkv", "lora_expand_qkv", "grouped_mm", "moe_ffn"):
        schema = getattr(torch.ops.ggemm, name).default._schema
        written[name] = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert torch.Tag.pt2_compliant_tag in getattr(torch.ops.ggemm, name).default.tags
    assert written == {"grouped_matmul": ["out"], "lora_shrink_qkv": ["p"], "lora_expand_qkv": ["q_out", "kv_out"],
                       "grouped_mm": [], "moe_ffn": []}


def test_compile_fullgraph_functionalizes_the_mutating_op():
    """Traced on meta tensors through AOT autograd (functionalization of the
    in-place write, the fake kernel as meta kernel): the op stays one node."""
    seen = []

    def record(gm, inputs):  # auto_functionalized(op, ...) calls the op on what it writes
        seen.extend(str(n.args[0]) for n in gm.graph.nodes if "auto_functionalized" in str(n.target))
        return gm.forward

    def step(a, b, out, o, i, u):
        torch.ops.ggemm.grouped_matmul(a, b, out, o, i, u, True, "store", None, 0)
        return out * 2

    from torch._dynamo.backends.common import aot_autograd

    got = torch.compile(step, backend=aot_autograd(fw_compiler=record), fullgraph=True)(*_matmul_on("meta"))
    assert tuple(got.shape) == (40, 64)
    assert seen == ["ggemm.grouped_matmul.default"], seen


def test_backward_through_an_op_without_a_gradient_raises():
    x, wgu, wd, ids, w = _moe_on("meta")
    x.requires_grad_(True)
    y = torch.ops.ggemm.moe_ffn(x, wgu, wd, ids, w, 0, None)
    with pytest.raises(RuntimeError, match="ggemm::moe_ffn has no gradient"):
        y.sum().backward()


# ---- on the GPU ---------------------------------------------------------------


def _groups(rows, k, n, experts=None, dtype=torch.bfloat16, n_major=False):
    """x [M, K] sorted by group, b [E, K, N] (a transposed view of [E, N, K]
    unless n_major), offs int32 group ends."""
    experts = experts or len(rows)
    m = sum(rows)
    x = torch.randn(m, k, device=DEV, dtype=dtype)
    if n_major:
        b = (torch.randn(experts, k, n, device=DEV, dtype=dtype) / k**0.5)
    else:
        b = (torch.randn(experts, n, k, device=DEV, dtype=dtype) / k**0.5).transpose(-2, -1)
    offs = torch.tensor(list(__import__("itertools").accumulate(rows)), dtype=torch.int32, device=DEV)
    return x, b, offs


CASES = [
    ("moe_balanced", [64, 64, 64, 64], 256, 512, False),
    ("empty_groups", [0, 33, 0, 120, 7, 0], 128, 256, False),
    ("n_major_b", [17, 0, 90, 40], 192, 128, True),
    ("decode_rows", [1, 2, 1, 3, 1, 1, 2, 1], 512, 256, False),
]


@gpu
@pytest.mark.parametrize("name,rows,k,n,n_major", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=["same", "fp32"])
def test_grouped_mm_matches_torch_grouped_mm(name, rows, k, n, n_major, out_dtype):
    torch.manual_seed(7)
    x, b, offs = _groups(rows, k, n, n_major=n_major)
    got = gt.grouped_mm(x, b, offs, out_dtype=out_dtype)
    via_op = torch.ops.ggemm.grouped_mm(x, b, offs, out_dtype)  # the operator, as compiled code calls it
    # torch._grouped_mm's output dtype is a's; ggemm's fp32 output is checked
    # against float64 alone.
    want = torch._grouped_mm(x, b, offs=offs) if out_dtype is None else None
    assert got.dtype == (out_dtype or x.dtype) and got.shape == (x.shape[0], b.shape[2])
    # float64 reference per group, both implementations within bf16 rounding of it
    ends = offs.tolist()
    start = 0
    for g, end in enumerate(ends):
        if end > start:
            ref = (x[start:end].double() @ b[g].double())
            torch.testing.assert_close(got[start:end].double(), ref, atol=2e-2, rtol=2e-2)
            torch.testing.assert_close(via_op[start:end], got[start:end], atol=0, rtol=0)
            if want is not None:
                torch.testing.assert_close(got[start:end], want[start:end], atol=2e-2, rtol=2e-2)
        start = end


@gpu
def test_grouped_mm_gradients_match_torch():
    torch.manual_seed(11)
    rows, k, n = [40, 0, 72, 16], 128, 192
    x, b, offs = _groups(rows, k, n)
    xg = x.detach().clone().requires_grad_(True)
    wg = b.detach().transpose(-2, -1).contiguous().requires_grad_(True)  # [E, N, K] parameter
    xt = x.detach().clone().requires_grad_(True)
    wt = wg.detach().clone().requires_grad_(True)
    dy = torch.randn(sum(rows), n, device=DEV, dtype=torch.bfloat16)
    gt.grouped_mm(xg, wg.transpose(-2, -1), offs).backward(dy)
    torch._grouped_mm(xt, wt.transpose(-2, -1), offs=offs).backward(dy)
    torch.testing.assert_close(xg.grad, xt.grad, atol=3e-2, rtol=3e-2)
    torch.testing.assert_close(wg.grad, wt.grad, atol=3e-2, rtol=3e-2)


class _Experts(torch.nn.Module):
    def __init__(self, experts, k, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(experts, n, k, device=DEV, dtype=torch.bfloat16) / k**0.5)

    def forward(self, x, offs):
        return torch.relu(gt.grouped_mm(x, self.w.transpose(-2, -1), offs)) * 2


@gpu
def test_compile_fullgraph_keeps_grouped_mm_and_matches_eager():
    torch.manual_seed(3)
    mod = _Experts(4, 128, 256)
    x, _, offs = _groups([30, 0, 50, 8], 128, 256)
    eager = mod(x, offs)
    compiled = torch.compile(mod, fullgraph=True)(x, offs)
    torch.testing.assert_close(compiled, eager, atol=0, rtol=0)


@gpu
def test_compile_fullgraph_with_the_mutating_ops_matches_eager():
    torch.manual_seed(5)
    rows, k, n, r, q, kv = [24, 8, 0, 40], 128, 128, 16, 256, 64
    x, b, offs = _groups(rows, k, n)
    w = b.transpose(-2, -1).contiguous()
    m, groups = sum(rows), len(rows)
    a_offsets = torch.nn.functional.pad(offs, (1, 0))
    ids = torch.arange(groups, dtype=torch.int32, device=DEV)
    usage = torch.tensor([max(rows), groups], dtype=torch.int32, device=DEV)
    lora_a = torch.randn(groups, 3 * r, k, device=DEV, dtype=torch.bfloat16) / k**0.5
    lora_b = torch.randn(groups, q + 2 * kv, r, device=DEV, dtype=torch.bfloat16) / r**0.5

    def step(x):
        out = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
        torch.ops.ggemm.grouped_matmul(x, w, out, a_offsets, ids, usage, True, "store", None, 0)
        p = torch.empty(3, m, r, device=DEV, dtype=torch.bfloat16)
        torch.ops.ggemm.lora_shrink_qkv(x, lora_a, p, a_offsets, ids, usage, 1.0, False, 0)
        q_out = torch.zeros(m, q, device=DEV, dtype=torch.bfloat16)
        kv_out = torch.zeros(2 * m, kv, device=DEV, dtype=torch.bfloat16)
        torch.ops.ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, a_offsets, ids, usage, 0.5, True, 0)
        return out * 1.5, q_out, kv_out

    eager = step(x)
    compiled = torch.compile(step, fullgraph=True)(x)
    for c, e in zip(compiled, eager):
        torch.testing.assert_close(c, e, atol=0, rtol=0)
    # and against the package's own calls
    ref = torch.empty(m, n, device=DEV, dtype=torch.bfloat16)
    ggemm.grouped_matmul(x, w, ref, a_offsets, ids, usage)
    torch.testing.assert_close(eager[0], ref * 1.5, atol=0, rtol=0)


@gpu
def test_cuda_graph_captures_grouped_mm_and_replays_with_new_routing():
    torch.manual_seed(9)
    x, b, offs = _groups([20, 20, 20, 20], 128, 128)
    gt.grouped_mm(x, b, offs)  # warm: library, kernels, cached routing
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gt.grouped_mm(x, b, offs)
    offs.copy_(torch.tensor([5, 5, 60, 80], dtype=torch.int32, device=DEV))
    graph.replay()
    torch.cuda.synchronize()
    want = torch._grouped_mm(x, b, offs=offs)
    torch.testing.assert_close(out[:80], want[:80], atol=2e-2, rtol=2e-2)


@gpu
def test_library_errors_are_python_exceptions_and_the_context_survives():
    x, b, offs = _groups([8, 8], 36, 64)  # K = 36: not a multiple of 8
    with pytest.raises(ggemm.GgemmError, match="k = 36"):
        gt.grouped_mm(x, b, offs)
    x, b, offs = _groups([8, 8], 64, 64)
    torch.testing.assert_close(gt.grouped_mm(x, b, offs), torch._grouped_mm(x, b, offs=offs), atol=2e-2, rtol=2e-2)
