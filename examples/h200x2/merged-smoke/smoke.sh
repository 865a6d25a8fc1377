#!/usr/bin/env bash
# Smoke check of the merged binaries on the H200 machine (lead, 2026-12-01).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
cd "$(dirname "$0")"
L=./lab
o=$OUT
run() { echo "\$ lab $*"; "$L" "$@"; echo "[exit $?]"; }
run --version
run environment --device cuda:0
run environment --device all
run measure --device cuda:0 --batch 1 --context 16 --width 64 --dtype float32 --warmup 1 --repeats 2 --graph-replays 1000 --output $o/small-graph.json
run measure --device cuda:0 --batch 1 --context 16 --width 64 --output $o/small-graph.json
run measure --device cuda:0 --batch 100000 --context 100000 --width 4096 --output $o/oom.json
ls $o
run measure --device cuda:7 --batch 1 --context 16 --width 64 --output $o/nogpu.json
run measure --device all --batch 2 --context 128 --width 1024 --graph-replays 100 --output-dir $o/all
run sweep --device cuda:0 --vary width --from 1024 --to 65536 --batch 8 --context 4096 --dtype bfloat16 --output-dir $o/sweep
python3 ../../dist/mesure_memoire.py measure --device cuda:0 --batch 1 --context 16 --width 64 --graph-replays 1000 --output $o/py-small-graph.json; echo "[exit $?]"
# kill -9 of lab during a measurement: the worker must not survive
"$L" measure --device cuda:0 --batch 8 --context 2048 --width 4096 --repeats 2000 --output $o/killed.json & P=$!
sleep 6; kill -9 $P; sleep 2; echo "workers left after kill -9: $(pgrep -c lab-torch-worker)"; ls $o
