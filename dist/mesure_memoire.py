#!/usr/bin/env python3
"""IteraGPU Lab v1: weight-memory estimate and bounded GPU measurement of a synthetic MLP.

Three subcommands:

* ``estimate``: weight memory from a parameter count and a storage width. Standard library
  only, no GPU. Same flags and ``--json`` keys as ``lab estimate``.
* ``environment --device cuda:N``: what this Python, its PyTorch and the GPU at that index
  report. A diagnostic: it exits 0 and says "not available", with the reason, when PyTorch or
  the GPU is missing or the device is not a GPU device (``cpu``, ``mps``, ``cuda:x``...).
* ``measure --device cuda:N ... --output FILE``: runs ``Linear -> GELU -> Linear`` on that GPU,
  phase by phase, and writes one new JSON document (schema ``iteragpu-lab/measurement/v1``).
  Without an importable PyTorch or without that GPU it prints one line and exits 2, writing
  nothing; it never falls back to the CPU. A failure during the run (out of memory) exits 1.

PyTorch is imported only inside ``environment`` and ``measure``. The code between the
``# notebook-cell: NAME`` and ``# end-notebook-cell`` markers is copied verbatim into the
notebook ``mesure-memoire.ipynb`` by ``cargo xtask notebook``: edit it here, then regenerate.
"""

# notebook-cell: imports
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import tempfile
import time
import warnings
from datetime import datetime, timezone
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation, localcontext

# end-notebook-cell

import argparse
import sys

# notebook-cell: common
TOOL = {"name": "iteragpu-lab", "version": "1.0.0", "implementation": "python"}
SCHEMA_ID = "iteragpu-lab/measurement/v1"
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
_INTEGER = re.compile(r"[0-9]+")
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1
# Most measured repetitions (``--repeats``): one document row each, so that the document
# stays under the 64 MiB that lab report and lab record read (lab/src/values.rs).
MAX_REPEATS = 100_000
# One explicit character rule, the same as lab's (lab/src/text.rs), not what Python calls
# whitespace or printable: *hidden* characters are the C0 controls, DEL, the C1 controls,
# U+2028, U+2029 and the Unicode 15.1 format characters (general category Cf).
_FORMAT_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_HIDDEN_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029)) + _FORMAT_RANGES
# Hidden characters, plus lone surrogates (command-line bytes that are not UTF-8).
_HIDDEN = re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _HIDDEN_RANGES) + "\ud800-\udfff]")
_SHORT_ESCAPES = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape_one(match):
    """The escape of one hidden character (or U+FFFD for an undecodable argument byte)."""
    char = match.group()
    if "\ud800" <= char <= "\udfff":
        return "\ufffd"
    return _SHORT_ESCAPES.get(char) or f"\\u{{{ord(char):x}}}"


def one_line(text):
    """``text`` with every hidden character escaped, as ``lab`` prints everything it shows.

    ``\\n``, ``\\r``, ``\\t``, and ``\\u{1b}`` (lowercase hex, no leading zeros) for the other
    hidden characters (``\\u{202e}``, ``\\u{feff}``...). Text quoting user input or a device
    name thus stays one line, shows what it holds and sends no escape sequence to the
    terminal. Backslashes and visible text are kept as they are; a command-line byte that is
    not UTF-8 (a lone surrogate in Python) becomes U+FFFD, as in ``lab``.
    """
    return _HIDDEN.sub(_escape_one, str(text))


def public_text(text):
    """``text`` with the home folder written ``~``: a path the tool found itself (PyTorch's
    install, in an import error) must not show the user name."""
    home = os.path.expanduser("~")
    text = str(text)
    return text.replace(home, "~") if len(home) > 1 else text


class KitError(Exception):
    """A failure reported to the user as one line.

    ``exit_code`` is 2 for bad input or a missing prerequisite (nothing was written) and 1
    for a failure during the work itself (nothing was written either).
    """

    def __init__(self, message, exit_code=2):
        """Keeps the message, control characters escaped (see ``one_line``), and the exit code."""
        super().__init__(one_line(message))
        self.exit_code = exit_code

    def _render_traceback_(self):
        """What IPython and Jupyter show for this error: its one line, no traceback.

        The message already says what is wrong and how to fix it; frames through the kit's
        helpers would only hide it. IPython calls this hook for exceptions that define it.
        """
        return [f"{type(self).__name__}: {self}"]


def _number_text(value):
    """``str(value)``, or a description of an int too long for Python to convert (4300 digits)."""
    try:
        return str(value)
    except ValueError:
        return f"a number of {value.bit_length()} bits"


# Rust's char::is_whitespace (Unicode White_Space), which lab's number rule uses for its
# "(no spaces)" hint; str.isspace() differs (it also counts U+001C..U+001F).
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(code) for code in range(0x2000, 0x200B))
)
# The value name lab shows for each flag (lab/src/cli/*.rs, value_name or clap's default).
FLAG_METAVARS = {
    "--parameters": "P",
    "--bits": "B",
    "--reserve-gib": "R",
    "--device": "cuda:N|all|LIST",
    "--batch": "N",
    "--context": "N",
    "--width": "N",
    "--dtype": "DTYPE",
    "--warmup": "WARMUP",
    "--repeats": "REPEATS",
    "--seed": "SEED",
    "--graph-replays": "N",
}


def identifier(text):
    """``text`` as ``lab`` quotes an identifier or a flag value (``lab::text::ascii``):
    ``one_line``, then every other non-ASCII character as ``\\u{hex}`` too, so that a
    look-alike letter (Cyrillic U+0430 for Latin ``a``) shows as what it is."""
    return "".join(char if ord(char) < 0x80 else f"\\u{{{ord(char):x}}}" for char in one_line(text))


def flag_refusal(flag, text, reason):
    """``lab``'s one line for a refused flag value, word for word:
    ``invalid value 'TEXT' for '--flag <METAVAR>': REASON`` (the whole line escaped by ``identifier``, as ``lab`` escapes clap's: its own words are
    ASCII, so only the quoted text and what the reason quotes of it change)."""
    return identifier(f"invalid value '{text}' for '{flag} <{FLAG_METAVARS[flag]}>': {reason}")


