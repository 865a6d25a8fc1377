# Where do allocated bytes exceed tensor bytes? (lead's probe for issue 11's weights miss)
# Run on the GPU machine from a folder holding the model configs: python3 plan_alloc_probe.py MODELS_DIR
# (2026-12-01, H200: output in examples/h200/plan/alloc-probe.txt).
import json, sys, torch, transformers
for name in ["gemma-3-1b", "qwen2.5-0.5b"]:
    cfg = transformers.AutoConfig.from_pretrained(f"{sys.argv[1]}/{name}")
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16)
    torch.cuda.empty_cache(); base = torch.cuda.memory_allocated()
    model = model.to_empty(device="cuda")
    alloc = torch.cuda.memory_allocated() - base
    storages = {}
    for t in list(model.parameters()) + list(model.buffers()):
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    tensor_bytes = sum(storages.values())
    params = sum(p.numel() for p in model.parameters())
    snap = torch.cuda.memory_snapshot()
    over = []
    for seg in snap:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["size"] - b.get("requested_size", b["size"]) > 0:
                over.append((b["size"], b["requested_size"]))
    excess = sum(s - r for s, r in over)
    big = [(s, r) for s, r in over if s - r >= 4096]
    print(json.dumps({"model": name, "parameters": params, "allocated": alloc, "storage_bytes": tensor_bytes,
                      "allocated_minus_storage": alloc - tensor_bytes, "block_excess_total": excess,
                      "blocks_with_excess_ge_4KiB": len(big), "examples": big[:5],
                      "buffers_bytes": sum(b.untyped_storage().nbytes() for b in model.buffers())}))
    del model; torch.cuda.empty_cache()
