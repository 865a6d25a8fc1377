# One device call: run the kit's notebook in a real Jupyter kernel on the H200 (see run_notebook.py).
PY=/opt/torch/.venv/bin/python3
$PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devcarry/kit/whl/*.whl || exit 3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi -L | sed 's/ (UUID.*//'
$PY .devcarry/kit/run_notebook.py .devcarry/kit/mesure-memoire.ipynb "$OUT"
