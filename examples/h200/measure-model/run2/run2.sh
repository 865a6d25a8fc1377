#!/usr/bin/env bash
# lab measure --model beside transformers (static cache, CUDA graphs), same H200, same call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
L=.devcarry/mm/lab; W=.devcarry/mm/lab-torch-worker
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
python3 scripts/time_calibrate_h200.py $OUT/cal --only copy --models examples/models 2>&1 | tail -5
m() { n=$1; shift; echo "\$ lab measure --model $n $*"; "$L" measure --device cuda:0 --model examples/models/$n --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker "$W" "$@"; echo "[exit $?]"; }
m llama-3.1-8b --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-llama-b1.json > $OUT/lab-llama-b1.txt 2>&1
m llama-3.1-8b --batch 16 --input-tokens 1024 --output-tokens 64 --output $OUT/lab-llama-b16.json > $OUT/lab-llama-b16.txt 2>&1
m mistral-7b-v0.1 --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-mistral-b1.json > $OUT/lab-other.txt 2>&1
m qwen3-0.6b --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-qwen3-b1.json >> $OUT/lab-other.txt 2>&1
tail -8 $OUT/lab-llama-b1.txt $OUT/lab-llama-b16.txt; grep -E 'decode:|weights_|exit' $OUT/lab-other.txt
python3 scripts/time_validate_h200.py $OUT/hf --models-dir examples/models --only llama-3.1-8b --batches 1,16 --contexts 256,1088 --no-prefill --tag same-run 2>&1 | grep -E 'decode|==' | tail -8
cd $OUT && tar czf /tmp/all.tgz . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/all.tgz && ls -la $OUT
