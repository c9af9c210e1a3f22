"""Expert parallelism without a GPU: the exchange of examples/python/expert_parallel.py
(dispatch, combine) on 1 and 2 processes over gloo, with pure-torch local layers
standing in for ggemm.moe_ffn (the fp32 reference, and the example's torch
layer where this PyTorch has torch._grouped_mm on the CPU), against the whole
layer on one process; and its pieces that need no process group. The same
cases run on GPUs with ggemm in test_gpu_expert_parallel.py."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the exchange is torch.distributed")
dist = pytest.importorskip("torch.distributed", reason="this PyTorch has no torch.distributed")

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="this PyTorch's torch.distributed has no gloo backend")

import ep_harness  # noqa: E402  (needs torch, so after the skips above)
from ep_harness import CASES, check_case, ep  # noqa: E402
from test_bench_moe_layer import _grouped_mm_on_cpu  # noqa: E402

# The example's torch local step runs torch._grouped_mm; without it on the CPU only the reference runs.
KINDS = ("reference", "torch") if _grouped_mm_on_cpu() else ("reference",)


@pytest.fixture(scope="module")
def two_ranks():
    return ep_harness.run_ranks(2, "gloo", KINDS)


@pytest.fixture(scope="module")
def one_rank():
    return ep_harness.run_ranks(1, "gloo", KINDS)


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_match_the_whole_layer(two_ranks, case):
    assert set(two_ranks[0][case]["errors"]) == set(KINDS)
    check_case(two_ranks, case)


@pytest.mark.parametrize("case", CASES)
def test_one_rank_matches_the_whole_layer(one_rank, case):
    check_case(one_rank, case)


def test_destinations_are_the_owners_of_the_valid_ids():
    shard = ep.ExpertShard(num_experts=8, world_size=4, rank=1)
    ids = torch.tensor([[0, 1, 7], [2, 3, 3], [-1, 8, 100], [5, 4, -1]], dtype=torch.int32)
    want = torch.tensor([[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0], [0, 0, 1, 0]], dtype=torch.bool)
    assert torch.equal(ep.destinations(ids, shard), want)
    assert (shard.first_expert, shard.local_experts) == (2, 2)


def test_shard_and_argument_errors():
    with pytest.raises(ValueError, match="multiple of the rank count"):
        ep.ExpertShard(num_experts=10, world_size=4, rank=0)
    with pytest.raises(ValueError, match="rank 2 is not in a world of 2"):
        ep.ExpertShard(num_experts=8, world_size=2, rank=2)
    shard = ep.ExpertShard(num_experts=8, world_size=2, rank=0)
    w = torch.zeros(3, 16, 8)
    with pytest.raises(ValueError, match="holds 4 experts"):
        ep.local_moe_ffn(lambda *a, **k: None, w, w, shard)
    x, ids, weights = torch.zeros(5, 8), torch.zeros(5, 2, dtype=torch.int32), torch.zeros(5, 2)
    # The routing is checked before any collective, so no process group is needed to see these.
    with pytest.raises(TypeError, match="int32"):
        ep.dispatch(x, ids.long(), weights, shard)
    with pytest.raises(ValueError, match=r"\[T, k\] with T = 5"):
        ep.dispatch(x, ids[:4], weights[:4], shard)


def test_multicast_variables():
    env = {"NCCL_NVLS_ENABLE": "1"}
    ep.disable_multicast(env)
    assert env == {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
