#!/usr/bin/env python3
"""hf-mem's own code (`hf_mem.run.run`, the function its CLI calls) reading a local model
folder: its HTTP client gets an httpx2 `MockTransport` that answers the Hub requests hf-mem
makes (the file tree, `resolve/main/FILE` with the `Range` it asks for) from the folder, so
that nothing but the transport is replaced.

    target/hf-mem-venv/bin/python scripts/hf_mem_local.py FOLDER

Runs it as `hf-mem --experimental` does (config.json read too, KV cache added, as `lab
plan` does) and prints the start of its result as JSON (`Result.to_json`).
"""

import json
import os
import re
import sys

import httpx2

FOLDER = os.path.abspath(sys.argv[1])
MODEL = "local/model"


def answer(request):
    path = request.url.path
    if path.startswith(f"/api/models/{MODEL}/tree/"):
        files = [
            {"type": "file", "path": name, "size": os.path.getsize(os.path.join(FOLDER, name))}
            for name in sorted(os.listdir(FOLDER))
        ]
        return httpx2.Response(200, json=files)
    prefix = f"/{MODEL}/resolve/main/"
    if not path.startswith(prefix):
        return httpx2.Response(404)
    name = os.path.join(FOLDER, path[len(prefix):])
    if not os.path.isfile(name):
        return httpx2.Response(404)
    size = os.path.getsize(name)
    wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", request.headers.get("Range", ""))
    with open(name, "rb") as f:
        if wanted is None:
            return httpx2.Response(200, content=f.read())
        start = int(wanted.group(1))
        stop = min(int(wanted.group(2) or size - 1), size - 1)
        f.seek(start)
        body = f.read(stop - start + 1)
    headers = {"Content-Range": f"bytes {start}-{stop}/{size}"}
    return httpx2.Response(206, content=body, headers=headers)


class LocalClient(httpx2.AsyncClient):
    def __init__(self, *args, **kwargs):
        kwargs.pop("http2", None)
        kwargs["transport"] = httpx2.MockTransport(answer)
        super().__init__(*args, **kwargs)


httpx2.AsyncClient = LocalClient

import hf_mem.run  # noqa: E402,F401  (after the transport is in place)

module = sys.modules["hf_mem.run"]
module.httpx2.AsyncClient = LocalClient
# --experimental: hf-mem reads config.json too and adds the KV cache, as lab plan does.
result = module.run(model_id=MODEL, experimental=True)
print(json.dumps(result.to_json())[:2000])
