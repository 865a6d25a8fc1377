#!/usr/bin/env bash
# Phi-3 and --device all on the H200 (after run3), one call.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export LIBTORCH=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))')
C=.devcarry/w; L=$C/lab; W=$C/lab-torch-worker
echo "\$ lab measure --model phi-3-mini-4k --batch 1 --input-tokens 128 --output-tokens 128 --graph"
$L measure --device cuda:0 --model examples/models/phi-3-mini-4k --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker $W --batch 1 --input-tokens 128 --output-tokens 128 --output $OUT/lab-phi3-b1.json > $OUT/lab-phi3-b1.txt 2>&1; echo "[exit $?]" >> $OUT/lab-phi3-b1.txt
grep -E 'graph decode|eager decode|weights_|kv_cache|exit' $OUT/lab-phi3-b1.txt
echo "\$ lab measure --device all --model qwen3-0.6b ... --output-dir"
$L measure --device all --model examples/models/qwen3-0.6b --random-weights --graph --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 --worker $W --batch 1 --input-tokens 128 --output-tokens 64 --output-dir $OUT/all > $OUT/lab-all.txt 2>&1; echo "[exit $?]" >> $OUT/lab-all.txt
grep -E 'graph decode|wrote|exit' $OUT/lab-all.txt; ls $OUT/all
LD_LIBRARY_PATH=$LIBTORCH/lib:${LD_LIBRARY_PATH:-} python3 $C/decoder_numerics.py "$W" --gpu examples/models/phi-3-mini-4k 2>&1 | grep -E '^(ok|FAIL)' | tee $OUT/logits-gpu-phi3.txt
