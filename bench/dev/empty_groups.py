"""Decode rows with every expert listed (torch's offs: empty groups between
the routed ones) against the routed experts' groups only, same tensors:
what the tile walk over empty groups costs. H200 diagnostic."""
import sys

import torch

sys.path.insert(0, "bench")
import compare_torch as ct  # noqa: E402
import ggemm  # noqa: E402

gen = torch.Generator().manual_seed(1)
for name, e, n, k, tokens, topk in [("qwen3_30b_down_1tok", 128, 2048, 768, 1, 8),
                                     ("qwen3_30b_gate_up_1tok", 128, 1536, 2048, 1, 8),
                                     ("qwen3_235b_down_1tok", 128, 4096, 1536, 1, 8),
                                     ("qwen3_30b_down_16tok", 128, 2048, 768, 16, 8)]:
    counts = ct.top_k_counts(e, tokens, topk, gen)
    p = ct.Problem(e, n, k, counts, "model", torch.Generator(device="cuda").manual_seed(2))
    used = [i for i, c in enumerate(counts) if c]
    ends = torch.tensor([counts[i] for i in used]).cumsum(0)
    offs_c = torch.cat([torch.zeros(1, dtype=torch.int64), ends]).to("cuda", torch.int32)
    ids_c = torch.tensor(used, dtype=torch.int32, device="cuda")
    usage_c = torch.tensor([p.max_rows, len(used)], dtype=torch.int32, device="cuda")
    out_c = torch.empty_like(p.out)

    def compact():
        ggemm.grouped_matmul(p.x, p.w, out_c, offs_c, ids_c, usage_c, max_rows_per_group=p.max_rows)

    p.ggemm(); compact(); torch.cuda.synchronize()
    assert torch.equal(p.out, out_c)
    flush = ct.L2Flush()
    print(f"{name}: groups {e} listed / {len(used)} routed")
    for label, fn in [("all listed", p.ggemm), ("routed only", compact), ("torch", p.torch)]:
        print(f"   {label:12s} cold {ct.cold_us(fn, flush):7.1f} us   sustained {ct.sustained_us(fn):7.1f} us")
