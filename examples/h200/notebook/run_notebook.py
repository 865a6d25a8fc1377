"""Runs the kit's notebook, every cell, in a real Jupyter kernel of this Python (the GPU
machine's PyTorch environment) and keeps the measurement it writes.

Arguments: the notebook, the output folder. Writes there: the measurement JSON the notebook
wrote (same name), `notebook-run.log` (each code cell's id, what it printed, and its error if
any) and `versions.txt`. Exit 1 if any cell failed or no measurement was written.
"""

import hashlib
import json
import os
import shutil
import sys
import tempfile
from importlib.metadata import version

import nbformat
from nbclient import NotebookClient

KERNEL = "iteragpu-lab-h200"


def main():
    notebook_path, out = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as jupyter, tempfile.TemporaryDirectory() as work:
        spec_dir = os.path.join(jupyter, "kernels", KERNEL)
        os.makedirs(spec_dir)
        with open(os.path.join(spec_dir, "kernel.json"), "w", encoding="utf-8") as stream:
            json.dump({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                       "display_name": KERNEL, "language": "python"}, stream)
        os.environ["JUPYTER_PATH"] = jupyter
        nb = nbformat.read(notebook_path, as_version=nbformat.NO_CONVERT)
        client = NotebookClient(nb, kernel_name=KERNEL, timeout=600, allow_errors=True,
                                resources={"metadata": {"path": work}})
        client.execute()
        failed = False
        lines = []
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            lines.append(f"=== cell {cell.get('id')}")
            for output in cell.get("outputs", []):
                kind = output.get("output_type")
                if kind == "stream":
                    lines.append(output.get("text", "").rstrip("\n"))
                elif kind == "error":
                    failed = True
                    lines.append("ERROR " + "\n".join(output.get("traceback", [])))
                elif kind in ("execute_result", "display_data"):
                    lines.append(output.get("data", {}).get("text/plain", ""))
        written = sorted(os.listdir(work))
        lines.append(f"=== files written by the notebook: {written}")
        for name in written:
            path = os.path.join(work, name)
            with open(path, "rb") as stream:
                lines.append(f"{hashlib.sha256(stream.read()).hexdigest()}  {name}")
            shutil.copy(path, os.path.join(out, name))
    with open(os.path.join(out, "notebook-run.log"), "w", encoding="utf-8") as stream:
        stream.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "versions.txt"), "w", encoding="utf-8") as stream:
        stream.write(f"python {sys.version.split()[0]}\n")
        for package in ("torch", "nbclient", "ipykernel", "jupyter_client", "nbformat"):
            try:
                stream.write(f"{package} {version(package)}\n")
            except Exception as error:  # noqa: BLE001 - the log records what is missing
                stream.write(f"{package} not installed ({error})\n")
    print("\n".join(lines))
    return 1 if failed or not written else 0


if __name__ == "__main__":
    sys.exit(main())
