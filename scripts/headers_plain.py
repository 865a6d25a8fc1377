#!/usr/bin/env python3
"""The plain peer of scripts/bench_headers.py: a model folder's safetensors headers summed
with nothing but json and struct (tensors, elements, data bytes, elements per dtype).

    python3 scripts/headers_plain.py FOLDER
"""

import json
import os
import struct
import sys

BITS = {"BOOL": 8, "U8": 8, "I8": 8, "F8_E4M3": 8, "F8_E5M2": 8, "F8_E8M0": 8,
        "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16,
        "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "I64": 64, "U64": 64, "F64": 64}


def header(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))


def main(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    tensors = elements = data = 0
    by_dtype = {}
    for name in files:
        for key, entry in header(os.path.join(folder, name)).items():
            if key == "__metadata__":
                continue
            n = 1
            for d in entry["shape"]:
                n *= d
            begin, end = entry["data_offsets"]
            tensors, elements, data = tensors + 1, elements + n, data + end - begin
            by_dtype[entry["dtype"]] = by_dtype.get(entry["dtype"], 0) + n
    print(f"{tensors} tensors, {elements} elements, {data} bytes, {by_dtype}")


if __name__ == "__main__":
    main(sys.argv[1])
