#!/usr/bin/env bash
# Issue 21 step 4, one GPU call: copy bandwidth, lab measure --model (CUDA-graph decode),
# transformers with a static cache and CUDA graphs, and logits against transformers, all on
# the same H200. Run from the repository root with the binaries and the changed scripts in
# .devcarry/w/ (built on the CPU machine with `cargo xtask worker`).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
C=.devcarry/w; L=$C/lab; W=$C/lab-torch-worker
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch,transformers;print("torch",torch.__version__,"transformers",transformers.__version__)'
python3 scripts/time_calibrate_h200.py $OUT/cal --only copy --models examples/models 2>&1 | tail -3
m() { n=$1; shift; echo "\$ lab measure --model $n $*"; "$L" measure --device cuda:0 --model examples/models/$n --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker "$W" "$@"; echo "[exit $?]"; }
m llama-3.1-8b --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-llama-b1.json > $OUT/lab-llama-b1.txt 2>&1
m llama-3.1-8b --batch 16 --input-tokens 1024 --output-tokens 64 --output $OUT/lab-llama-b16.json > $OUT/lab-llama-b16.txt 2>&1
m mistral-7b-v0.1 --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-mistral-b1.json > $OUT/lab-other.txt 2>&1
m qwen3-0.6b --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-qwen3-b1.json >> $OUT/lab-other.txt 2>&1
m qwen2.5-0.5b --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-qwen2-b1.json >> $OUT/lab-other.txt 2>&1
grep -E 'graph decode|eager decode|weights_|kv_cache|exit' $OUT/lab-llama-b1.txt $OUT/lab-llama-b16.txt $OUT/lab-other.txt
python3 scripts/time_validate_h200.py $OUT/hf --models-dir examples/models --only llama-3.1-8b --batches 1,16 --contexts 256,1088 --no-prefill --tag same-run 2>&1 | grep -E 'decode|==' | tail -6
LD_LIBRARY_PATH=$LIBTORCH/lib:${LD_LIBRARY_PATH:-} python3 $C/decoder_numerics.py "$W" --gpu examples/models/llama-3.1-8b examples/models/mistral-7b-v0.1 examples/models/qwen2.5-0.5b examples/models/qwen3-0.6b 2>&1 | grep -vi warn | tee $OUT/logits-gpu.txt
python3 $C/decode_variants_h200.py --out $OUT 2>&1 | grep -v -i warn > $OUT/variants-log.txt; head -8 $OUT/variants-log.txt
cd $OUT && tar czf /tmp/all.tgz . && rm -rf $OUT/* && mv /tmp/all.tgz $OUT/all.tgz && ls -la $OUT
