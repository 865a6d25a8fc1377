#!/usr/bin/env bash
# lab measure --model on the GPU machine, beside transformers on the same GPU (issue #19's GPU
# proof, for the lead to run; builds nothing).
#
# Takes the binaries built here and carried to the device (`cargo xtask worker`, then carry
# target/torch/release/lab and target/torch/release/lab-torch-worker), and the GPU machine's
# own PyTorch 2.11.0 (with transformers 5.17.0, pinned in xtask/torch-venv-requirements.txt).
# Writes into $OUT (or ./measure-model-out):
#   lab-llama-3.1-8b.json     lab's model-measurement document (random weights, --graph)
#   lab-llama-3.1-8b.txt      its summary (phase rows, decode medians, plan vs measured)
#   transformers.json         transformers with a static cache: eager and CUDA-graph decode
#   copy-bandwidth.json       device-to-device copy bandwidth of this GPU (the 85 % target's base)
# Usage: scripts/measure_model_h200.sh [BATCH] [INPUT_TOKENS] [OUTPUT_TOKENS]
set -euo pipefail

BATCH=${1:-1}
INPUT=${2:-128}
OUTPUT=${3:-128}
MODEL=examples/models/llama-3.1-8b
OUT=${OUT:-measure-model-out}
PY=${PY:-/opt/torch/.venv/bin/python}
export LIBTORCH=${LIBTORCH:-/opt/torch/.venv/lib/python3.12/site-packages/torch}
LAB=${LAB:-target/torch/release/lab}
WORKER=${WORKER:-target/torch/release/lab-torch-worker}
mkdir -p "$OUT"

for f in "$LAB" "$WORKER"; do
    [ -x "$f" ] || { echo "missing $f: carry target/torch/release from cargo xtask worker" >&2; exit 2; }
done
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, torch.cuda.get_device_name(0))'

nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv || true

# 1. lab: the real decoder, random weights of the config's shapes, eager and graph decode.
"$LAB" measure --device cuda:0 --model "$MODEL" --random-weights --graph \
    --batch "$BATCH" --input-tokens "$INPUT" --output-tokens "$OUTPUT" \
    --dtype bfloat16 --warmup 2 --repeats 5 --seed 0 \
    --worker "$WORKER" --output "$OUT/lab-llama-3.1-8b.json" | tee "$OUT/lab-llama-3.1-8b.txt"

# 2. The same GPU's copy bandwidth and transformers with a static cache, eager and CUDA graphs.
"$PY" - "$MODEL" "$BATCH" "$INPUT" "$OUTPUT" "$OUT" <<'PYEOF'
import json, statistics, sys, time
import torch
from transformers import AutoConfig, AutoModelForCausalLM, StaticCache

model_dir, batch, n_in, n_out, out = sys.argv[1], *map(int, sys.argv[2:5]), sys.argv[5]
dev = torch.device("cuda:0")

# Copy bandwidth: a 4 GiB device-to-device copy, read + write bytes per second, median of 10.
n = 4 << 30
a = torch.empty(n, dtype=torch.uint8, device=dev)
b = torch.empty_like(a)
times = []
for _ in range(12):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); b.copy_(a); e.record(); torch.cuda.synchronize()
    times.append(s.elapsed_time(e) / 1e3)
copy = statistics.median(times[2:])
json.dump({"bytes_moved": 2 * n, "median_seconds": copy, "bytes_per_second": 2 * n / copy},
          open(f"{out}/copy-bandwidth.json", "w"), indent=2)
del a, b
torch.cuda.empty_cache()

config = AutoConfig.from_pretrained(model_dir)
torch.manual_seed(0)
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
model = model.to_empty(device=dev)
with torch.no_grad():
    for name, p in model.named_parameters():
        if "norm" in name:
            p.fill_(1.0)
        else:
            p.normal_(0.0, config.initializer_range)
    # to_empty leaves the rotary buffers uninitialised: recompute them.
    rotary = model.model.rotary_emb
    fresh = type(rotary)(config=config)
    rotary.inv_freq.copy_(fresh.inv_freq.to(dev))
    rotary.original_inv_freq.copy_(fresh.original_inv_freq.to(dev))
