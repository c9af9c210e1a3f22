"""Routing arrays on the GPU for the GPU test modules, which import this after
they have skipped without PyTorch."""

from __future__ import annotations

import itertools

import torch

DEV = "cuda:0"


def routing(rows, ids):
    """Device arrays for groups of `rows` rows using experts (or adapters) `ids`:
    offsets, ids and usage stats; and the host offsets."""
    offsets = [0] + list(itertools.accumulate(rows))
    return (
        torch.tensor(offsets, dtype=torch.int32, device=DEV),
        torch.tensor(ids, dtype=torch.int32, device=DEV),
        torch.tensor([max(rows), len(rows)], dtype=torch.int32, device=DEV),
        offsets,
    )