def whole_number_reason(text, minimum, maximum):
    """``(number, None)`` when ``text`` is ASCII digits only (leading zeros allowed) in
    ``[minimum, maximum]``, else ``(None, reason)`` with ``lab``'s reason (lab/src/values.rs,
    ``whole``). The length is checked before converting: Python refuses to convert more than
    4300 digits, while a long number is simply too large."""
    span = f"of at least {minimum}" if maximum == _U64_MAX else f"from {minimum} to {maximum}"
    if _INTEGER.fullmatch(text):
        digits = text.lstrip("0") or "0"
        number = int(digits) if len(digits) <= len(str(maximum)) else None
        if number is not None and minimum <= number <= maximum:
            return number, None
        if number is not None and number < minimum:
            return None, f"must be a whole number {span}"
        return None, f"must be a whole number from {minimum} to {maximum}"
    # lab judges the text as it shows it (hidden characters escaped), so the hints do too.
    shown = one_line(text)
    if shown.startswith(("-", "+")):
        hint = " (no sign)"
    elif any(char in _WHITE_SPACE for char in shown):
        hint = " (no spaces)"
    elif any(mark in shown for mark in "eE.,_"):
        hint = " (write all the digits: no decimal point, exponent or separator)"
    else:
        hint = ""
    return None, f"must be a whole number {span}, written with the digits 0-9 only{hint}"


def parse_int(name, value, minimum, maximum=_U64_MAX):
    """Returns ``value`` as an int in ``[minimum, maximum]``, or raises KitError (exit 2).

    Accepts an int (not a bool) or a string of ASCII digits only, the syntax ``lab`` accepts:
    no sign, decimal point, exponent, separator or space (``7e9`` is refused; write
    ``7000000000``). Leading zeros are allowed; a number of any length is "too large". The
    message is ``lab``'s for the flag ``name`` (``flag_refusal``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise KitError(flag_refusal(name, repr(value), whole_number_reason("", minimum, maximum)[1]))
    if isinstance(value, int):
        if minimum <= value <= maximum:
            return value
        text = _number_text(value)
        # The reason for a text of the same standing: negative, below the range or above it.
        judged = "-" if value < 0 else str(min(value, maximum + 1))
        reason = whole_number_reason(judged, minimum, maximum)[1]
        raise KitError(flag_refusal(name, text, reason))
    number, reason = whole_number_reason(value, minimum, maximum)
    if reason is not None:
        raise KitError(flag_refusal(name, value, reason))
    return number


def format_decimal(value, places=6):
    """Formats a Decimal with exactly ``places`` decimals, rounding half to even."""
    with localcontext() as context:
        context.prec = 200
        return str(value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


# end-notebook-cell

# notebook-cell: estimate
EXCLUDED_FROM_ESTIMATE = [
    "activations",
    "KV cache",
    "quantization metadata",
    "gradients",
    "optimizer states",
    "libraries and runtime",
]
RESERVE_MAX_INTEGER_DIGITS = 15
RESERVE_MAX_FRACTION_DIGITS = 12
_RESERVE = re.compile(r"([0-9]+)(?:\.([0-9]+))?")
# ASCII letters only, as Rust's to_ascii_lowercase (str.lower() also folds other scripts).
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _reserve_reason(text):
    """``lab``'s reason for refusing ``text`` as a reserve in GiB (lab/src/values.rs,
    ``reserve_gib``), or None when it is accepted."""
    unsigned = text.translate(_ASCII_LOWER).lstrip("+-")
    if unsigned in ("nan", "inf", "infinity"):
        return "must be a finite number of GiB"
    if text.startswith("-"):
        return "must not be negative (use 0 for no reserve)"
    match = _RESERVE.fullmatch(text)
    if not match:
        return "must be a plain decimal number of GiB such as 4 or 0.5"
    integer, fraction = match.group(1), match.group(2) or ""
    if len(integer.lstrip("0")) > RESERVE_MAX_INTEGER_DIGITS or len(fraction) > RESERVE_MAX_FRACTION_DIGITS:
        return (
            f"accepts at most {RESERVE_MAX_INTEGER_DIGITS} digits before the point and "
            f"{RESERVE_MAX_FRACTION_DIGITS} after"
        )
    return None


def parse_reserve_gib(value):
    """Returns the reserve (GiB) as an exact Decimal >= 0, or raises KitError (exit 2).

    The reserve is an assumption the user chooses, not a measurement. Plain decimal
    notation only (``4``, ``0.5``, ``12.25``; an int or a Decimal is accepted too): no sign,
    exponent or separator; at most 15 digits before the point and 12 after (27 significant
    digits, what ``lab`` holds exactly). Negative and
    non-finite values (``inf``, ``nan``) get their own message.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)):
        raise KitError(flag_refusal("--reserve-gib", repr(value), "must be a plain decimal number of GiB such as 4 or 0.5"))
    text = value if isinstance(value, str) else _number_text(value)
    reason = _reserve_reason(text)
    if reason is not None:
        # lab judges the text as it shows it (hidden characters escaped).
        raise KitError(flag_refusal("--reserve-gib", text, _reserve_reason(one_line(text))))
    return Decimal(text)


def bytes_per_parameter(bits):
    """Storage bytes of one parameter: the bit width rounded up to whole bytes (12 -> 2)."""
    return (bits + 7) // 8


def estimate_weights(parameters, bits, reserve_gib=0):
    """Weight memory of ``parameters`` values stored on ``bits`` bits each, plus a reserve.

    Exact decimal arithmetic; GiB = bytes / 2^30, GB = bytes / 10^9; the printed values are
    rounded half to even to 6 decimals. Returns the same keys, in the same order, as
    ``lab estimate --json``. Raises KitError (exit 2) on bad input.
    """
    parameters = parse_int("--parameters", parameters, 1)
    bits = parse_int("--bits", bits, 1, 2**32 - 1)
    reserve = parse_reserve_gib(reserve_gib)
    per_parameter = bytes_per_parameter(bits)
    weights_bytes = parameters * per_parameter
    if weights_bytes > _U64_MAX:
        raise KitError(
            f"{parameters} parameters x {per_parameter} bytes does not fit in 64 bits ({_U64_MAX} bytes at most)"
        )
    with localcontext() as context:
        context.prec = 200
        weights_gib = Decimal(weights_bytes) / Decimal(2**30)
        weights_gb = Decimal(weights_bytes) / Decimal(10**9)
        total_gib = weights_gib + reserve
    return {
        "parameters": parameters,
        "bits": bits,
        "bytes_per_parameter": per_parameter,
        "weights_bytes": weights_bytes,
        "weights_gib": format_decimal(weights_gib),
        "weights_gb": format_decimal(weights_gb),
        "reserve_gib": format_decimal(reserve),
        "total_gib": format_decimal(total_gib),
        "excluded": list(EXCLUDED_FROM_ESTIMATE),
    }


