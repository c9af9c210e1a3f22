"""Expert parallelism around a single-GPU MoE layer: the token exchange, in torch.distributed only.

N ranks each hold E / N experts (rank r: experts [r E/N, (r + 1) E/N)). Every
rank routes its own tokens with a top-k over all E experts, then

  dispatch  each token goes to every rank that owns one of its top-k experts
            (once per rank, however many of its experts live there), with
            its ids and routing weights unchanged: the counts first (one
            all_to_all_single), then the rows (one), then ids and weights
            (one, packed)
  local     a layer over the rank's own expert range on what it received:
            ggemm.moe_ffn(..., first_expert=, num_experts=) skips the ids of
            other ranks' experts, so the top-k needs no rewriting
  combine   the reverse all_to_all_single brings each partial output back to
            the token's rank, which sums them (fp32, rank order, rounded once)

It lives beside the example, not in the ggemm package: ggemm is a single-GPU
kernel library with no dependency on torch.distributed, and the exchange is
the engine's part (NCCL here; DeepEP-style kernels in a real engine). Nothing
here imports ggemm: the local layer is any callable, so the CPU tests drive
the same code with a pure-torch layer over the gloo backend.

The sizes of a variable all_to_all_single are host lists, so dispatch waits
for the counts once (one device-to-host copy per layer call): the exchange
cannot be captured in a CUDA graph. Engines that need that use kernels that
size their buffers for the worst case (DeepEP's low-latency mode); that is
out of this example's scope.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, List, MutableMapping, NamedTuple, Optional

import torch
import torch.distributed as dist

# NVLink multicast (NVLS) off, for NCCL, torch's symmetric memory and NVSHMEM:
# multicast objects can take a shared host's GPUs out of service. Forced, not
# defaulted: a caller's setting to the contrary is overridden. NCCL reads these
# when the communicator is made, so they must be set before that.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def disable_multicast(environ: MutableMapping[str, str] = os.environ) -> None:
    """Sets MULTICAST_OFF in `environ`; call before init_process_group (and before spawning ranks)."""
    if dist.is_initialized():
        raise RuntimeError("disable_multicast: call it before torch.distributed.init_process_group, "
                           "whose communicators read these variables when they are made")
    environ.update(MULTICAST_OFF)


@dataclass(frozen=True)
class ExpertShard:
    """Which experts a rank holds: [first_expert, first_expert + local_experts) of num_experts."""

    num_experts: int
    world_size: int
    rank: int

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"ExpertShard: rank {self.rank} is not in a world of {self.world_size}")
        if self.num_experts < self.world_size or self.num_experts % self.world_size:
            raise ValueError(f"ExpertShard: {self.num_experts} experts cannot be split evenly over "
                             f"{self.world_size} ranks; the expert count must be a multiple of the rank count")

    @classmethod
    def of_group(cls, num_experts: int, group: Optional[dist.ProcessGroup] = None) -> "ExpertShard":
        return cls(num_experts, dist.get_world_size(group), dist.get_rank(group))

    @property
    def local_experts(self) -> int:
        return self.num_experts // self.world_size

    @property
    def first_expert(self) -> int:
        return self.rank * self.local_experts


class Exchange(NamedTuple):
    """One dispatch's bookkeeping, which the combine reverses."""

    tokens: int  # T, this rank's own tokens
    send_token: torch.Tensor  # int64 [S]: the token of each row sent, rank by rank, tokens in order within a rank
    send_counts: List[int]  # rows sent to each rank (sum S)
    recv_counts: List[int]  # rows received from each rank (sum R)


class Dispatched(NamedTuple):
    """What a rank received: rows from rank 0 first, then rank 1, ... ."""

    x: torch.Tensor  # [R, H]
    topk_ids: torch.Tensor  # int32 [R, k]: the global ids, as routed
    topk_weights: torch.Tensor  # float32 [R, k]: as routed
    exchange: Exchange


def _check_routing(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor) -> None:
    if x.dim() != 2:
        raise ValueError(f"x: expected [T, H], got shape {tuple(x.shape)}")
    if topk_ids.dim() != 2 or topk_ids.shape[0] != x.shape[0] or topk_weights.shape != topk_ids.shape:
        raise ValueError(f"topk_ids {tuple(topk_ids.shape)} and topk_weights {tuple(topk_weights.shape)} must "
                         f"both be [T, k] with T = {x.shape[0]}, x's rows")
    if topk_ids.dtype != torch.int32 or topk_weights.dtype != torch.float32:
        raise TypeError(f"topk_ids must be int32 and topk_weights float32 (ggemm's routing dtypes); got "
                        f"{topk_ids.dtype} and {topk_weights.dtype}")
    if not (x.device == topk_ids.device == topk_weights.device):
        raise ValueError(f"x, topk_ids and topk_weights must be on one device; got {x.device}, "
                         f"{topk_ids.device}, {topk_weights.device}")


