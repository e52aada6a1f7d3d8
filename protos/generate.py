"""Regenerate the committed gRPC/protobuf code from the ``.proto`` files.

Run ``python -m protos.generate`` after editing a ``.proto``; ``tests/protos`` fails when the
committed code drifts. Use grpcio-tools at the version pinned in ``constraints.txt`` (the oldest
grpcio we support), or the stubs refuse to import on hosts with that grpcio.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = sorted((ROOT / "protos").rglob("*.proto"))


def generate(out_dir: Path) -> list[Path]:
    """Write generated modules for every proto under ``out_dir`` (mirroring the repo layout)."""
    from grpc_tools import protoc  # dev dependency only

    args = [
        "protoc",
        f"-I{ROOT}",
        f"--python_out={out_dir}",
        f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *[str(p.relative_to(ROOT)) for p in PROTOS],
    ]
    if protoc.main(args) != 0:
        raise RuntimeError("protoc failed: " + " ".join(args))
    return sorted((out_dir / "protos").rglob("*_pb2*.py*"))


def main() -> int:
    written = generate(ROOT)
    for p in written:
        print(p.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
