"""GPU tests: expert parallelism, ggemm.moe_ffn over each rank's expert range
between NCCL all-to-alls (examples/python/expert_parallel.py), against
ggemm.moe_ffn over all experts on one GPU, on the same tokens. One rank runs
on any GPU machine; two ranks need two GPUs and skip, saying so, on fewer.
The exchange's bookkeeping is also checked without a GPU
(test_expert_parallel.py, gloo)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the exchange is torch.distributed")

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)"),
    pytest.mark.skipif(not (torch.distributed.is_available() and torch.distributed.is_nccl_available()),
                       reason="this PyTorch has no NCCL backend"),
]

import ep_harness  # noqa: E402  (needs torch, so after the skips above)
from ep_harness import CASES, check_case  # noqa: E402


@pytest.fixture(scope="module")
def one_rank(handle):  # handle: skips when ggemm cannot use GPU 0
    return ep_harness.run_ranks(1, "nccl", ["ggemm"])


@pytest.fixture(scope="module")
def two_ranks(handle):
    gpus = torch.cuda.device_count()
    if gpus < 2:
        pytest.skip(f"2 ranks need 2 GPUs (NCCL puts one rank on a GPU); this machine has {gpus}")
    return ep_harness.run_ranks(2, "nccl", ["ggemm"])


@pytest.mark.parametrize("case", CASES)
def test_one_rank_matches_the_single_gpu_layer(one_rank, case):
    check_case(one_rank, case)


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_match_the_single_gpu_layer(two_ranks, case):
    check_case(two_ranks, case)
