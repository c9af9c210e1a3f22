"""The MoE layer in fp32 PyTorch, on any device: the reference of the GPU tests
(test_gpu_moe.py, test_gpu_hf_moe.py), of the CPU checks of ggemm.transformers
(test_hf_moe.py), of the benchmark's torch layer (test_bench_moe_layer.py) and
the local layer of the expert-parallel CPU tests (ep_harness.py); and the
tolerance the layer's outputs are held to."""

from __future__ import annotations

import torch

# The project's bf16 / fp16 (rtol, atol) pairs (test_gpu_lora.TOL), for outputs
# of magnitude about 1; assert_layer scales atol by the reference's RMS, since
# the layer's output scale depends on the shape and the routing weights.
TOL = {torch.bfloat16: (2e-2, 5e-2), torch.float16: (5e-3, 1e-2)}


def assert_layer(got, ref, what=""):
    """got equals the layer's reference `ref` within its dtype's tolerance (atol relative to ref's RMS)."""
    assert got.shape == ref.shape and got.dtype == ref.dtype, f"{what}: {got.shape} {got.dtype} vs {ref.shape} {ref.dtype}"
    assert torch.isfinite(got).all(), f"{what}: non-finite values (rows left unwritten?)"
    rtol, atol = TOL[ref.dtype]
    rms = ref.float().pow(2).mean().sqrt().item() if ref.numel() else 0.0
    torch.testing.assert_close(got.float(), ref.float(), rtol=rtol, atol=atol * rms, msg=lambda m: f"{what}: {m}")


def reference(x, w_gate_up, w_down, ids, w, first_expert=0):
    """The layer in fp32: gate and up products, silu(gate) * up rounded once to x's
    dtype, the down product times the routing weight rounded once, the k slots summed
    in fp32 and rounded once. A slot whose id is not a local expert, or whose
    weight is not finite, contributes nothing."""
    t, h = x.shape
    local_experts, two_i, _ = w_gate_up.shape
    i = two_i // 2
    slots = torch.zeros(t, ids.shape[1], h, device=x.device)
    local = ids.long() - first_expert
    usable = torch.isfinite(w)
    for e in range(local_experts):
        tok, slot = torch.nonzero((local == e) & usable, as_tuple=True)
        if tok.numel() == 0:
            continue
        xe = x[tok].float()
        gate = xe @ w_gate_up[e, :i].float().T
        up = xe @ w_gate_up[e, i:].float().T
        act = (torch.nn.functional.silu(gate) * up).to(x.dtype).float()
        y = act @ w_down[e].float().T
        slots[tok, slot] = (y * w[tok, slot, None]).to(x.dtype).float()
    return slots.sum(dim=1).to(x.dtype)