def estimate_text(result):
    """A short readable summary of an ``estimate_weights`` result."""
    return "\n".join(
        [
            f"parameters:          {result['parameters']}",
            f"bits per parameter:  {result['bits']} -> {result['bytes_per_parameter']} byte(s)"
            " (rounded up to whole bytes)",
            f"weights:             {result['weights_bytes']} bytes"
            f" = {result['weights_gib']} GiB (2^30) = {result['weights_gb']} GB (10^9)",
            f"reserve (assumed):   {result['reserve_gib']} GiB",
            f"total:               {result['total_gib']} GiB",
            "not included:        " + ", ".join(result["excluded"]),
            "This is arithmetic on the weights only; it does not predict whether a real model"
            " fits a card.",
        ]
    )


# end-notebook-cell

# notebook-cell: environment
_DEVICE_MAX = 2**31 - 1


def _device_reason(text):
    """``lab``'s reason for refusing ``text`` as one GPU (lab/src/values.rs, ``device``), or
    None when it is ``cuda:N`` written as PyTorch prints it."""
    if text.startswith("cuda:"):
        index = text[len("cuda:"):]
        if not _INTEGER.fullmatch(index):
            return "write cuda:N with N a GPU index, e.g. cuda:0"
        if len(index) > 1 and index.startswith("0"):
            return f"the GPU index has a leading zero: write cuda:{index.lstrip('0') or '0'}"
        # At most 10 digits are converted: a longer index is too large whatever it is.
        if len(index) > 10 or int(index) > _DEVICE_MAX:
            return f"the GPU index is too large: write cuda:N with N at most {_DEVICE_MAX}"
        return None
    if text == "cuda":
        return "name the GPU index explicitly, e.g. cuda:0 (a bare 'cuda' is refused)"
    if text == "cpu":
        return "'cpu' is not a GPU: lab measures a GPU and never falls back to the CPU; write cuda:N"
    if text == "mps" or text.startswith("mps:"):
        return "Apple Metal is not supported: the measurement needs a CUDA or ROCm GPU named cuda:N"
    return "write cuda:N, e.g. cuda:0 (ROCm GPUs are cuda:N too)"


def _devices_reason(text):
    """``lab``'s reason for refusing ``text`` as ``--device`` (lab/src/values.rs, ``devices``:
    one ``cuda:N``, ``all`` or a list ``cuda:0,cuda:1``), or None when ``lab`` accepts it."""
    if text == "all":
        return None
    if "," not in text:
        return _device_reason(text)
    seen = []
    for part in text.split(","):
        if not part:
            return "has an empty entry: write cuda:0,cuda:1 (or all)"
        reason = _device_reason(part)
        if reason is not None:
            return f"entry '{part}': {reason}"
        if part in seen:
            return f"names {part} twice: list each GPU once (or write all)"
        seen.append(part)
    return None


def parse_device(device):
    """Returns the GPU index of a ``cuda:N`` device string, or raises KitError (exit 2).

    The device is always named explicitly: ``cpu``, ``mps``, a bare ``cuda`` and anything
    else are refused with a line saying what to write instead. ROCm builds of PyTorch also
    name their GPUs ``cuda:N``. The one spelling accepted, as PyTorch's own parser and
    ``lab``: ``cuda:`` then ``0`` or a non-zero digit followed by digits, at most 2147483647;
    no space, sign, leading zero or capital (``cuda:01``, ``cuda:0 ``, ``cuda:+1``,
    ``CUDA:0`` are refused, with ``lab``'s messages). ``all`` and lists, which ``lab``
    accepts, are refused: this kit measures one GPU.
    """
    text = str(device)
    reason = device_refusal(text)
    if reason is not None:
        raise KitError(flag_refusal("--device", text, reason))
    return int(text[len("cuda:"):])


def device_refusal(device):
    """Why ``device`` is not one ``cuda:N`` this kit can use (``lab``'s reason), or None."""
    text = str(device)
    if _device_reason(text) is None:
        return None
    # lab judges the text as it shows it (hidden characters escaped).
    reason = _devices_reason(one_line(text))
    if reason is None:
        reason = "this kit measures one GPU at a time: write cuda:N (lab measure also takes all or a list)"
    return reason


def import_torch():
    """Imports PyTorch; returns ``(torch, None)`` or ``(None, one-line reason)``."""
    try:
        import torch  # noqa: PLC0415 (imported here on purpose: only these steps need it)
    except Exception as error:  # ImportError, or a broken install raising something else
        return None, public_text(f"{type(error).__name__}: {error}")
    return torch, None


