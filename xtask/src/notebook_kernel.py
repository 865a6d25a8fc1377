"""Runs the kit's notebook in a real Jupyter kernel and prints what each cell did, as JSON.

Used by `cargo xtask verify` (xtask/src/notebook_kernel.rs), with the Python of a virtual
environment holding nbclient and ipykernel and no PyTorch. Arguments: the notebook, an empty
working folder. The kernel is this very interpreter, through a kernel spec written in a
temporary folder, so that no kernel installed elsewhere on the machine (with PyTorch, say)
can be picked up. Every cell runs, errors included; the Rust side judges the result.
"""

import importlib.util
import json
import os
import sys
import tempfile

import nbformat
from nbclient import NotebookClient

KERNEL = "iteragpu-lab-check"


def main():
    notebook_path, workdir = sys.argv[1], sys.argv[2]
    if importlib.util.find_spec("torch") is not None:
        print("PyTorch is importable in this environment; the check needs one without it", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as jupyter:
        spec_dir = os.path.join(jupyter, "kernels", KERNEL)
        os.makedirs(spec_dir)
        with open(os.path.join(spec_dir, "kernel.json"), "w", encoding="utf-8") as stream:
            json.dump(
                {
                    "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                    "display_name": KERNEL,
                    "language": "python",
                },
                stream,
            )
        os.environ["JUPYTER_PATH"] = jupyter
        nb = nbformat.read(notebook_path, as_version=nbformat.NO_CONVERT)
        client = NotebookClient(
            nb,
            kernel_name=KERNEL,
            timeout=300,
            allow_errors=True,
            resources={"metadata": {"path": workdir}},
        )
        client.execute()
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        stdout, error = "", None
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream" and output.get("name") == "stdout":
                stdout += output.get("text", "")
            elif output.get("output_type") == "error":
                error = {
                    "ename": output.get("ename"),
                    "evalue": output.get("evalue"),
                    "traceback": output.get("traceback", []),
                }
        cells.append({"id": cell.get("id"), "stdout": stdout, "error": error})
    json.dump({"cells": cells, "files": sorted(os.listdir(workdir))}, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
