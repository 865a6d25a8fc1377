#!/usr/bin/env bash
# Issue 21 step 4, run6: programmatic dependent launch in the decode kernels. One GPU call:
# copy bandwidth; lab measure --model Llama-3.1-8B batch 1 with the default (overlap on,
# prefetch 4), LAB_DECODE_OVERLAP=off (the same kernels launched plainly), prefetch 0 and 8;
# logits against transformers on the GPU (the kernels under overlap); transformers with a
# static cache and CUDA graphs; batch 16 and four other models. Run from the repository root
# with the binaries in .devcarry/r6/ (built on the CPU machine:
# cargo build --release -p lab --features torch, stripped).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
C=.devcarry/r6; L=$C/lab; W=$C/lab-torch-worker
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,clocks.max.sm --format=csv | tee $OUT/nvidia-smi.txt
python3 -c 'import torch,transformers;print("torch",torch.__version__,"transformers",transformers.__version__)' | tee -a $OUT/nvidia-smi.txt
python3 scripts/time_calibrate_h200.py $OUT/cal --only copy --models examples/models 2>&1 | tail -2
m() { n=$1; shift; echo "\$ lab measure --model $n $*"; "$L" measure --device cuda:0 --model examples/models/$n --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker "$W" "$@"; echo "[exit $?]"; }
s() { grep -E '^\$|graph decode|eager decode|weights_alloc|kv_cache|decode steps ran|exit|rror' "$@" | cut -c1-250; }
B1="--batch 1 --input-tokens 128 --output-tokens 128"
m llama-3.1-8b $B1 --output $OUT/lab-llama-b1.json > $OUT/lab-llama-b1.txt 2>&1
LAB_DECODE_OVERLAP=off m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-plain.json > $OUT/lab-llama-b1-plain.txt 2>&1
LAB_DECODE_PREFETCH=8 m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-pf8.json > $OUT/lab-llama-b1-pf8.txt 2>&1
LAB_DECODE_PREFETCH=0 m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-pf0.json > $OUT/lab-llama-b1-pf0.txt 2>&1
m llama-3.1-8b $B1 --output $OUT/lab-llama-b1-again.json > $OUT/lab-llama-b1-again.txt 2>&1
s $OUT/lab-llama-b1*.txt
G="examples/models/llama-3.1-8b examples/models/mistral-7b-v0.1 examples/models/qwen2.5-0.5b examples/models/qwen3-0.6b examples/models/phi-3-mini-4k"
export LD_LIBRARY_PATH=$LIBTORCH/lib:${LD_LIBRARY_PATH:-}
python3 lab/tests/numerics/decoder_numerics.py "$W" --gpu $G 2>&1 | grep -E '^(ok|FAIL)|rror' | tee $OUT/logits-gpu.txt
python3 scripts/time_validate_h200.py $OUT/hf --models-dir examples/models --only llama-3.1-8b --batches 1,16 --contexts 256,1088 --no-prefill --tag same-run 2>&1 | grep -E 'decode|==' | tail -6
m llama-3.1-8b --batch 16 --input-tokens 1024 --output-tokens 64 --output $OUT/lab-llama-b16.json > $OUT/lab-other.txt 2>&1
LAB_DECODE_OVERLAP=off m llama-3.1-8b --batch 16 --input-tokens 1024 --output-tokens 64 --output $OUT/lab-llama-b16-plain.json >> $OUT/lab-other.txt 2>&1
for n in mistral-7b-v0.1 qwen3-0.6b qwen2.5-0.5b phi-3-mini-4k; do m $n $B1 --output $OUT/lab-$n-b1.json >> $OUT/lab-other.txt 2>&1; done
s $OUT/lab-other.txt
cd $OUT && tar czf /tmp/all.tgz . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/all.tgz && ls -la $OUT
