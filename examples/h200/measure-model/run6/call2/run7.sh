#!/usr/bin/env bash
# Issue 21 step 4, run7: the committed default (programmatic dependent launch, prefetch 8),
# Llama-3.1-8B batch 1 three times in one call beside prefetch 6 and 12 and plain launches;
# copy bandwidth in the same call; logits against transformers on the GPU with the default.
# Binaries in .devcarry/r7/ (cargo build --release -p lab --features torch, stripped).
set -u
export PYTHONUNBUFFERED=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
C=.devcarry/r7; L=$C/lab; W=$C/lab-torch-worker
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,clocks.max.sm --format=csv | tee $OUT/nvidia-smi.txt
python3 scripts/time_calibrate_h200.py $OUT/cal --only copy --models examples/models 2>&1 | tail -2
m() { n=$1; shift; echo "\$ lab measure --model $n $*"; "$L" measure --device cuda:0 --model examples/models/$n --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker "$W" "$@"; echo "[exit $?]"; }
B1="--batch 1 --input-tokens 128 --output-tokens 128"
m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-1.json > $OUT/lab-llama-b1-1.txt 2>&1
LAB_DECODE_PREFETCH=6 m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-pf6.json > $OUT/lab-llama-b1-pf6.txt 2>&1
m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-2.json > $OUT/lab-llama-b1-2.txt 2>&1
LAB_DECODE_PREFETCH=12 m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-pf12.json > $OUT/lab-llama-b1-pf12.txt 2>&1
LAB_DECODE_OVERLAP=off m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-plain.json > $OUT/lab-llama-b1-plain.txt 2>&1
m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-3.json > $OUT/lab-llama-b1-3.txt 2>&1
grep -E '^\$|graph decode|eager decode|weights_alloc|kv_cache_bytes|exit|rror' $OUT/lab-llama-b1*.txt | cut -c1-200
G="examples/models/llama-3.1-8b examples/models/mistral-7b-v0.1 examples/models/qwen2.5-0.5b examples/models/qwen3-0.6b examples/models/phi-3-mini-4k"
export LD_LIBRARY_PATH=$LIBTORCH/lib:${LD_LIBRARY_PATH:-}
python3 lab/tests/numerics/decoder_numerics.py "$W" --gpu $G 2>&1 | grep -E '^(ok|FAIL)|rror' | tee $OUT/logits-gpu.txt | grep -c '^ok'
cd $OUT && tar czf /tmp/all.tgz . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/all.tgz && ls -la $OUT
