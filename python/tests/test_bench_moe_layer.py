"""bench/moe_layer.py without a GPU: its routing, the torch layer it times
ggemm against (on the CPU, where torch._grouped_mm runs too), and its table,
so that the H200 run finds them right. The timing itself needs a GPU."""

from __future__ import annotations

import sys

import pytest

from conftest import REPO

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the benchmark compares with it")
sys.path.insert(0, str(REPO / "bench"))
import moe_layer  # noqa: E402

from moe_reference import reference  # noqa: E402


def _grouped_mm_on_cpu():
    try:
        x = torch.zeros(2, 8, dtype=torch.bfloat16)
        torch._grouped_mm(x, torch.zeros(1, 8, 8, dtype=torch.bfloat16), offs=torch.tensor([2], dtype=torch.int32))
        return True
    except (AttributeError, RuntimeError, NotImplementedError):
        return False


cpu_grouped_mm = pytest.mark.skipif(not _grouped_mm_on_cpu(), reason="this PyTorch has no torch._grouped_mm on the CPU")


@pytest.mark.parametrize("routing", ["balanced", "zipf"])
def test_router_gives_distinct_experts_and_normalised_weights(routing):
    ids, w = moe_layer.router(512, 16, 4, routing, torch.Generator().manual_seed(1), device="cpu")
    assert ids.dtype == torch.int32 and w.dtype == torch.float32 and ids.shape == w.shape == (512, 4)
    assert all(len(set(row)) == 4 for row in ids.tolist())
    torch.testing.assert_close(w.sum(-1), torch.ones(512))
    counts = torch.bincount(ids.reshape(-1).long(), minlength=16)
    share = counts.max().item() / counts.sum().item()
    # balanced: about 1/16 of the rows on the busiest expert; Zipf 1.2 puts far more there
    assert share > 0.2 if routing == "zipf" else share < 0.1


@cpu_grouped_mm
@pytest.mark.parametrize("all_routed", [True, False], ids=["every_slot_routed", "empty_slots"])
def test_torch_layer_matches_the_fp32_reference(all_routed):
    torch.manual_seed(3)
    t, h, i, e, k = 37, 64, 32, 8, 3
    x = torch.randn(t, h).to(torch.bfloat16)
    w_gate_up = (torch.randn(e, 2 * i, h) / h ** 0.5).to(torch.bfloat16)
    w_down = (torch.randn(e, h, i) / i ** 0.5).to(torch.bfloat16)
    ids, w = moe_layer.router(t, e, k, "balanced", torch.Generator().manual_seed(5), device="cpu")
    if not all_routed:
        ids[0] = -1  # a token with no expert
        ids[1, 2] = -1
        w[2, 0] = float("nan")  # dropped, as ggemm drops it
    r = moe_layer.SortedRows(ids, w, e)
    assert r.all_routed == all_routed
    assert r.rows == int(r.ends[-1]) == len(r.pair_of_row)
    assert torch.equal(r.a_offsets[1:], r.ends) and r.a_offsets[0] == 0
    experts_of_rows = ids.reshape(-1)[r.pair_of_row]
    assert (torch.diff(experts_of_rows) >= 0).all(), "rows are not sorted by expert"
    got = moe_layer.torch_layer(x, w_gate_up, w_down, r)
    ref = reference(x, w_gate_up, w_down, ids, w)
    # the torch glue rounds h and y to bf16 where ggemm keeps fp32: bf16's tolerance
    assert moe_layer.max_rel_err(got, ref) < moe_layer.MAX_REL_ERR
    if not all_routed:
        assert (got[0] == 0).all()


def test_table_and_arguments():
    row = {"model": "m", "tokens": 4, "routing": "balanced", "rows": 8, "max_rel_err": 1e-3}
    for impl, us in (("layer", 10.0), ("torch", 30.0), ("gemms", 8.0)):
        row.update({f"{impl}_sustained_us": us, f"{impl}_cold_us": 2 * us, f"{impl}_sustained_sm_mhz": 1980,
                    f"{impl}_sustained_watts": 500.0})
    row.update(speedup_sustained=3.0, speedup_cold=3.0, layer_over_gemms_sustained=1.25, layer_over_gemms_cold=1.25)
    text = moe_layer.table([row], moe_layer.IMPLS, "sustained")
    assert "| m | 4 | balanced | 8 | 10.0 | 30.0 | 8.0 | 3.00x | 1.25 | 1980 | 500 | 1.0e-03 |" in text
    assert "geometric mean layer speed-up vs torch (sustained): 3.00x" in text
    # cold has no clock or power reading
    assert "| m | 4 | balanced | 8 | 20.0 | 60.0 | 16.0 | 3.00x | 1.25 |  |  | 1.0e-03 |" in moe_layer.table([row], moe_layer.IMPLS, "cold")
    with pytest.raises(SystemExit):
        moe_layer.main(["--tokens", "0"])
    with pytest.raises(SystemExit):
        moe_layer.main(["--models", "no_such_model"])
    with pytest.raises(SystemExit):
        moe_layer.main(["--modes", "no_such_mode"])
