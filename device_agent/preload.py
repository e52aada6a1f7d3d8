"""Work every worker would otherwise repeat, done once in the forkserver before any fork.

Imported by the forkserver (``device_agent.forkserver``), so each forked worker inherits the
result: every problem module imported (each parses its reference solution as it registers), the
platform plugins discovered, and Triton's cache key computed (a hash of Triton's own source
files, cached for the process). Measured on the H200 under a full agent, the problems and the
key cost each worker about two seconds of CPU.
Nothing here defines a Triton kernel or touches a device.
"""

from __future__ import annotations

import contextlib

import operators
from device_agent.platforms import platform_names

operators.all_specs()
platform_names()

with contextlib.suppress(Exception):  # an internal helper: a Triton without it just pays later
    from triton.runtime.cache import triton_key

    triton_key()
