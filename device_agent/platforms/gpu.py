"""What every GPU plugin's worker does through PyTorch's device API, whichever the vendor.

``torch.cuda`` is PyTorch's device API on NVIDIA's CUDA build and on AMD's ROCm build alike (the
ROCm build maps it onto HIP, with the ``cuda`` device string), and Triton's ``driver.active`` is
the active backend's driver: nothing here is NVIDIA's own (docs/platforms.md).
"""

from __future__ import annotations

import os

__all__ = ["init_gpu_worker", "load_triton_driver"]


def load_triton_driver(shared_cache: str) -> None:
    """Load Triton's driver helpers from a cache the agent shares between its workers.

    The first use of Triton's driver compiles a C helper module (``cuda_utils``) with gcc into
    the Triton cache. Each worker's cache is private and fresh (candidates must not share
    compiled kernels), so without this every worker would run ``gcc -O3`` — a second or more of
    CPU — inside the sandbox, under its process limit, for every candidate. Here the module is
    built once per agent, before privileges drop, into a directory the candidates cannot write;
    later workers only load it. The private cache is restored for everything else.
    """
    if not shared_cache:
        return
    from triton.runtime import driver

    private = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = shared_cache
    try:
        driver.active.utils  # noqa: B018 - creating the driver builds or loads the module
    finally:
        if private is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = private


def init_gpu_worker() -> None:
    """Initialise the worker's one device (it sees it as device 0), warm it, size torch's host
    thread pool and load Triton's driver helpers from the agent's shared cache."""
    import torch

    torch.cuda.init()  # type: ignore[no-untyped-call]
    torch.cuda.set_device(0)
    torch.zeros(1024, device="cuda").add_(1)
    torch.cuda.synchronize()
    # Host-side tensor work (input sets, copies) gets a few threads, not one per core: many
    # workers share the host. The pool is started here, before the sandbox counts this
    # worker's tasks for its process limit, or its lazy start would use up the headroom that
    # the compiler's own processes (gcc for Triton's launchers) need.
    torch.set_num_threads(int(os.environ.get("KGB_WORKER_THREADS", "4")))
    torch.randn(1 << 20).sum()
    load_triton_driver(os.environ.get("KGB_TRITON_DRIVER_CACHE", ""))