def _driver_version():
    """Driver version from the vendor tool when it is on PATH, labelled with its source.

    Returns ``{"version": ..., "source": ...}`` or None. Asks only for the driver version.
    """
    if shutil.which("nvidia-smi"):
        command = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        try:
            answer = subprocess.run(command, capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        lines = [line.strip() for line in answer.stdout.splitlines() if line.strip()]
        if answer.returncode == 0 and lines:
            return {"version": lines[0], "source": "nvidia-smi --query-gpu=driver_version"}
    if shutil.which("rocm-smi"):
        try:
            answer = subprocess.run(
                ["rocm-smi", "--showdriverversion"], capture_output=True, text=True, timeout=20, check=False
            )
        except (OSError, subprocess.SubprocessError):
            return None
        for line in answer.stdout.splitlines():
            if "driver version" in line.lower():
                return {"version": line.split(":")[-1].strip(), "source": "rocm-smi --showdriverversion"}
    return None


def _tf32_matmul_allowed(torch):
    """Whether PyTorch lets float32 matmuls use TF32 (default off; this tool never changes it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(torch.backends.cuda.matmul.allow_tf32)


def collect_environment(device, torch=None, reason=None):
    """Describes this Python, its PyTorch and the GPU ``device`` (``cuda:N``).

    Keys of the measurement schema's ``environment`` object, plus diagnostic ones
    (``torch_available``, ``torch_error``, ``gpu_available``, ``device_available``,
    ``device_error``, ``driver``). Values that cannot be known are None: ``device_count`` is
    None without PyTorch and 0 when PyTorch sees no GPU. Never raises for the device: a
    string that is not ``cuda:N`` (``cpu``, ``mps``, ``cuda:x``...) is kept as typed, with
    ``device_available`` false and the reason in ``device_error``, as for a GPU that is
    missing. Collects no environment variable, host name or user name. ``torch``/``reason``
    come from ``import_torch`` when the caller has already imported it.
    """
    device_error = device_refusal(device)
    index = None if device_error is not None else parse_device(device)
    if torch is None and reason is None:
        torch, reason = import_torch()
    env = {
        "runtime": {"language": "Python", "version": platform.python_version()},
        "torch_available": torch is not None,
        "torch_error": reason,
        "torch_version": None,
        "cuda_build_version": None,
        "hip_build_version": None,
        "gpu_available": False,
        "device": str(device) if index is None else f"cuda:{index}",
        "device_available": False,
        "device_error": device_error,
        "device_name": None,
        "compute_capability": None,
        "total_memory_bytes": None,
        "multiprocessor_count": None,
        "device_count": None,
        "tf32_matmul_allowed": None,
        "driver": None,
    }
    if torch is None:
        if device_error is None:
            env["device_error"] = "PyTorch cannot be imported"
        return env
    env["torch_version"] = str(torch.__version__)
    env["cuda_build_version"] = getattr(torch.version, "cuda", None)
    env["hip_build_version"] = getattr(torch.version, "hip", None)
    env["tf32_matmul_allowed"] = _tf32_matmul_allowed(torch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env["gpu_available"] = bool(torch.cuda.is_available())
        env["device_count"] = int(torch.cuda.device_count()) if env["gpu_available"] else 0
    if index is not None and index < env["device_count"]:
        properties = torch.cuda.get_device_properties(index)
        major, minor = torch.cuda.get_device_capability(index)
        env["device_available"] = True
        env["device_name"] = str(properties.name)
        env["compute_capability"] = f"{major}.{minor}"
        env["total_memory_bytes"] = int(properties.total_memory)
        env["multiprocessor_count"] = int(properties.multi_processor_count)
    elif device_error is None and env["device_count"] == 0:
        env["device_error"] = (
            f"PyTorch {env['torch_version']} sees no GPU: check the driver with nvidia-smi or rocm-smi "
            "and that this PyTorch build matches it"
        )
    elif device_error is None:
        count = env["device_count"]
        env["device_error"] = f"cuda:{index} does not exist: PyTorch sees {count} GPU(s), cuda:0 to cuda:{count - 1}"
    if env["gpu_available"]:
        env["driver"] = _driver_version()
    return env


def environment_text(env):
    """A short readable summary of a ``collect_environment`` result.

    Every line goes through ``one_line``: a device string or an error quoted from PyTorch
    cannot add lines or send escape sequences to the terminal.
    """

    def shown(value, why=None):
        """The value, or 'not available' (and why, when known) when it is None."""
        if value is not None:
            return str(value)
        return f"not available ({why})" if why else "not available"

    no_torch = None if env["torch_available"] else "PyTorch cannot be imported"
    lines = [
        f"tool:              {TOOL['name']} {TOOL['version']} ({TOOL['implementation']})",
        f"python:            {env['runtime']['version']}",
        f"pytorch:           {shown(env['torch_version'])}"
        + (f" ({env['torch_error']})" if env["torch_error"] else ""),
        f"built for CUDA:    {shown(env['cuda_build_version'])}",
        f"built for HIP:     {shown(env['hip_build_version'])}",
        f"GPUs visible:      {shown(env['device_count'], no_torch)}",
    ]
    if env["device_available"]:
        lines += [
            f"{env['device']}:            {env['device_name']}",
            f"compute capability: {env['compute_capability']}",
            f"total memory:      {env['total_memory_bytes']} bytes"
            f" ({format_decimal(Decimal(env['total_memory_bytes']) / Decimal(2**30), 2)} GiB, as announced"
            " by the runtime)",
            f"multiprocessors:   {env['multiprocessor_count']}",
        ]
    else:
        try:
            label = f"cuda:{parse_device(env['device'])}"
        except KitError:
            label = f"'{env['device']}'"
        lines.append(f"{label}:            {shown(None, env.get('device_error'))}")
    lines.append(f"TF32 matmul:       {shown(env['tf32_matmul_allowed'])}")
    driver = env["driver"]
    lines.append(
        f"driver:            {driver['version']} (from {driver['source']})"
        if driver
        else "driver:            not reported (check it with the vendor tool: nvidia-smi or rocm-smi)"
    )
    lines.append("The CUDA/HIP version above is the one PyTorch was built with, not the driver's.")
    return "\n".join(one_line(line) for line in lines)


# end-notebook-cell

# notebook-cell: measure
PHASES = ("model_load", "inputs", "cold_forward", "warmup", "warm_forward")


def synthetic_model_info(batch, context, width, dtype):
    """Sizes of the synthetic MLP ``Linear(width, 4*width) -> GELU -> Linear(4*width, width)``.

    Parameters include both biases; FLOPs count the two matmuls only (2 per multiply-add).
    """
    hidden = 4 * width
    dtype_bytes = DTYPE_BYTES[dtype]
    parameters = width * hidden + hidden + hidden * width + width
    return {
        "architecture": f"Linear({width}->{hidden}, bias) -> GELU(erf) -> Linear({hidden}->{width}, bias)",
        "autograd": "inference_mode",
        "width": width,
        "hidden": hidden,
        "parameters": parameters,
        "dtype_bytes": dtype_bytes,
        "parameter_bytes": parameters * dtype_bytes,
        "input_bytes": batch * context * width * dtype_bytes,
        "output_bytes": batch * context * width * dtype_bytes,
        "flops_per_forward": 2 * batch * context * (width * hidden + hidden * width),
    }


def check_new_output(path):
    """Refuses (KitError, exit 2) an output path that exists or whose folder does not."""
    path = os.fspath(path)
    if path == "":
        raise KitError("a value is required for '--output <FILE>' but none was supplied")
    if path.endswith(("/", os.sep)):
        raise KitError(f"{path} ends with '/', which names a folder: give the new file's name")
    if os.path.lexists(path):
        raise KitError(f"{path} already exists: choose a new file name (results are never overwritten)")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise KitError(f"the folder of {path} does not exist: create it first or choose another path")


def write_new_json(path, document):
    """Writes ``document`` to ``path`` atomically, refusing to replace an existing file.

    The JSON goes to a temporary file in the same folder, is flushed to disk, then linked to
    its final name (which fails if the name appeared meanwhile), with the usual permissions
    (0666 minus the umask). Where hard links are not
    supported, a rename is used after a last existence check. No temporary file is left
    behind on failure.
    """
    path = os.fspath(path)
    check_new_output(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        _write_new_json(path, folder, document)
    except OSError as error:
        # The temporary file's name (and its absolute folder) is not shown: the user typed path.
        raise KitError(
            f"cannot write {path}: {error.strerror or type(error).__name__}; nothing was written", exit_code=1
        ) from None


def _write_new_json(path, folder, document):
    """``write_new_json`` after the checks; raises OSError on a failed write."""
    handle, temporary = tempfile.mkstemp(prefix=".mesure-", suffix=".json.tmp", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            json.dump(document, stream, indent=2, ensure_ascii=False)
            stream.write("\n")
            stream.flush()
            os.fsync(stream.fileno())
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        try:
            os.link(temporary, path)
        except FileExistsError:
            raise KitError(f"{path} appeared during the run: nothing was overwritten") from None
        except OSError:
            if os.path.lexists(path):
                raise KitError(f"{path} appeared during the run: nothing was overwritten") from None
            os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def require_gpu(device):
    """Imports PyTorch and checks that ``device`` is a visible GPU; returns ``(torch, index)``.

    Raises KitError (exit 2) with what is missing and how to fix it; never selects the CPU.
    """
    index = parse_device(device)
    torch, reason = import_torch()
    if torch is None:
        raise KitError(
            f"PyTorch cannot be imported ({reason}): run this with the Python that has a "
            "PyTorch build matching the GPU driver (CUDA or ROCm), or install one; nothing was measured"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    if not available or count == 0:
        raise KitError(
            f"PyTorch {torch.__version__} sees no GPU (built for CUDA {torch.version.cuda}, "
            f"HIP {getattr(torch.version, 'hip', None)}): check the driver with nvidia-smi or "
            "rocm-smi and that this PyTorch build matches it; nothing was measured"
        )
    if index >= count:
        raise KitError(
            f"cuda:{index} does not exist: PyTorch sees {count} GPU(s), cuda:0 to cuda:{count - 1}; "
            "nothing was measured"
        )
    return torch, index


def _run_phase(torch, device, phase, repetition, passes, action):
    """Runs one phase with the protocol of docs/PROTOCOL.md §4.2 and returns ``(row, result)``.

    Synchronize; read baseline allocated/reserved; reset the peak counters; record a CUDA
    start event; run ``action``; record the end event; synchronize; read end and peak
    counters. ``result`` (the model, the input or the last output) is still alive at the
    end reading; the caller decides when to free it. Wall time spans the whole step.
    """
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    began = time.perf_counter()
    torch.cuda.synchronize(device)
    baseline_allocated = torch.cuda.memory_allocated(device)
    baseline_reserved = torch.cuda.memory_reserved(device)
    torch.cuda.reset_peak_memory_stats(device)
    start.record()
    result = action()
    end.record()
    torch.cuda.synchronize(device)
    wall_seconds = time.perf_counter() - began
    row = {
        "phase": phase,
        "repetition": repetition,
        "forward_passes": passes,
        "wall_seconds": wall_seconds,
        "gpu_seconds": start.elapsed_time(end) / 1000.0,
        "baseline_allocated_bytes": baseline_allocated,
        "baseline_reserved_bytes": baseline_reserved,
        "end_allocated_bytes": torch.cuda.memory_allocated(device),
        "end_reserved_bytes": torch.cuda.memory_reserved(device),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
    }
    return row, result


GRAPH_CAPTURE_WARMUP_FORWARDS = 3
GRAPH_REPLAY_BATCHES = 5
GRAPH_MAX_REPLAYS = 1_000_000


def _graph_stage_start(torch, device):
    """Synchronizes, reads allocated and reserved bytes, resets the peaks; returns the pair."""
    torch.cuda.synchronize(device)
    baseline = (torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device))
    torch.cuda.reset_peak_memory_stats(device)
    return baseline


def _graph_stage_end(torch, device, baseline):
    """Synchronizes and returns the six counters of a stage of the graph measurement."""
    torch.cuda.synchronize(device)
    return {
        "baseline_allocated_bytes": baseline[0],
        "baseline_reserved_bytes": baseline[1],
        "end_allocated_bytes": torch.cuda.memory_allocated(device),
        "end_reserved_bytes": torch.cuda.memory_reserved(device),
        "peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
    }


def graph_section(replays, batch_seconds, single_wall_seconds, capture_wall_seconds, capture, replay):
    """The ``graph`` object of the document from raw timings (the statistics ``lab`` computes)."""
    per_forward = [seconds / replays for seconds in batch_seconds]
    return {
        "memory_pool": "private",
        "capture_warmup_forwards": GRAPH_CAPTURE_WARMUP_FORWARDS,
        "replays": replays,
        "batches": len(per_forward),
        "batch_gpu_seconds_per_forward": per_forward,
        "median_gpu_seconds_per_forward": statistics.median(per_forward),
        "min_gpu_seconds_per_forward": min(per_forward),
        "max_gpu_seconds_per_forward": max(per_forward),
        "synchronised_wall_seconds_median": statistics.median(single_wall_seconds),
        "synchronised_wall_seconds_min": min(single_wall_seconds),
        "synchronised_wall_seconds_max": max(single_wall_seconds),
        "capture_wall_seconds": capture_wall_seconds,
        "capture": capture,
        "replay": replay,
    }


def measure_graph(torch, device, model, inputs, replays):
    """The CUDA-graph floor: capture one forward, replay it; returns the ``graph`` object.

    Same steps as ``lab`` (so the counters agree): synchronize, read the counters, reset the
    peaks; on a side stream run three warm-up forwards (PyTorch's documentation asks for a
    warm-up on a side stream before capture), each previous output freed first and the last
    one freed before capture; synchronize; capture one forward with ``capture_begin`` /
    ``capture_end`` (default private pool, global mode; unlike ``torch.cuda.graph`` no
    ``empty_cache``: the allocator cache is kept); read the counters. Then, on the default
    stream, five batches of ``replays`` back-to-back replays each between two CUDA events, and
    ``replays`` single replays each followed by a synchronize; read the counters again. The
    graph keeps its own private memory pool while it exists: capture grows the reserved bytes.
    """
    began = time.perf_counter()
    baseline = _graph_stage_start(torch, device)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream(device=device)
    with torch.cuda.stream(side):
        output = None
        for _ in range(GRAPH_CAPTURE_WARMUP_FORWARDS):
            output = None
            output = model(inputs)
        output = None
        torch.cuda.synchronize(device)
        graph.capture_begin()
        try:
            static_output = model(inputs)
        finally:
            graph.capture_end()
    capture = _graph_stage_end(torch, device, baseline)
    capture_wall_seconds = time.perf_counter() - began
    baseline = _graph_stage_start(torch, device)
    batch_seconds = []
    for _ in range(GRAPH_REPLAY_BATCHES):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        torch.cuda.synchronize(device)
        batch_seconds.append(start.elapsed_time(end) / 1000.0)
    single_wall_seconds = []
    for _ in range(replays):
        began = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize(device)
        single_wall_seconds.append(time.perf_counter() - began)
    replay = _graph_stage_end(torch, device, baseline)
    del static_output, graph
    return graph_section(replays, batch_seconds, single_wall_seconds, capture_wall_seconds, capture, replay)


def graph_text(document):
    """Summary lines of the ``graph`` object: graph vs eager time, launch overhead, FLOP/s."""
    graph = document.get("graph")
    if not graph:
        return ""
    median = graph["median_gpu_seconds_per_forward"]
    lines = [
        f"graph floor: {graph['batches']} batches of {graph['replays']} CUDA-graph replays, median "
        f"{median * 1e6:.2f} us per forward (min {graph['min_gpu_seconds_per_forward'] * 1e6:.2f}, "
        f"max {graph['max_gpu_seconds_per_forward'] * 1e6:.2f}); one replay + synchronize: median wall "
        f"{graph['synchronised_wall_seconds_median'] * 1e6:.2f} us"
    ]
    eager = [row["gpu_seconds"] for row in document["phases"] if row["phase"] == "warm_forward"]
    if eager and median > 0:
        eager_median = statistics.median(eager)
        lines.append(
            f"eager vs graph: {eager_median * 1e6:.2f} us vs {median * 1e6:.2f} us per forward (GPU events, "
            f"medians); launch overhead {(eager_median - median) * 1e6:.2f} us per forward "
            f"(eager = {eager_median / median:.1f}x graph)"
        )
    if median > 0:
        flops = document["synthetic_model"]["flops_per_forward"]
        lines.append(f"achieved by graph time: {flops / median / 1e12:.3f} TFLOP/s (compare this across GPUs)")
    capture = graph["capture"]
    lines.append(
        f"graph memory: warm-up and capture left "
        f"{capture['end_allocated_bytes'] - capture['baseline_allocated_bytes']} B more allocated and "
        f"{capture['end_reserved_bytes'] - capture['baseline_reserved_bytes']} B more reserved "
        "(the graph keeps its own private memory pool while it exists)"
    )
    return "\n".join(lines)


def run_measurement(device, batch, context, width, dtype="float32", warmup=1, repeats=2, seed=0, graph_replays=None):
    """Measures the synthetic MLP on ``device`` and returns the measurement document (a dict).

    Phases: model_load, inputs, cold_forward, warmup (all warm-up passes in one row, also
    when there are none), then one warm_forward row per repetition. Each forward's output is
    alive at its phase's end reading and freed right after it, before the next phase starts;
    weights, input and the allocator cache persist (no empty_cache). Inference mode (no
    gradients), no autocast; TF32 is left as PyTorch has it and recorded. With ``graph_replays``
    (1 to 1000000) the CUDA-graph floor follows the phases (``measure_graph``) and the document
    gets a ``graph`` object. Raises KitError: exit 2 for bad
    input, missing PyTorch or GPU; exit 1 for a failure during the run (out of memory).
    """
    batch = parse_int("--batch", batch, 1)
    context = parse_int("--context", context, 1)
    width = parse_int("--width", width, 1)
    warmup = parse_int("--warmup", warmup, 0, _U32_MAX)
    repeats = parse_int("--repeats", repeats, 1, _U32_MAX)
    seed = parse_int("--seed", seed, 0, 2**63 - 1)
    if graph_replays is not None:
        graph_replays = parse_int("--graph-replays", graph_replays, 1, GRAPH_MAX_REPLAYS)
    if dtype not in DTYPE_BYTES:
        raise KitError(flag_refusal("--dtype", str(dtype), "must be one of float32, float16, bfloat16"))
    torch, index = require_gpu(device)
    created_utc = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    environment = collect_environment(f"cuda:{index}", torch=torch)
    model_info = synthetic_model_info(batch, context, width, dtype)
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    gpu = torch.device("cuda", index)
    hidden = model_info["hidden"]
    phases = []
    phase = "model_load"

    def build_model():
        """Builds and seeds the MLP on the CPU in the requested dtype, then moves it to the GPU."""
        torch.manual_seed(seed)
        model = torch.nn.Sequential(
            torch.nn.Linear(width, hidden, bias=True, dtype=torch_dtype),
            torch.nn.GELU(approximate="none"),
            torch.nn.Linear(hidden, width, bias=True, dtype=torch_dtype),
        )
        return model.to(gpu).eval()

    def make_input():
        """Creates the ``[batch, context, width]`` input directly on the GPU from the seed."""
        generator = torch.Generator(device=gpu)
        generator.manual_seed(seed)
        return torch.randn((batch, context, width), dtype=torch_dtype, device=gpu, generator=generator)

    try:
        with torch.cuda.device(gpu), torch.inference_mode():
            row, model = _run_phase(torch, gpu, phase, None, 0, build_model)
            phases.append(row)
            phase = "inputs"
            row, inputs = _run_phase(torch, gpu, phase, None, 0, make_input)
            phases.append(row)
            phase = "cold_forward"
            row, output = _run_phase(torch, gpu, phase, None, 1, lambda: model(inputs))
            phases.append(row)
            del output

            def warm_up():
                """All warm-up passes; each previous output is freed before the next pass."""
                last = None
                for _ in range(warmup):
                    last = None
                    last = model(inputs)
                return last

            phase = "warmup"
            row, output = _run_phase(torch, gpu, phase, None, warmup, warm_up)
            phases.append(row)
            del output
            phase = "warm_forward"
            for repetition in range(1, repeats + 1):
                row, output = _run_phase(torch, gpu, phase, repetition, 1, lambda: model(inputs))
                phases.append(row)
                del output
            graph = None
            if graph_replays is not None:
                phase = "graph"
                graph = measure_graph(torch, gpu, model, inputs, graph_replays)
            del model, inputs
    except KitError:
        raise
    except Exception as error:
        oom_type = getattr(torch.cuda, "OutOfMemoryError", ())
        if (oom_type and isinstance(error, oom_type)) or "out of memory" in str(error).lower():
            raise KitError(
                f"out of memory on cuda:{index} during {phase} (batch {batch}, context {context}, "
                f"width {width}, {dtype}): reduce one dimension and retry in a new process; no file was written",
                exit_code=1,
            ) from None
        raise KitError(
            public_text(f"the measurement failed during {phase}: {type(error).__name__}: {error}; no file was written"),
            exit_code=1,
        ) from None
    environment["tf32_matmul_allowed"] = _tf32_matmul_allowed(torch)
    document = {
        "schema": SCHEMA_ID,
        "tool": dict(TOOL),
        "created_utc": created_utc,
        "environment": environment,
        "configuration": {
            "device": f"cuda:{index}",
            "batch": batch,
            "context": context,
            "width": width,
            "dtype": dtype,
            "warmup": warmup,
            "repeats": repeats,
            "seed": seed,
        },
        "synthetic_model": model_info,
        "phases": phases,
    }
    if graph is not None:
        document["graph"] = graph
    return document


def phases_text(document):
    """A readable table of the phase rows of a measurement document (bytes and seconds)."""
    header = (
        f"{'phase':<13}{'rep':>4}{'wall s':>11}{'gpu s':>11}{'base alloc':>14}{'end alloc':>14}"
        f"{'peak alloc':>14}{'end reserved':>14}{'peak reserved':>15}"
    )
    lines = [header]
    for row in document["phases"]:
        repetition = "" if row["repetition"] is None else str(row["repetition"])
        lines.append(
            f"{row['phase']:<13}{repetition:>4}{row['wall_seconds']:>11.6f}{row['gpu_seconds']:>11.6f}"
            f"{row['baseline_allocated_bytes']:>14}{row['end_allocated_bytes']:>14}"
            f"{row['peak_allocated_bytes']:>14}{row['end_reserved_bytes']:>14}{row['peak_reserved_bytes']:>15}"
        )
    return "\n".join(lines)


# end-notebook-cell


def _quiet_stdout():
    """Points stdout's file descriptor at the null device, so that Python's own flush at exit
    cannot fail again (and print a traceback) after a write error was reported."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def write_stdout(text):
    """Writes ``text`` and a newline to stdout and flushes it, as ``lab`` does.

    A closed pipe (``| head -c1``) is not an error: the reader has what it wanted. Any other
    write failure (``> /dev/full``) raises KitError with exit code 1.
    """
    if sys.stdout is None:
        return  # started with standard output closed (>&-): nobody reads, as for a closed pipe
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
    except OSError as error:
        _quiet_stdout()
        raise KitError(f"cannot write to standard output: {error.strerror or error}", exit_code=1) from None


def print_error(message):
    """Prints ``mesure_memoire.py: error: MESSAGE`` on stderr as one line: every message of
    this script goes through here, control characters escaped (see ``one_line``)."""
    # A standard error that cannot be written (2>/dev/full) must not change the exit code.
    try:
        print(f"mesure_memoire.py: error: {one_line(message)}", file=sys.stderr, flush=True)
    except OSError:
        pass


class _Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit code 2."""

    def _print_message(self, message, file=None):
        """Sends ``--help`` text to stdout through ``write_stdout``, so that a full stdout is
        one line and exit 1 and a closed pipe is quiet, as for every other output."""
        if not message or (file is not None and file is not sys.stdout):
            super()._print_message(message, file)
            return
        try:
            write_stdout(message.rstrip("\n"))
        except KitError as error:
            print_error(error)
            sys.exit(error.exit_code)

    def parse_known_args(self, args=None, namespace=None):
        """Remembers the arguments, so that ``error`` can name an unknown flag. A flag that
        takes a value takes the next argument even when it starts with '-' (``--reserve-gib
        -inf``), as lab's flags do (and getopt's); argparse alone would read it as a flag."""
        self._arguments = list(sys.argv[1:] if args is None else args)
        glued, i = [], 0
        while i < len(self._arguments):
            token = self._arguments[i]
            action = self._option_string_actions.get(token)
            if action is not None and action.nargs is None and i + 1 < len(self._arguments):
                if self._arguments[i + 1].startswith("-"):
                    glued.append(f"{token}={self._arguments[i + 1]}")
                    i += 2
                    continue
            if token == "--" and self._subparsers is None:
                # The end of the options, as in lab; these commands take no other argument.
                if i + 1 < len(self._arguments):
                    self.error(f"unexpected argument '{identifier(self._arguments[i + 1])}' found")
                break
            glued.append(token)
            i += 1
        return super().parse_known_args(glued, namespace)

    def error(self, message):
        """Prints ``mesure_memoire.py: error: MESSAGE`` (see ``print_error``) and exits 2."""
        # argparse reports missing required flags before unknown ones; a misspelt flag
        # (``--day`` for ``--days``) is the real problem then, as ``lab`` says.
        if message.startswith("the following arguments are required"):
            known = self._option_string_actions
            unknown = [
                a.split("=", 1)[0]
                for a in getattr(self, "_arguments", [])
                if a.startswith("-") and len(a) > 1 and a.split("=", 1)[0] not in known
                and not a.lstrip("-").replace(".", "", 1).isdigit()
            ]
            if unknown:
                message = f"unexpected argument '{unknown[0]}' found"
        # A flag at the end of the line without its value, in lab's words.
        missing = re.fullmatch(r"argument (--[a-z-]+): expected one argument", message)
        if missing:
            flag = missing.group(1)
            action = self._option_string_actions[flag]
            metavar = action.metavar or FLAG_METAVARS.get(flag) or action.dest.upper()
            message = f"a value is required for '{flag} <{metavar}>' but none was supplied"
        print_error(message)
        self.exit(2)


class _Once(argparse.Action):
    """Stores a flag's value, refusing a flag given twice (as ``lab`` does)."""

    def __call__(self, parser, namespace, values, option_string=None):
        """Stores ``values`` unless this flag was already seen."""
        seen = getattr(namespace, "_seen", set())
        if self.dest in seen:
            parser.error(f"the argument '{option_string}' cannot be used multiple times")
        seen.add(self.dest)
        namespace._seen = seen
        # argparse drops a "--" it finds among a flag's values, leaving []: the value was "--".
        if values == [] and self.nargs is None:
            values = "--"
        setattr(namespace, self.dest, True if self.nargs == 0 else values)


