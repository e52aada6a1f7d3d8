#!/bin/sh
# Install a KernelGenBench device agent into a virtual environment: the base package only (no
# Ray, no CLI toolkit, no coordinator dependencies), pinned by constraints.txt.
#
#   deploy/agent/install.sh SOURCE
#
# SOURCE is a kernelgenbench source tree (the directory holding pyproject.toml). The Dockerfile
# beside this script runs it; tests/deploy/test_install.py runs it on the CPU machine; on a bare GPU
# host run it as root (docs/deploy.md). Settings, all optional, from the environment:
#
#   KGB_VENV             the virtual environment to create or update   (default /opt/kgb)
#   KGB_PYTHON           the interpreter that creates it               (default python3)
#   KGB_CONSTRAINTS      the constraints file                          (default SOURCE/constraints.txt)
#   KGB_TORCH            torch version for this host, replacing the constraints' pin, e.g. 2.11.0
#   KGB_TRITON           triton version that goes with it, e.g. 3.6.0 (set both or neither)
#   KGB_TORCH_INDEX_URL  install torch (and what it brings: triton, CUDA libraries) from this
#                        package index first, e.g. https://download.pytorch.org/whl/cu130
#   KGB_EXTRAS           extras to add, comma-separated (default none: the agent needs none)
#
# constraints.txt pins the development machine's set, whose torch is a CPU build; a GPU host sets
# KGB_TORCH and KGB_TRITON (and usually KGB_TORCH_INDEX_URL) and keeps every other pin. The
# constraints actually used are written to $KGB_VENV/kgb-constraints.txt, and $KGB_VENV/run is
# made as the agent's working directory. The script ends by checking that the agent imports and
# starts its command line, and that Ray did not come along.
set -eu

usage() {  # the comment above
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
    exit 2
}

[ $# -eq 1 ] || usage
case "$1" in -h|--help) usage ;; esac
[ -f "$1/pyproject.toml" ] || { echo "install.sh: $1 has no pyproject.toml" >&2; exit 2; }
SOURCE=$(cd "$1" && pwd)

VENV=${KGB_VENV:-/opt/kgb}
case $VENV in /*) ;; *) VENV=$(pwd)/$VENV ;; esac
PYTHON=${KGB_PYTHON:-python3}
CONSTRAINTS=${KGB_CONSTRAINTS:-$SOURCE/constraints.txt}
TORCH=${KGB_TORCH:-}
TRITON=${KGB_TRITON:-}
INDEX=${KGB_TORCH_INDEX_URL:-}
EXTRAS=${KGB_EXTRAS:-}

[ -f "$CONSTRAINTS" ] || { echo "install.sh: no constraints file $CONSTRAINTS" >&2; exit 2; }
if [ "${TORCH:+set}" != "${TRITON:+set}" ]; then
    # Each torch release pins the triton it was built with; half an override cannot resolve.
    echo "install.sh: set KGB_TORCH and KGB_TRITON together (e.g. 2.11.0 and 3.6.0)" >&2
    exit 2
fi

# The agent's workers run under uids of their own and must read the installation.
umask 022
echo "install.sh: creating $VENV with $PYTHON"
"$PYTHON" -m venv "$VENV"
# Where the agent starts: Python puts the working directory first on sys.path, so an empty
# directory that only root (the installing user) can write.
mkdir -p "$VENV/run"
chmod 0755 "$VENV/run"
PY=$VENV/bin/python

# The constraints this host uses: the file's pins, torch and triton replaced when overridden.
USED=$VENV/kgb-constraints.txt
if [ -n "$TORCH" ]; then
    grep -v -i -E '^[[:space:]]*(torch|triton)[[:space:]]*(==|>|<|~|!|$)' "$CONSTRAINTS" > "$USED.tmp"
    printf '# install.sh: KGB_TORCH and KGB_TRITON\ntorch==%s\ntriton==%s\n' "$TORCH" "$TRITON" >> "$USED.tmp"
else
    cp "$CONSTRAINTS" "$USED.tmp"
fi
mv "$USED.tmp" "$USED"

if [ -n "$INDEX" ]; then
    echo "install.sh: torch from $INDEX"
    "$PY" -m pip install --no-input -c "$USED" --index-url "$INDEX" torch
fi

TARGET=$SOURCE
[ -z "$EXTRAS" ] || TARGET="$SOURCE[$EXTRAS]"
echo "install.sh: installing $TARGET"
"$PY" -m pip install --no-input -c "$USED" "$TARGET"

echo "install.sh: checking the agent"
cd /  # import from the environment, never from a source tree in the working directory
"$PY" -m device_agent serve --help > /dev/null
KGB_TORCH=$TORCH KGB_TRITON=$TRITON KGB_EXTRAS=$EXTRAS "$PY" - <<'CHECK'
import importlib.util
import os
import sys
from pathlib import Path

import device_agent
import device_agent.server  # noqa: F401  the gRPC service and everything it loads
import device_agent.sandboxed_worker  # noqa: F401  what a sandboxed worker loads
import operators
import pynvml  # noqa: F401  NVML bindings (they load without a driver)
import pyseccomp  # noqa: F401  the sandbox's filter: finds libseccomp (libseccomp2) or fails
import torch
import triton

assert Path(device_agent.__file__).is_relative_to(sys.prefix), device_agent.__file__
problems = len(operators.all_specs())
assert problems > 0, "no operator problems registered"
for name, want in (("torch", os.environ["KGB_TORCH"]), ("triton", os.environ["KGB_TRITON"])):
    have = {"torch": torch.__version__, "triton": triton.__version__}[name]
    assert not want or have.split("+")[0] == want, f"{name} {have} installed, {want} asked for"
# The agent host installs without the coordinator's dependencies (pyproject.toml's base set).
extra = [m for m in ("ray", "click", "rich") if importlib.util.find_spec(m) is not None]
if not os.environ["KGB_EXTRAS"]:
    assert not extra, f"an agent install should not contain {extra}"
print(f"install.sh: ok: torch {torch.__version__}, triton {triton.__version__}, {problems} problems")
CHECK
