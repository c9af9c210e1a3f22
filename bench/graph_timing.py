"""How the Python benchmarks (compare_torch.py, moe_layer.py) time a call
back to back: a CUDA graph of calls, replayed and timed between CUDA events,
with the SM clock and board power read through NVML.

Two back-to-back modes (docs/performance.md, "How it is measured"):
  sustained  the graph replayed `replays` times after REST_S seconds of an
             idle GPU: a burst of back-to-back calls, as one forward pass
             makes them, each implementation's from the same rested state
             (without the rest, a burst timed right after another
             implementation's starts at the clock that one left)
  steady     the same, after STEADY_S seconds of replays of the same graph:
             the clock and power the GPU holds under seconds of this load
             alone. At the H200's 700 W cap the power limiter lowers the SM
             clock further over the first second of a compute-bound load,
             so a kernel that draws more power per call loses more here.
"""
from __future__ import annotations

import ctypes
import statistics
import time

import torch

STEADY_S = 1.5  # seconds of replays before a steady-state measurement
REST_S = 0.5  # seconds of an idle GPU before a sustained measurement


def capture(fn, calls):
    """A CUDA graph of `calls` back-to-back calls of fn (replayed once), after a
    warm-up call on a side stream (library, kernels, workspace, torch's caches)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    return graph


class GpuMonitor:
    """The SM clock (MHz) and board power (W) through NVML, opened at run time
    as bench/gpu_monitor.h does; zeros where NVML is missing."""

    def __init__(self, device: int = 0):
        self.dev = None
        try:
            self.nvml = ctypes.CDLL("libnvidia-ml.so.1")
        except OSError:
            return
        if self.nvml.nvmlInit_v2() != 0:
            return
        dev = ctypes.c_void_p()
        props = torch.cuda.get_device_properties(device)
        if hasattr(props, "pci_domain_id"):  # by PCI bus id, so CUDA_VISIBLE_DEVICES cannot mislead it
            bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
            ok = self.nvml.nvmlDeviceGetHandleByPciBusId_v2(bus.encode(), ctypes.byref(dev)) == 0
        else:
            ok = self.nvml.nvmlDeviceGetHandleByIndex_v2(device, ctypes.byref(dev)) == 0
        self.dev = dev if ok else None

    def read(self):
        if self.dev is None:
            return 0, 0.0
        mhz, mw = ctypes.c_uint(), ctypes.c_uint()
        self.nvml.nvmlDeviceGetClockInfo(self.dev, 1, ctypes.byref(mhz))  # NVML_CLOCK_SM
        self.nvml.nvmlDeviceGetPowerUsage(self.dev, ctypes.byref(mw))
        return int(mhz.value), mw.value * 1e-3


def pick_modes(text: str, known) -> tuple:
    """The modes a comma-separated --modes names, in `known`'s order; empty
    when it names none or any that is not known (the caller refuses it)."""
    asked = text.split(",")
    if any(m not in known for m in asked):
        return ()
    return tuple(m for m in known if m in asked)


def rest() -> None:
    """REST_S of an idle GPU (the host sleeps; nothing is queued)."""
    time.sleep(REST_S)


def replay_for(graph, seconds: float) -> None:
    """Replays `graph` back to back for `seconds` (each replay waited for, so
    the host never queues far ahead of the GPU)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        graph.replay()
        torch.cuda.synchronize()


def back_to_back(fn, calls: int, replays: int, monitor: GpuMonitor | None = None, steady: bool = False):
    """(us per call, SM MHz, W) of fn in a graph of `calls` calls: the median
    over `replays` timed replays, after STEADY_S seconds of untimed ones
    (steady mode) or after rest() (sustained mode). Clock and power are read
    while each timed replay is in flight (zeros without a monitor); their
    medians."""
    graph = capture(fn, calls)
    if steady:
        replay_for(graph, STEADY_S)
    else:
        rest()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times, samples = [], []
    for _ in range(replays):
        start.record()
        graph.replay()
        stop.record()
        samples.append(monitor.read() if monitor else (0, 0.0))  # the replay is in flight (enqueued, not waited for)
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / calls)
    mhz = statistics.median(s[0] for s in samples)
    watts = statistics.median(s[1] for s in samples)
    return statistics.median(times), mhz, watts
