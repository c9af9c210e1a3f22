"""The MoE layer in fp32 PyTorch, on any device: the reference of the GPU tests
(test_gpu_moe.py) and of the benchmark's torch layer (test_bench_moe_layer.py)."""

from __future__ import annotations

import torch


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