model.eval()
weights_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
cache = StaticCache(config=config, max_cache_len=n_in + n_out)
ids = torch.randint(0, config.vocab_size, (batch, n_in), device=dev)

def event_time(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); r = fn(); e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / 1e3, r

with torch.inference_mode():
    pos = torch.arange(n_in, device=dev)
    for _ in range(3):
        cache.reset()
        t_prefill, logits = event_time(lambda: model(ids, cache_position=pos, past_key_values=cache, use_cache=True).logits[:, -1:])
    tok = logits.argmax(-1)
    first = tok.clone()
    step_pos = torch.tensor([n_in], device=dev)
    eager = []
    for i in range(n_out):
        t, logits = event_time(lambda: model(tok, cache_position=step_pos, past_key_values=cache, use_cache=True).logits)
        eager.append(t)
        tok.copy_(logits.argmax(-1)); step_pos.add_(1)
    # CUDA graph of one decode step (warm-up on a side stream, as PyTorch documents).
    tok.copy_(first); step_pos.fill_(n_in)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(tok, cache_position=step_pos, past_key_values=cache, use_cache=True)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_logits = model(tok, cache_position=step_pos, past_key_values=cache, use_cache=True).logits
        tok.copy_(static_logits.argmax(-1)); step_pos.add_(1)
    tok.copy_(first); step_pos.fill_(n_in)
    replays = []
    for i in range(n_out):
        t, _ = event_time(graph.replay)
        replays.append(t)

kv_per_pos = 2 * config.num_hidden_layers * config.num_key_value_heads * (config.hidden_size // config.num_attention_heads) * 2 * batch
mid = n_in + n_out // 2
median_graph = statistics.median(replays)
bytes_read = weights_bytes + kv_per_pos * (n_in + n_out)  # static cache: every step reads the whole cache
result = {
    "transformers": __import__("transformers").__version__, "torch": torch.__version__,
    "device": torch.cuda.get_device_name(0), "batch": batch, "input_tokens": n_in, "output_tokens": n_out,
    "weights_bytes": weights_bytes, "prefill_seconds": t_prefill,
    "eager_decode_seconds": eager, "eager_decode_median_seconds": statistics.median(eager),
    "graph_decode_seconds": replays, "graph_decode_median_seconds": median_graph,
    "bytes_read_per_step": bytes_read,
    "graph_read_bandwidth_share_of_copy": bytes_read / median_graph / (2 * n / copy),
    "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
}
json.dump(result, open(f"{out}/transformers.json", "w"), indent=2)
print(json.dumps({k: v for k, v in result.items() if not isinstance(v, list)}, indent=2))
PYEOF

# 3. lab's graph decode against the same bandwidth base.
"$PY" - "$OUT" <<'PYEOF'
import json, statistics, sys
out = sys.argv[1]
doc = json.load(open(f"{out}/lab-llama-3.1-8b.json"))
hf = json.load(open(f"{out}/transformers.json"))
bw = json.load(open(f"{out}/copy-bandwidth.json"))["bytes_per_second"]
rows = [r for r in doc["phases"] if r["phase"] == "graph_decode"]
lab_median = statistics.median(r["gpu_seconds"] for r in rows)
share = hf["bytes_read_per_step"] / lab_median / bw
print(f"lab graph decode median {lab_median*1e6:.1f} us/step, transformers {hf['graph_decode_median_seconds']*1e6:.1f} us/step")
print(f"lab reads weights + cache at {share:.1%} of the copy bandwidth (target >= 85%); lab/transformers time {lab_median/hf['graph_decode_median_seconds']:.3f} (target <= 1)")
PYEOF
