#!/usr/bin/env bash
# GPU batches on the H200 host, one step per argument, each under its own time limit:
#   bash bench/h200.sh setup sandbox gputests cublastests corpus corpusw copy throughput repeatability repeatseq suite
# Run from the repo root with the carried wheels in .whl/ (grpcio-health-checking,
# grpcio-reflection, orjson, rich, pyseccomp, markdown-it-py, mdurl, pygments; pytest-xdist and
# execnet for cublastests; py-spy too for PYSPY=1 profiles). Raw results go to $OUT
# (default bench/results/h200).
set -uo pipefail
OUT=${OUT:-bench/results/h200}
mkdir -p "$OUT"
# Outside /tmp: the sandbox gives each worker a private /tmp, which would hide the wheels.
SITE=${SITE:-/opt/kgb-site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl
export PYTHONPATH=$SITE:$PWD PYTHONUNBUFFERED=1 KGB_AGENT_SECRET_FILE=/tmp/kgb-secret
for step in "$@"; do
  echo "== $step $(date -u +%H:%M:%S)"
  case $step in
    setup)
      nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,memory.total \
        --format=csv | tee "$OUT/nvidia-smi.csv"
      python3 -c "import sys,torch,triton,grpc,google.protobuf as p;print(sys.version.split()[0],torch.__version__,triton.__version__,grpc.__version__,p.__version__)" | tee "$OUT/versions.txt"
      # Host limits that bound how many workers can start (pids, memory) — for diagnosis.
      { echo "nproc $(nproc)"; lscpu | grep -E "^(Model name|CPU MHz|CPU max MHz|Thread|Core|Socket)" ; free -g | head -2
        for f in pids.max pids.current memory.max memory.current cpu.max; do
          echo "cgroup $f: $(cat /sys/fs/cgroup/$f 2>/dev/null || echo n/a)"; done
        ulimit -a; echo "libseccomp: $(ldconfig -p | grep -c libseccomp) entries"
        grep cgroup /proc/self/mountinfo; cat /proc/self/cgroup; } > "$OUT/limits.txt" 2>&1
      cat "$OUT/limits.txt" | head -12 ;;
    sandbox)
      # The sandbox's attacks against a cuda agent (namespaces, seccomp, cgroups with CUDA in the
      # worker), then the filter and cgroups on their own.
      KGB_TEST_PLATFORM=cuda timeout "${SANDBOX_S:-360}" python3 -m pytest -q -p no:cacheprovider -rA \
        tests/device_agent/test_sandbox.py tests/device_agent/test_seccomp_policy.py \
        tests/device_agent/test_cgroups.py > "$OUT/sandbox.txt" 2>&1
      echo "exit $?"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/sandbox.txt" | cut -c1-300 | tail -30 ;;
    gputests)
      timeout "${GPUTESTS_S:-240}" python3 -m pytest -q -p no:cacheprovider -x -m gpu ${GPUTESTS_K:+-k "$GPUTESTS_K"} \
        tests/device_agent/test_gpu.py 2>&1 | tail -25 | tee "$OUT/pytest-gpu.txt" ;;
    cublastests)
      # libcublas against every cuBLAS reference (each routine in its own interpreter), N at a
      # time with pytest-xdist (carry its wheel and execnet's); -v streams a line per routine, so
      # a run cut short by its limit still says which passed. The `_64` benchmark cases need
      # the memory of a card to themselves: CUBLAS_K="not (benchmark and _64)" leaves them out.
      timeout "${CUBLAS_S:-400}" python3 -m pytest -v -p no:cacheprovider -n "${CUBLAS_N:-8}" -m gpu \
        --tb=line -rf ${CUBLAS_K:+-k "$CUBLAS_K"} tests/operators/test_cublas_gpu.py \
        tests/operators/test_cublas_blas3.py > "$OUT/cublas-gpu.txt" 2>&1
      echo "exit $?"; grep -cE " PASSED " "$OUT/cublas-gpu.txt"; grep -E " FAILED |^FAILED" "$OUT/cublas-gpu.txt" | cut -c1-300 | tail -30 ;;
    corpus)
      timeout "${CORPUS_S:-420}" python3 -m pytest -q -p no:cacheprovider -m gpu -rA \
        -k "${CORPUS_K:-on_gpu}" tests/adversarial/test_corpus.py > "$OUT/corpus$CORPUS_TAG.txt" 2>&1
      echo "exit $?"; grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/corpus$CORPUS_TAG.txt" | cut -c1-300 | tail -30 ;;
    corpusw)
      # The whole corpus, each cheat with its layer alone, GPU-only layers and honest files
      # first; resumable (verdicts already in $OUT/corpus-gpu.jsonl are skipped).
      timeout "${CORPUS_S:-500}" python3 bench/corpus_gpu.py --out "$OUT" --whole \
        --workers "${CORPUS_WORKERS:-14}" ${CORPUS_ARGS:-} > "$OUT/corpusw.txt" 2>&1
      echo "exit $?"; grep -E "^(ok|BAD|==)|verdicts" "$OUT/corpusw.txt" | cut -c1-240 | tail -60 ;;
    copy|throughput|repeatability)
      vmstat 5 > "$OUT/vmstat-$step.txt" 2>&1 & VMSTAT=$!; SPY=
      if [ -n "${PYSPY:-}" ] && [ -x "$SITE/bin/py-spy" ]; then
        # Once the (warm) agent serves: sample it and every worker it forked, without pausing them.
        ( log="$OUT/$step-agent.log"; for _ in $(seq 600); do grep -q SERVING "$log" 2>/dev/null && break; sleep 1; done
          sleep "${PYSPY_DELAY:-20}"; P=$(pgrep -of "device_agent serve")
          timeout $((${PYSPY_S:-60} + 30)) "$SITE"/bin/py-spy record -p "$P" --subprocesses --nonblocking \
            -f raw -r "${PYSPY_RATE:-20}" -d "${PYSPY_S:-60}" -o "$OUT/pyspy-$step.txt" > "$OUT/pyspy-$step.log" 2>&1 ) & SPY=$!
      fi
      timeout "${STEP_S:-300}" python3 bench/engine.py "$step" --out "$OUT" ${ENGINE_ARGS:-} \
        > "$OUT/$step.md" 2> "$OUT/$step.log"; rc=$?; echo "exit $rc"
      # Cut short by its limit: the table from the verdicts streamed so far.
      if [ "$step" = throughput ] && [ $rc -ne 0 ]; then python3 bench/engine.py rate --out "$OUT" > "$OUT/$step.md"; fi
      cat "$OUT/$step.md"; tail -3 "$OUT/$step.log"
      kill $VMSTAT 2>/dev/null
      if [ -n "$SPY" ]; then for _ in $(seq 20); do kill -0 $SPY 2>/dev/null || break; sleep 1; done; kill $SPY 2>/dev/null; fi ;;
    repeatseq)
      timeout "${STEP_S:-300}" python3 bench/engine.py repeatability --sequential --out "$OUT" \
        > "$OUT/$step.md" 2> "$OUT/$step.log"; echo "exit $?"; cat "$OUT/$step.md"; tail -3 "$OUT/$step.log" ;;
    suite)
      # The agent's Prometheus metrics (stage times, timing-lock waits) are saved at the end.
      python3 -m coordinator agent serve --platform "${SUITE_PLATFORM:-cuda}" --port 50151 \
        --metrics-port 9464 --workers "${SUITE_WORKERS:-12}" ${SUITE_AGENT_ARGS:-} \
        > "$OUT/suite-agent.log" 2>&1 &
      AGENT=$!
      timeout "${SUITE_S:-400}" python3 bench/reference_suite.py --agent 127.0.0.1:50151 \
        --out "${SUITE_OUT:-$OUT/reference.jsonl}" --jobs "${SUITE_JOBS:-8}" ${SUITE_ARGS:-} \
        > "$OUT/suite.md" 2> "$OUT/suite.log"
      echo "exit $?"; cat "$OUT/suite.md"
      python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9464/metrics', timeout=10).read().decode())" \
        > "$OUT/suite-metrics.txt" 2>&1
      grep -E "^kgb_agent_(stage_seconds|timing_lock_wait_seconds)_(sum|count)" "$OUT/suite-metrics.txt" | head -20
      kill -TERM $AGENT; wait $AGENT ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
# The device tool returns a handful of files: pack everything into one.
tar -czf "${RESULTS_TAR:-/tmp/results.tgz}" -C "$OUT" . && echo "packed $(ls "$OUT" | wc -l) files"
