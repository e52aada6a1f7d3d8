"""How libcublas's band routines scale with n and k on a GPU: is the suite's cuBLAS baseline of
``cublasDsbmv_v2`` (2.1 s for n = 4M, k = 15 on an H100 in session 13, 1730x slower than the
Triton reference) what libcublas does, or something our call does wrong?

Times the baseline of each problem (the ctypes call of operators/cublas/_cublas.py, exactly as
the harness runs it) on cases built by the problem's own ``make_call``, for n from 2^12 up and
a few band widths, and prints one JSON line per case: the median of ``--reps`` CUDA-event
timings and the bandwidth it implies (band storage + vectors read once). ``cublasDgemv_v2`` on
an n x (k+1) matrix is the bandwidth yardstick. Run on the GPU host:

    python bench/cublas_band_probe.py > bench/results/<run>/band-probe.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

import orjson
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import operators  # noqa: E402
from operators.invoke import to_device  # noqa: E402


def _time(fn: object, reps: int) -> float:
    """Median milliseconds of ``reps`` runs of ``fn`` after one warm-up."""
    assert callable(fn)
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
        if sum(out) > 3000:  # a pathological case: a few samples are enough
            break
    return statistics.median(out)


def _probe(op: str, params: dict[str, object], n: int, reps: int) -> dict[str, object]:
    spec = operators.get(op)
    c = spec.c(n, **params)  # type: ignore[attr-defined]
    call = spec.make_call(c, torch.Generator().manual_seed(0))
    call = dataclasses.replace(call, args=to_device(call.args, "cuda"))
    ms = _time(lambda: spec.baseline(call), reps)
    k = int(params["k"])  # type: ignore[call-overload]
    width = 8 if "D" in op.split("::cublas")[1][:1] else 4
    moved = (n * (k + 1) + 3 * n) * width
    return {"op": op, "n": n, **params, "ms": round(ms, 4),
            "gbps": round(moved / ms / 1e6, 1), "baseline": spec.baseline_library()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--max-log2n", type=int, default=22)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA device", file=sys.stderr)
        return 2
    sizes = [2**e for e in range(12, args.max_log2n + 1, 2)]
    probes = [("cublas::cublasDsbmv_v2", dict(k=k, uplo=u, alpha=-1.5, beta=0.5, incx=1, incy=1,
                                              pad=0))
              for k in (1, 15, 63) for u in (0, 1)]
    probes += [("cublas::cublasStbmv_v2", dict(k=k, uplo=u, trans=0, diag=0, incx=1, pad=0))
               for k in (15, 63) for u in (0, 1)]
    for op, params in probes:
        for n in sizes:  # larger n only while a call stays under a second (Dsbmv's grows as n^2)
            try:
                row = _probe(op, params, n, args.reps)
            except Exception as e:  # noqa: BLE001 - a probe reports and goes on
                row = {"op": op, "n": n, **params, "error": f"{type(e).__name__}: {e}"[:300]}
            print(orjson.dumps(row).decode(), flush=True)
            torch.cuda.empty_cache()
            if float(row.get("ms", 1e9)) > 1000:  # type: ignore[arg-type]
                break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
