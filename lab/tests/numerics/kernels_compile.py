"""The worker's decode kernels (lab/src/bin/worker_decoder/kernels.cu) through NVRTC, no GPU.

The worker compiles kernels.cu with NVRTC when it loads a model on a GPU, so CI (no GPU)
would never see a compile error. NVRTC itself needs no device: this script loads the
libnvrtc.so.13 that torch 2.11.0's runtime dependencies install (nvidia-cuda-nvrtc, in
site-packages/nvidia/cu13/lib) and compiles the source with the options the worker passes
(kernels.rs, `Kernels::compile`), for every element type, several head widths and prefetch
depths, on compute capabilities 8.0 and 9.0. Each compile must succeed, its PTX must define
every kernel the worker looks up (the `function(c"NAME")` calls of kernels.rs), and on 9.0
the programmatic-dependent-launch instructions must be there (`griddepcontrol`), while on 8.0
they must not (the PTX ISA has them from sm_90 on).

Usage: python kernels_compile.py SITE_PACKAGES   (the torch venv's site-packages folder)
Exit 0 when every case passes, 1 otherwise (one line per failing case).
"""

import ctypes
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
SOURCE = ROOT / "lab/src/bin/worker_decoder/kernels.cu"
RUST = ROOT / "lab/src/bin/worker_decoder/kernels.rs"


def load_nvrtc(site_packages):
    folder = pathlib.Path(site_packages) / "nvidia/cu13/lib"
    # libnvrtc opens its builtins library by name; loaded first, it is found (as the shim does).
    ctypes.CDLL(str(folder / "libnvrtc-builtins.so.13.0"), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(str(folder / "libnvrtc.so.13"), mode=ctypes.RTLD_GLOBAL)


def compile_ptx(nvrtc, source, options):
    """PTX text, or raises RuntimeError with NVRTC's log."""
    program = ctypes.c_void_p()
    r = nvrtc.nvrtcCreateProgram(
        ctypes.byref(program), source, b"kernels.cu", 0, None, None
    )
    if r != 0:
        raise RuntimeError(f"nvrtcCreateProgram: {r}")
    opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
    r = nvrtc.nvrtcCompileProgram(program, len(options), opts)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(program, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(program, log)
    if r != 0:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
        raise RuntimeError(log.value.decode(errors="replace").replace("\n", " "))
    nvrtc.nvrtcGetPTXSize(program, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(program, ptx)
    nvrtc.nvrtcDestroyProgram(ctypes.byref(program))
    return ptx.value.decode()


def kernel_names():
    names = re.findall(r'function\(c"([A-Za-z_0-9]+)"\)', RUST.read_text())
    if len(names) < 5:
        raise SystemExit(f"kernels.rs: found only {names} as kernel names")
    return names


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__.strip().splitlines()[-2])
    nvrtc = load_nvrtc(sys.argv[1])
    source = SOURCE.read_bytes()
    names = kernel_names()
    failures = 0
    cases = 0
    for arch in ("80", "90"):
        for elem in ("BF16", "F32"):
            for head_dim in (64, 96, 128, 256):
                for prefetch in (0, 4, 16):
                    options = [
                        f"-DELEM_{elem}=1",
                        f"-DHEAD_DIM={head_dim}",
                        f"-DGEMV_PREFETCH={prefetch}",
                        f"--gpu-architecture=compute_{arch}",
                        "--std=c++17",
                        "-default-device",
                    ]
                    cases += 1
                    what = f"sm_{arch} {elem} head_dim {head_dim} prefetch {prefetch}"
                    try:
                        ptx = compile_ptx(nvrtc, source, options)
                    except RuntimeError as e:
                        print(f"FAIL {what}: {e}")
                        failures += 1
                        continue
                    missing = [n for n in names if f".entry {n}(" not in ptx]
                    pdl = "griddepcontrol.wait" in ptx
                    if missing:
                        print(f"FAIL {what}: no kernel {missing} in the PTX")
                        failures += 1
                    elif pdl != (arch == "90"):
                        print(f"FAIL {what}: griddepcontrol {'present' if pdl else 'absent'}")
                        failures += 1
    # A head width the source refuses must not compile (the #error guards hold).
    try:
        compile_ptx(
            nvrtc,
            source,
            ["-DELEM_BF16=1", "-DHEAD_DIM=80", "--gpu-architecture=compute_90"],
        )
        print("FAIL head_dim 80 compiled; kernels.cu must refuse it")
        failures += 1
    except RuntimeError as e:
        if "multiple of 32" not in str(e):
            print(f"FAIL head_dim 80 refused for another reason: {e}")
            failures += 1
    cases += 1
    print(f"kernels.cu through NVRTC: {cases - failures} of {cases} cases passed, kernels {names}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
