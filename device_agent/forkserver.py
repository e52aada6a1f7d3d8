"""What the agent's workers are forked from: one multiprocessing forkserver per agent.

A separate process started by exec with a scrubbed environment, which imports torch, triton, the
suite and the worker's side of the harness once (no device is initialised there); every worker
is a fork of it. The gRPC server itself never forks.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
import sys
import threading
from pathlib import Path

# Environment variables a worker keeps; everything else (secrets included) is dropped.
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
             "LD_LIBRARY_PATH", "CUDA_HOME", "TRITON_CACHE_DIR", "TRITON_HOME", "NVIDIA_VISIBLE_DEVICES",
             "TORCH_HOME", "XDG_CACHE_HOME", "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST",
             "NVSHMEM_DISABLE_NVLS", "ROCR_VISIBLE_DEVICES", "KGB_PLATFORM_MODULES")


# What the forkserver imports once, before any fork. No module that defines a @triton.jit
# kernel (decoration fixes interpreter vs compiled mode) and nothing that initialises a device.
_PRELOAD = ["numpy", "torch", "triton", "triton.language", "operators", "device_agent.codec",
            "device_agent.sandbox", "device_agent.protocol", "device_agent.sandboxed_job",
            "device_agent.sandboxed_worker", "device_agent.platforms",
            # Imported by the first torch.use_deterministic_algorithms (the checking stage):
            # about 3.5 s per worker on a CI core when each worker imported it itself.
            "torch._inductor",
            # Imported by the first kernel compile (about 0.1 s per worker on the H200 host).
            "triton.compiler.compiler", "triton.compiler.code_generator",
            "device_agent.launchers", "device_agent.preload"]
_forkserver_lock = threading.Lock()


def scrubbed_env() -> dict[str, str]:
    """The agent's environment cut to the allow-list, with the repository on the import path."""
    env = {k: v for k, v in os.environ.items() if k in _ENV_KEEP}
    repo_root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (repo_root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def ensure_forkserver(import_env: dict[str, str],
                      sys_path: tuple[str, ...]) -> multiprocessing.context.BaseContext:
    """Start the forkserver once, with only the allow-listed environment (so no secret of the
    agent's environment is ever visible in a worker, not even in /proc/self/environ) plus what
    the platform needs at import time, and with the vetted import path (the forkserver runs as
    root: it must never import from a directory a candidate could write). One agent serves one
    platform, so one forkserver does."""
    ctx = multiprocessing.get_context("forkserver")
    with _forkserver_lock:
        ctx.set_forkserver_preload(_PRELOAD)
        saved, saved_path = dict(os.environ), list(sys.path)
        try:
            os.environ.clear()
            os.environ.update(scrubbed_env())
            os.environ.update(import_env)
            sys.path[:] = sys_path
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
            sys.path[:] = saved_path
    return ctx