def build_parser():
    """The command-line parser: subcommands estimate, environment and measure."""
    parser = _Parser(
        prog="mesure_memoire.py",
        allow_abbrev=False,
        description="IteraGPU Lab v1: weight-memory estimate and bounded GPU measurement.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    estimate = commands.add_parser("estimate", allow_abbrev=False, help="weight memory from parameters and bits (no GPU)")
    estimate.add_argument("--parameters", required=True, action=_Once, help="number of parameters, a positive integer")
    estimate.add_argument("--bits", required=True, action=_Once, help="storage bits per parameter, rounded up to bytes")
    estimate.add_argument("--reserve-gib", default="0", action=_Once, help="assumed extra GiB added to the total (default 0)")
    estimate.add_argument("--json", action=_Once, nargs=0, default=False, help="print one JSON object")
    estimate.set_defaults(handler=_cli_estimate)
    environment = commands.add_parser("environment", allow_abbrev=False, help="what Python, PyTorch and the GPU report")
    environment.add_argument("--device", required=True, action=_Once, help="GPU to describe, e.g. cuda:0")
    environment.add_argument("--json", action=_Once, nargs=0, default=False, help="print one JSON object")
    environment.set_defaults(handler=_cli_environment)
    measure = commands.add_parser("measure", allow_abbrev=False, help="bounded measurement of the synthetic MLP on a GPU")
    measure.add_argument("--device", required=True, action=_Once, help="GPU to measure, e.g. cuda:0 (no default)")
    measure.add_argument("--batch", required=True, action=_Once, help="batch size, >= 1")
    measure.add_argument("--context", required=True, action=_Once, help="positions per sample, >= 1 (no attention)")
    measure.add_argument("--width", required=True, action=_Once, help="model width; hidden = 4 x width")
    measure.add_argument("--dtype", default="float32", action=_Once, help="float32 (default), float16 or bfloat16")
    measure.add_argument("--warmup", default="1", action=_Once, help="warm-up passes, >= 0 (default 1)")
    measure.add_argument("--repeats", default="2", action=_Once, help="measured passes after warm-up, >= 1 (default 2)")
    measure.add_argument("--seed", default="0", action=_Once, help="seed of weights and input (default 0)")
    measure.add_argument(
        "--graph-replays", default=None, action=_Once,
        help="after the phases, capture one forward into a CUDA graph and replay it N times (1 to 1000000)",
    )
    measure.add_argument("--output", required=True, action=_Once, metavar="FILE", help="new JSON file to write (never overwritten)")
    measure.set_defaults(handler=_cli_measure)
    return parser


def _cli_estimate(args):
    """``estimate``: prints the estimate as text or JSON; returns the exit code."""
    result = estimate_weights(args.parameters, args.bits, args.reserve_gib)
    write_stdout(json.dumps(result, indent=2) if args.json else estimate_text(result))
    return 0


def _cli_environment(args):
    """``environment``: prints the diagnostic as text or JSON; exits 0 even without a GPU."""
    env = collect_environment(args.device)
    if args.json:
        write_stdout(json.dumps({"tool": dict(TOOL), **env}, indent=2))
    else:
        write_stdout(environment_text(env))
    return 0


# Largest batch x context x 4*width element count: libtorch sizes are signed 64-bit
# (lab/src/measure.rs, MAX_ELEMENTS).
MAX_ELEMENTS = (2**63 - 1) // 8


def check_sizes(batch, context, width, dtype_bytes):
    """Refuses sizes no tensor can have, before anything runs, as ``lab`` does: the widest
    activation and the weight matrix within MAX_ELEMENTS, and every derived count of the
    document (parameters, bytes, FLOPs per forward) within 64 bits."""
    hidden = 4 * width
    tokens = batch * context
    matrix = width * hidden
    parameters = 2 * matrix + hidden + width
    derived = (parameters * dtype_bytes, tokens * width * dtype_bytes, 4 * tokens * matrix)
    if tokens * hidden > MAX_ELEMENTS or matrix > MAX_ELEMENTS or max(derived) > _U64_MAX:
        raise KitError(
            f"batch {batch} × context {context} × width {width} is too large to describe "
            f"(more than {MAX_ELEMENTS} elements)"
        )


def _cli_measure(args):
    """``measure``: validates everything, measures, writes the new JSON file; returns 0."""
    # lab's bounds (lab/src/values.rs): warm-up passes fit in 32 bits, a seed in i64, and at
    # most MAX_REPEATS repetitions, so that the document stays readable by lab report.
    for name, minimum, maximum in (
        ("batch", 1, _U64_MAX), ("context", 1, _U64_MAX), ("width", 1, _U64_MAX),
        ("warmup", 0, _U32_MAX), ("repeats", 1, MAX_REPEATS), ("seed", 0, 2**63 - 1),
    ):
        parse_int(f"--{name}", getattr(args, name), minimum, maximum)
    if args.dtype not in DTYPE_BYTES:
        raise KitError(flag_refusal("--dtype", args.dtype, "must be one of float32, float16, bfloat16"))
    if args.graph_replays is not None:
        parse_int("--graph-replays", args.graph_replays, 1, GRAPH_MAX_REPLAYS)
    parse_device(args.device)
    check_sizes(int(args.batch), int(args.context), int(args.width), DTYPE_BYTES[args.dtype])
    check_new_output(args.output)
    document = run_measurement(
        args.device, args.batch, args.context, args.width, args.dtype, args.warmup, args.repeats, args.seed,
        graph_replays=args.graph_replays,
    )
    write_new_json(args.output, document)
    graph = graph_text(document)
    write_stdout(f"{phases_text(document)}\n{graph + chr(10) if graph else ''}wrote {one_line(args.output)}")
    return 0


def main(argv=None):
    """Runs the command line and returns the exit code (0, 1 or 2)."""
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except KitError as error:
        print_error(error)
        return error.exit_code
    except KeyboardInterrupt:
        print_error("interrupted; no file was written")
        return 130


if __name__ == "__main__":
    sys.exit(main())