def destinations(topk_ids: torch.Tensor, shard: ExpertShard) -> torch.Tensor:
    """bool [T, N]: whether token t has one of rank r's experts in its top-k.
    Ids outside [0, E) (-1 = no expert) go nowhere."""
    t = topk_ids.shape[0]
    ids = topk_ids.long()
    owner = torch.where((ids >= 0) & (ids < shard.num_experts), ids // shard.local_experts, shard.world_size)
    # Column N collects the ids that go nowhere, then is dropped: no masking pass.
    need = torch.zeros(t, shard.world_size + 1, dtype=torch.bool, device=topk_ids.device)
    need.scatter_(1, owner, True)
    return need[:, : shard.world_size]


def dispatch(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, shard: ExpertShard,
             group: Optional[dist.ProcessGroup] = None) -> Dispatched:
    """Sends each token to the ranks owning its experts (see the module docstring). Collective:
    every rank of `group` must call it, with its own tokens (T may differ, and be 0)."""
    _check_routing(x, topk_ids, topk_weights)
    if dist.get_world_size(group) != shard.world_size or dist.get_rank(group) != shard.rank:
        raise ValueError(f"dispatch: the shard is rank {shard.rank} of {shard.world_size}, the process group "
                         f"rank {dist.get_rank(group)} of {dist.get_world_size(group)}")
    k = topk_ids.shape[1]
    need = destinations(topk_ids, shard)
    send_counts = need.sum(0)
    recv_counts = torch.empty_like(send_counts)
    dist.all_to_all_single(recv_counts, send_counts, group=group)
    # The one host sync: the splits of the variable exchanges below are host lists.
    send_split, recv_split = torch.stack([send_counts, recv_counts]).tolist()
    rows = sum(recv_split)
    # The (rank, token) pairs rank-major (all rows for rank 0, then rank 1, ...), the layout
    # all_to_all_single's splits need; nonzero_static, as the count is known now: no second sync.
    send_token = torch.nonzero_static(need.t(), size=sum(send_split))[:, 1]

    x_recv = x.new_empty(rows, x.shape[1])
    dist.all_to_all_single(x_recv, x.index_select(0, send_token), recv_split, send_split, group=group)
    # ids (int32) and weights (fp32, bit-cast to int32) in one [S, 2k] exchange: one collective fewer.
    meta = torch.cat([topk_ids.index_select(0, send_token),
                      topk_weights.index_select(0, send_token).view(torch.int32)], dim=1)
    meta_recv = meta.new_empty(rows, 2 * k)
    dist.all_to_all_single(meta_recv, meta, recv_split, send_split, group=group)
    return Dispatched(
        x=x_recv,
        topk_ids=meta_recv[:, :k].contiguous(),
        topk_weights=meta_recv[:, k:].contiguous().view(torch.float32),
        exchange=Exchange(tokens=x.shape[0], send_token=send_token, send_counts=send_split, recv_counts=recv_split),
    )


def combine(y: torch.Tensor, exchange: Exchange, group: Optional[dist.ProcessGroup] = None,
            out_dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """The reverse exchange of dispatch: y [R, H], the local layer's output on the received
    rows, goes back to the tokens' ranks, which return out [T, H] (y's dtype by default):
    each token's partial outputs summed in fp32, rank by rank, rounded once. Tokens sent
    nowhere (no valid id) get zeros. Collective, as dispatch."""
    if y.dim() != 2 or y.shape[0] != sum(exchange.recv_counts):
        raise ValueError(f"combine: y must be [R, H] with R = {sum(exchange.recv_counts)}, the rows this rank "
                         f"received; got shape {tuple(y.shape)}")
    y_back = y.new_empty(len(exchange.send_token), y.shape[1])
    dist.all_to_all_single(y_back, y.contiguous(), exchange.send_counts, exchange.recv_counts, group=group)
    out = torch.zeros(exchange.tokens, y.shape[1], dtype=torch.float32, device=y.device)
    # One index_add_ per source rank: within a rank's rows each token appears at most
    # once, so no two adds race, and the sum's order (rank 0 first) is fixed: the
    # result is bitwise reproducible, which one index_add_ over all rows (atomics on
    # the GPU) would not be.
    start = 0
    for count in exchange.send_counts:
        if count:
            rows = slice(start, start + count)
            out.index_add_(0, exchange.send_token[rows], y_back[rows].float())
        start += count
    return out.to(out_dtype or y.dtype)


LocalLayer = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def local_moe_ffn(moe_ffn: Callable[..., torch.Tensor], w_gate_up: torch.Tensor, w_down: torch.Tensor,
                  shard: ExpertShard, **kwargs) -> LocalLayer:
    """The local step as a call of `moe_ffn(x, w_gate_up, w_down, ids, weights, first_expert=,
    num_experts=, **kwargs)` (ggemm.moe_ffn's signature) over this rank's experts: ids of
    other ranks' experts contribute nothing there."""
    if w_gate_up.shape[0] != shard.local_experts or w_down.shape[0] != shard.local_experts:
        raise ValueError(f"local_moe_ffn: rank {shard.rank} holds {shard.local_experts} experts; the weights "
                         f"have {w_gate_up.shape[0]} (w_gate_up) and {w_down.shape[0]} (w_down)")

    def layer(x, topk_ids, topk_weights):
        return moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert=shard.first_expert,
                       num_experts=shard.num_experts, **kwargs)

    return layer


def expert_parallel_layer(x: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                          shard: ExpertShard, local_layer: LocalLayer, *,
                          group: Optional[dist.ProcessGroup] = None,
                          mark: Optional[Callable[[str], None]] = None) -> torch.Tensor:
    """The MoE layer over all ranks' experts for this rank's tokens: dispatch, local_layer
    on the received rows, combine; out [T, H]. `mark(phase)` is called at "start",
    "dispatched", "computed" and "combined" (the example records CUDA events there)."""
    mark = mark or (lambda phase: None)
    mark("start")
    d = dispatch(x, topk_ids, topk_weights, shard, group)
    mark("dispatched")
    y = local_layer(d.x, d.topk_ids, d.topk_weights)
    mark("computed")
    out = combine(y, d.exchange, group, out_dtype=x.dtype)
    mark("combined")
    return out
