#!/usr/bin/env bash
# The foundation GPU batch (issue #2): reference solutions and negative controls of every problem
# through one cuda agent, then the gpu-marked tests. Run on the H200 from the repo root with the
# carried wheels (.whl: grpcio-health-checking, grpcio-reflection, orjson, rich). Results -> $OUT.
set -uo pipefail
OUT=${OUT:-bench/results}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 KGB_AGENT_SECRET_FILE=/tmp/kgb-secret
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,memory.total \
  --format=csv | tee "$OUT/nvidia-smi.csv"
python3 -c "import sys,torch,triton,grpc,google.protobuf as p;print(sys.version.split()[0],torch.__version__,triton.__version__,grpc.__version__,p.__version__)" | tee "$OUT/versions.txt"
python3 -m coordinator agent serve --platform cuda --port 50151 > "$OUT/agent.log" 2>&1 &
AGENT=$!
timeout "${BENCH_TIMEOUT:-420}" python3 bench/reference_suite.py --agent 127.0.0.1:50151 \
  --out "$OUT/h200-reference.jsonl" > "$OUT/table.md" 2> "$OUT/bench.log"
echo "bench exit $?"; cat "$OUT/table.md"
kill -TERM $AGENT; wait $AGENT
timeout "${TEST_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider tests/device_agent/test_gpu.py 2>&1 | tail -15 | tee "$OUT/pytest-gpu.txt"
