"""Tests of dist/mesure_memoire.py: estimate arithmetic, guards, atomic output, phase protocol.

Standard library only; run with ``python3 -m unittest discover -s tests/python``. PyTorch is
never needed: the guard is run with an isolated interpreter (``python3 -I -S``), and the
phase protocol is checked against a small fake ``torch`` module that models allocator
counters from the lifetimes of fake tensors.
"""

import contextlib
import importlib.util
import io
import re
import json
import os
import subprocess
import sys
import tempfile
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "dist", "mesure_memoire.py")
SCHEMA = os.path.join(ROOT, "lab", "schema", "measurement.schema.json")


def schema_object(schema, node):
    """The object schema ``node`` stands for in the measurement schema (generated from lab's
    types): a ``$ref`` to one of its ``$defs`` followed, the non-null alternative of an
    ``anyOf`` taken."""
    if "anyOf" in node:
        node = next(option for option in node["anyOf"] if option.get("type") != "null")
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node
ESTIMATE_KEYS = [
    "parameters",
    "bits",
    "bytes_per_parameter",
    "weights_bytes",
    "weights_gib",
    "weights_gb",
    "reserve_gib",
    "total_gib",
    "excluded",
]
SMALL = ["--batch", "1", "--context", "16", "--width", "64", "--warmup", "1", "--repeats", "2"]


def load_module():
    """Imports mesure_memoire.py from dist/ under a private name."""
    spec = importlib.util.spec_from_file_location("mesure_memoire_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mm = load_module()


def run(*args, isolated=False, cwd=None):
    """Runs the script (``python3 -I -S`` when ``isolated``); returns the CompletedProcess."""
    flags = ["-I", "-S"] if isolated else []
    return subprocess.run(
        [sys.executable, *flags, SCRIPT, *args], capture_output=True, text=True, cwd=cwd, check=False
    )


class Estimate(unittest.TestCase):
    """docs/PROTOCOL.md §2: worked example, rounding, what is excluded."""

    def estimate(self, *args):
        """Runs ``estimate ... --json`` and returns the parsed object."""
        done = run("estimate", *args, "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        return json.loads(done.stdout)

    def test_worked_example(self):
        result = self.estimate("--parameters", "7000000000", "--bits", "16", "--reserve-gib", "4")
        self.assertEqual(list(result), ESTIMATE_KEYS)
        self.assertEqual(result["bytes_per_parameter"], 2)
        self.assertEqual(result["weights_bytes"], 14_000_000_000)
        self.assertEqual(result["weights_gib"], "13.038516")
        self.assertEqual(result["weights_gb"], "14.000000")
        self.assertEqual(result["reserve_gib"], "4.000000")
        self.assertEqual(result["total_gib"], "17.038516")
        self.assertEqual(
            result["excluded"],
            ["activations", "KV cache", "quantization metadata", "gradients", "optimizer states", "libraries and runtime"],
        )

    def test_reserve_defaults_to_zero(self):
        result = self.estimate("--parameters", "7000000000", "--bits", "12")
        self.assertEqual(result["bytes_per_parameter"], 2)
        self.assertEqual(result["reserve_gib"], "0.000000")
        self.assertEqual(result["total_gib"], "13.038516")

    def test_bits_round_up_to_whole_bytes(self):
        for bits, expected in ((1, 1), (4, 1), (8, 1), (9, 2), (12, 2), (16, 2), (32, 4), (64, 8), (65, 9)):
            self.assertEqual(mm.bytes_per_parameter(bits), expected)
            self.assertEqual(mm.estimate_weights(1, bits)["bytes_per_parameter"], expected)

    def test_half_to_even(self):
        self.assertEqual(mm.estimate_weights(1 << 23, 8)["weights_gib"], "0.007812")
        self.assertEqual(mm.estimate_weights(3 << 23, 8)["weights_gib"], "0.023438")
        self.assertEqual(mm.estimate_weights(1500, 8)["weights_gb"], "0.000002")
        self.assertEqual(mm.estimate_weights(2500, 8)["weights_gb"], "0.000002")

    def test_total_is_rounded_once(self):
        self.assertEqual(mm.estimate_weights(1 << 23, 8, "0.0000004")["total_gib"], "0.007813")
        self.assertEqual(mm.estimate_weights(1 << 23, 8, "0.000001")["total_gib"], "0.007814")
        self.assertEqual(mm.estimate_weights(1 << 23, 8, "0.000000000001")["total_gib"], "0.007813")
        self.assertEqual(mm.estimate_weights(1, 8, "0.0000005")["reserve_gib"], "0.000000")

    def test_largest_weights_that_fit(self):
        self.assertEqual(mm.estimate_weights(2**64 - 1, 8)["weights_bytes"], 2**64 - 1)

    def test_monotone_in_parameters_and_bits(self):
        previous = None
        for parameters in (1, 999, 7 * 10**9, 70 * 10**9, 405 * 10**9):
            for bits in range(1, 65):
                current = mm.estimate_weights(parameters, bits, "0.5")
                if previous and previous["parameters"] == parameters:
                    self.assertLessEqual(float(previous["total_gib"]), float(current["total_gib"]))
                previous = current

    def test_text_output(self):
        done = run("estimate", "--parameters", "7000000000", "--bits", "16", "--reserve-gib", "4")
        self.assertEqual(done.returncode, 0)
        self.assertIn("13.038516 GiB", done.stdout)
        self.assertIn("14.000000 GB", done.stdout)
        self.assertIn("17.038516 GiB", done.stdout)
        self.assertIn("KV cache", done.stdout)

    def test_bad_input_is_one_line_and_exit_2(self):
        cases = [
            ["--parameters", "0", "--bits", "16"],
            ["--parameters", "-1", "--bits", "16"],
            ["--parameters", "7e9", "--bits", "16"],
            ["--parameters", "1.5", "--bits", "16"],
            ["--parameters", "+5", "--bits", "16"],
            ["--parameters", "7_000", "--bits", "16"],
            ["--parameters", "", "--bits", "16"],
            ["--parameters", "18446744073709551616", "--bits", "16"],
            ["--parameters", "18446744073709551615", "--bits", "16"],
            ["--parameters", "5", "--bits", "0"],
            ["--parameters", "5", "--bits", "-8"],
            ["--parameters", "5", "--bits", "8.5"],
            ["--parameters", "5", "--bits", "4294967296"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "-1"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "-0.5"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "nan"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "inf"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "Infinity"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "1e3"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", ".5"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "1."],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "+4"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "4 GiB"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "1234567890123456"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "0.1234567890123456789"],
            ["--parameters", "5"],
            ["--bits", "8"],
            ["--parameters", "5", "--bits", "8", "--bits", "8"],
            ["--parameters", "5", "--bits", "8", "--unknown"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "123456789012345.123456789012345678"],
            ["--parameters", "5", "--bits", "8", "--reserve-gib", "0.1234567890123"],
            # Abbreviated flags are refused, as lab refuses them.
            ["--param", "5", "--bits", "8"],
            ["--parameters", "5", "--bit", "8"],
            ["--parameters", "5", "--bits", "8", "--reserve", "4"],
            ["--parameters", "5", "--bits", "8", "--js"],
        ]
        for args in cases:
            with self.subTest(args=args):
                done = run("estimate", *args)
                self.assertEqual(done.returncode, 2, done.stdout)
                self.assertEqual(done.stdout, "")
                self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
                self.assertTrue(done.stderr.startswith("mesure_memoire.py: error: "))

    def test_reserve_limits(self):
        self.assertEqual(mm.estimate_weights(1, 8, "123456789012345")["reserve_gib"], "123456789012345.000000")
        self.assertEqual(mm.estimate_weights(1, 8, "0.123456789012")["reserve_gib"], "0.123457")
        self.assertEqual(
            mm.estimate_weights(1, 8, "123456789012345.123456789012")["reserve_gib"], "123456789012345.123457"
        )
        # 15 digits before the point and 12 after: what lab holds exactly. The old limit
        # (18 after) is refused with the limit named, on both sides.
        for over in ("123456789012345.123456789012345678", "0.1234567890123", "1234567890123456.5"):
            message = str(self.error(lambda: mm.parse_reserve_gib(over)))
            self.assertIn(f"invalid value '{over}' for '--reserve-gib <R>': accepts at most 15 digits before the point and 12 after", message)
        self.assertIn("(write all the digits: no decimal point, exponent or separator)", str(self.error(lambda: mm.parse_int("--parameters", "7e9", 1))))
        bits = str(self.error(lambda: mm.parse_int("--bits", "8.5", 1)))
        self.assertIn("written with the digits 0-9 only (write all the digits", bits)
        self.assertNotIn("7000000000", bits)

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
    def test_unwritable_stdout_is_one_line_and_exit_1(self):
        estimate = ("estimate", "--parameters", "7", "--bits", "16")
        for args in (estimate, (*estimate, "--json"), ("--help",), ("measure", "--help")):
            with open("/dev/full", "w") as full:
                done = subprocess.run(
                    [sys.executable, SCRIPT, *args],
                    stdout=full,
                    stderr=subprocess.PIPE,
                    text=True,
                    check=False,
                )
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn("cannot write to standard output", done.stderr)

    def test_stdout_closed_from_the_start_is_quiet(self):
        # `>&-`: Python starts with sys.stdout None; like lab, nothing to say and exit 0.
        done = subprocess.run(
            [sys.executable, SCRIPT, "estimate", "--parameters", "7", "--bits", "16"],
            stdout=None, stderr=subprocess.PIPE, text=True, check=False, close_fds=True,
            preexec_fn=lambda: os.close(1),
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
    def test_full_stderr_keeps_the_exit_code(self):
        for args in (("estimate", "--parameters", "x", "--bits", "16"), ("estimate", "--bogus"), ("nothing",)):
            with open("/dev/full", "w") as full:
                done = subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=full, check=False)
            self.assertEqual(done.returncode, 2, args)

    def test_closed_pipe_is_not_an_error(self):
        for args in (("estimate", "--parameters", "7", "--bits", "16"), ("--help",)):
            read_end, write_end = os.pipe()
            os.close(read_end)
            try:
                done = subprocess.run(
                    [sys.executable, SCRIPT, *args],
                    stdout=write_end,
                    stderr=subprocess.PIPE,
                    text=True,
                    check=False,
                )
            finally:
                os.close(write_end)
            self.assertEqual(done.returncode, 0, (args, done.stderr))
            self.assertEqual(done.stderr, "", args)

    def test_every_parser_refuses_abbreviations(self):
        parser = mm.build_parser()
        self.assertFalse(parser.allow_abbrev)
        commands = next(action for action in parser._actions if isinstance(action, mm.argparse._SubParsersAction))
        self.assertEqual(set(commands.choices), {"estimate", "environment", "measure"})
        for name, sub in commands.choices.items():
            self.assertFalse(sub.allow_abbrev, name)
        self.assertIn("negative", str(self.error(lambda: mm.parse_reserve_gib("-1"))))
        self.assertIn("finite", str(self.error(lambda: mm.parse_reserve_gib("inf"))))

    def error(self, call):
        """Returns the KitError raised by ``call`` (and checks its exit code is 2)."""
        with self.assertRaises(mm.KitError) as caught:
            call()
        self.assertEqual(caught.exception.exit_code, 2)
        return caught.exception


class Guards(unittest.TestCase):
    """measure without PyTorch or without a GPU: one line, exit 2, no file; never the CPU."""

    def setUp(self):
        """A temporary folder for outputs."""
        self.folder = tempfile.TemporaryDirectory()
        self.output = os.path.join(self.folder.name, "mesures.json")

    def tearDown(self):
        """Removes the temporary folder."""
        self.folder.cleanup()

    def assert_guarded(self, done, fragment):
        """Exit 2, one stderr line containing ``fragment``, and an empty output folder."""
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, done.stderr)
        self.assertTrue(lines[0].startswith("mesure_memoire.py: error: "), lines[0])
        self.assertIn(fragment, lines[0])
        self.assertEqual(os.listdir(self.folder.name), [])

    def test_without_pytorch_isolated_interpreter(self):
        done = run("measure", "--device", "cuda:0", *SMALL, "--output", self.output, isolated=True)
        self.assert_guarded(done, "PyTorch cannot be imported")
        self.assertIn("nothing was measured", done.stderr)

    def test_device_strings_that_are_not_a_gpu(self):
        for device, fragment in (
            ("cpu", "never falls back to the CPU"),
            ("mps", "not supported"),
            ("mps:0", "not supported"),
            ("cuda", "explicitly"),
            ("cuda:", "write cuda:N with N a GPU index"),
            ("cuda:x", "write cuda:N with N a GPU index"),
            ("cuda:-1", "write cuda:N with N a GPU index"),
            ("gpu0", "write cuda:N, e.g. cuda:0"),
            ("", "write cuda:N, e.g. cuda:0"),
        ):
            with self.subTest(device=device):
                done = run("measure", "--device", device, *SMALL, "--output", self.output, isolated=True)
                self.assert_guarded(done, fragment)

    def test_existing_output_is_untouched(self):
        with open(self.output, "w", encoding="utf-8") as stream:
            stream.write("previous results\n")
        done = run("measure", "--device", "cuda:0", *SMALL, "--output", self.output, isolated=True)
        self.assertEqual(done.returncode, 2)
        self.assertIn("already exists", done.stderr)
        with open(self.output, encoding="utf-8") as stream:
            self.assertEqual(stream.read(), "previous results\n")
        self.assertEqual(os.listdir(self.folder.name), ["mesures.json"])

    def test_missing_output_folder(self):
        missing = os.path.join(self.folder.name, "no", "such", "folder", "m.json")
        done = run("measure", "--device", "cuda:0", *SMALL, "--output", missing, isolated=True)
        self.assert_guarded(done, "does not exist")

    def test_bad_measure_flags(self):
        for args, fragment in (
            (["--batch", "0"], "--batch"),
            (["--context", "-1"], "--context"),
            (["--width", "1.5"], "--width"),
            (["--repeats", "0"], "--repeats"),
            (["--warmup", "-1"], "--warmup"),
            (["--seed", "-1"], "--seed"),
            (["--seed", "9223372036854775808"], "--seed"),
            (["--dtype", "float64"], "--dtype"),
            (["--dtype", "int8"], "--dtype"),
        ):
            with self.subTest(args=args):
                merged = dict(zip(SMALL[::2], SMALL[1::2]))
                merged.update(dict(zip(args[::2], args[1::2])))
                flat = [item for pair in merged.items() for item in pair]
                done = run("measure", "--device", "cuda:0", *flat, "--output", self.output, isolated=True)
                self.assert_guarded(done, fragment)

    def test_required_flags(self):
        done = run("measure", *SMALL, "--output", self.output, isolated=True)
        self.assert_guarded(done, "--device")
        done = run("measure", "--device", "cuda:0", *SMALL, isolated=True)
        self.assert_guarded(done, "--output")

    def test_environment_is_a_diagnostic_without_pytorch(self):
        done = run("environment", "--device", "cuda:0", isolated=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("not available", done.stdout)
        done = run("environment", "--device", "cuda:0", "--json", isolated=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        env = json.loads(done.stdout)
        self.assertIs(env["torch_available"], False)
        self.assertIsNone(env["torch_version"])
        self.assertEqual(env["device"], "cuda:0")
        self.assertIs(env["device_available"], False)
        self.assertEqual(env["runtime"]["language"], "Python")
        self.assertEqual(env["tool"], {"name": "iteragpu-lab", "version": "1.0.0", "implementation": "python"})

    def test_environment_collects_no_personal_data(self):
        done = run("environment", "--device", "cuda:0", "--json", isolated=True)
        text = done.stdout
        for private in {os.environ.get("USER"), os.environ.get("HOME"), os.uname().nodename} - {None, "", "/"}:
            self.assertNotIn(private, text)


class AtomicOutput(unittest.TestCase):
    """write_new_json: new file only, atomic, nothing left behind."""

    def test_writes_then_refuses_to_overwrite(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "m.json")
            mm.write_new_json(path, {"a": 1})
            with open(path, encoding="utf-8") as stream:
                self.assertEqual(json.load(stream), {"a": 1})
            with self.assertRaises(mm.KitError) as caught:
                mm.write_new_json(path, {"a": 2})
            self.assertEqual(caught.exception.exit_code, 2)
            with open(path, encoding="utf-8") as stream:
                self.assertEqual(json.load(stream), {"a": 1})
            self.assertEqual(os.listdir(folder), ["m.json"])

    def test_unserialisable_document_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as folder:
            with self.assertRaises(TypeError):
                mm.write_new_json(os.path.join(folder, "m.json"), {"a": object()})
            self.assertEqual(os.listdir(folder), [])


class SyntheticModel(unittest.TestCase):
    """Sizes of Linear(w, 4w) -> GELU -> Linear(4w, w)."""

    def test_small_float32(self):
        info = mm.synthetic_model_info(1, 16, 64, "float32")
        self.assertEqual(info["hidden"], 256)
        self.assertEqual(info["parameters"], 64 * 256 + 256 + 256 * 64 + 64)
        self.assertEqual(info["parameter_bytes"], 33088 * 4)
        self.assertEqual(info["input_bytes"], 16 * 64 * 4)
        self.assertEqual(info["output_bytes"], 16 * 64 * 4)
        self.assertEqual(info["flops_per_forward"], 2 * 16 * (64 * 256 * 2))
        self.assertEqual(info["autograd"], "inference_mode")

    def test_large_bfloat16(self):
        info = mm.synthetic_model_info(2, 128, 1024, "bfloat16")
        self.assertEqual(info["dtype_bytes"], 2)
        self.assertEqual(info["parameters"], 8_393_728)
        self.assertEqual(info["input_bytes"], 2 * 128 * 1024 * 2)


# --- a fake torch: just enough API for run_measurement, with counters from object lifetimes ---


class _Allocator:
    """Counts bytes of live fake tensors; reserved grows in 2 MiB blocks and never shrinks."""

    def __init__(self):
        """Starts with nothing allocated and an empty call log."""
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.calls = []

    def grow(self, size):
        """Accounts for a new live tensor of ``size`` bytes."""
        self.allocated += size
        block = 2 * 1024 * 1024
        while self.reserved < self.allocated:
            self.reserved += block
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def shrink(self, size):
        """Accounts for a freed tensor of ``size`` bytes (reserved stays: the cache is kept)."""
        self.allocated -= size


def make_fake_torch(fail_in=None):
    """Builds a fake ``torch`` module; ``fail_in`` names a phase that raises OutOfMemoryError."""
    allocator = _Allocator()
    torch = types.ModuleType("torch")
    torch.__version__ = "0.0.0+fake"
    torch.version = types.SimpleNamespace(cuda="13.0", hip=None)
    torch.float32, torch.float16, torch.bfloat16 = "float32", "float16", "bfloat16"
    sizes = {"float32": 4, "float16": 2, "bfloat16": 2}
    state = {"phase_calls": 0}

    class OutOfMemoryError(RuntimeError):
        """Stands for torch.cuda.OutOfMemoryError."""

    class Tensor:
        """A fake GPU tensor: its bytes count while it is alive."""

        def __init__(self, size):
            """Allocates ``size`` bytes."""
            self.size = size
            allocator.grow(size)

        def __del__(self):
            """Frees the bytes."""
            allocator.shrink(self.size)

    class Event:
        """A CUDA event stand-in with a fixed elapsed time."""

        def __init__(self, enable_timing=False):
            """Requires timing, as the protocol does."""
            assert enable_timing

        def record(self, stream=None):
            """Logs the record."""
            allocator.calls.append("record")

        def elapsed_time(self, other):
            """Milliseconds between two events."""
            return 1.5

    def log(name, value=None):
        """Logs a call and returns ``value``."""
        allocator.calls.append(name)
        return value

    class Linear:
        """A fake Linear layer; moving it to the GPU allocates its weights."""

        def __init__(self, inputs, outputs, bias=True, dtype=None):
            """Keeps the shape and dtype."""
            self.count = inputs * outputs + (outputs if bias else 0)
            self.dtype = dtype
            self.outputs = outputs

    class GELU:
        """A fake GELU; the protocol needs the exact (erf) form."""

        def __init__(self, approximate="none"):
            """Checks that the exact form is requested."""
            assert approximate == "none"

    class Sequential:
        """A fake MLP: forward allocates a hidden activation (freed) and the output (kept)."""

        def __init__(self, *layers):
            """Keeps the layers."""
            self.layers = layers
            self.weights = None

        def to(self, device):
            """Moves the weights to the fake GPU."""
            if fail_in == "model_load":
                raise OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB")
            self.weights = [Tensor(layer.count * sizes[layer.dtype]) for layer in self.layers if isinstance(layer, Linear)]
            return self

        def eval(self):
            """Returns the model."""
            return self

        def __call__(self, x):
            """One forward pass."""
            if fail_in == "cold_forward":
                raise OutOfMemoryError("CUDA out of memory. Tried to allocate 20 GiB")
            hidden = Tensor(x.size * 4)
            output = Tensor(x.size)
            del hidden
            return output

    class Generator:
        """A fake generator bound to a device."""

        def __init__(self, device=None):
            """Keeps the device."""
            self.device = device

        def manual_seed(self, seed):
            """Seeds the generator."""
            self.seed = seed
            return self

    def randn(shape, dtype=None, device=None, generator=None):
        """A fake input tensor of the given shape."""
        assert generator is not None and generator.seed is not None
        count = 1
        for dimension in shape:
            count *= dimension
        return Tensor(count * sizes[dtype])

    def synchronize(device=None):
        """Logs a device synchronisation."""
        state["phase_calls"] += 1
        log("synchronize")

    properties = types.SimpleNamespace(name="Fake GPU", total_memory=80 * 2**30, multi_processor_count=100)
    torch.cuda = types.SimpleNamespace(
        OutOfMemoryError=OutOfMemoryError,
        Event=Event,
        is_available=lambda: True,
        device_count=lambda: 1,
        get_device_properties=lambda index: properties,
        get_device_capability=lambda index: (9, 0),
        synchronize=synchronize,
        memory_allocated=lambda device=None: log("memory_allocated", allocator.allocated),
        memory_reserved=lambda device=None: log("memory_reserved", allocator.reserved),
        max_memory_allocated=lambda device=None: log("max_memory_allocated", allocator.peak_allocated),
        max_memory_reserved=lambda device=None: log("max_memory_reserved", allocator.peak_reserved),
        reset_peak_memory_stats=lambda device=None: (
            log("reset_peak_memory_stats"),
            setattr(allocator, "peak_allocated", allocator.allocated),
            setattr(allocator, "peak_reserved", allocator.reserved),
        ),
        device=lambda device: contextlib.nullcontext(),
    )
    class CUDAGraph:
        """A CUDA graph stand-in: logs capture and replays; a replay needs a finished capture."""

        def __init__(self):
            """Not captured yet."""
            self.captured = False

        def capture_begin(self):
            """Logs the start of the capture."""
            log("capture_begin")

        def capture_end(self):
            """Logs the end of the capture."""
            log("capture_end")
            self.captured = True

        def replay(self):
            """Logs one replay."""
            assert self.captured
            log("replay")

    torch.cuda.CUDAGraph = CUDAGraph
    torch.cuda.Stream = lambda device=None: log("Stream", object())
    torch.cuda.stream = lambda stream: (log("stream"), contextlib.nullcontext())[1]
    torch.backends = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace(allow_tf32=False)))
    torch.device = lambda kind, index: f"{kind}:{index}"
    torch.inference_mode = lambda: (log("inference_mode"), contextlib.nullcontext())[1]
    torch.manual_seed = lambda seed: log("manual_seed")
    torch.nn = types.SimpleNamespace(Sequential=Sequential, Linear=Linear, GELU=GELU)
    torch.Generator = Generator
    torch.randn = randn
    torch.allocator = allocator
    return torch


class PhaseProtocol(unittest.TestCase):
    """run_measurement against the fake torch: rows, order of calls, lifetimes, errors."""

    def setUp(self):
        """Installs a fake torch in sys.modules (removed in tearDown)."""
        self.saved = sys.modules.get("torch")
        self.torch = make_fake_torch()
        sys.modules["torch"] = self.torch

    def tearDown(self):
        """Restores sys.modules."""
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved

    def measure(self, **overrides):
        """Runs the small measurement with ``overrides``; returns the document."""
        arguments = dict(device="cuda:0", batch=1, context=16, width=64, dtype="float32", warmup=1, repeats=2, seed=0)
        arguments.update(overrides)
        return mm.run_measurement(**arguments)

    def test_six_rows_in_order_and_schema_keys(self):
        document = self.measure()
        self.assertEqual(
            [(row["phase"], row["repetition"]) for row in document["phases"]],
            [("model_load", None), ("inputs", None), ("cold_forward", None), ("warmup", None), ("warm_forward", 1), ("warm_forward", 2)],
        )
        self.assertEqual(document["schema"], "iteragpu-lab/measurement/v1")
        self.assertEqual(document["tool"], {"name": "iteragpu-lab", "version": "1.0.0", "implementation": "python"})
        with open(SCHEMA, encoding="utf-8") as stream:
            schema = json.load(stream)
        self.assertTrue(set(schema["required"]) <= set(document))
        for key in ("environment", "configuration", "synthetic_model"):
            part = schema_object(schema, schema["properties"][key])
            self.assertTrue(set(part["required"]) <= set(document[key]), key)
            for field in part["required"]:
                if field not in ("cuda_build_version", "hip_build_version"):  # null allowed
                    self.assertIsNotNone(document[key][field], f"{key}.{field}")
        for row in document["phases"]:
            phase = schema_object(schema, schema["properties"]["phases"]["items"])
            self.assertTrue(set(phase["required"]) <= set(row))
            self.assertEqual(row["gpu_seconds"], 0.0015)
            self.assertGreaterEqual(row["wall_seconds"], 0)
        self.assertRegex(document["created_utc"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertIs(document["environment"]["tf32_matmul_allowed"], False)
        json.dumps(document)  # serialisable

    def test_each_phase_follows_the_protocol(self):
        self.measure()
        calls = [call for call in self.torch.allocator.calls if call != "manual_seed"]
        one_phase = [
            "synchronize",
            "memory_allocated",
            "memory_reserved",
            "reset_peak_memory_stats",
            "record",
            "record",
            "synchronize",
            "memory_allocated",
            "memory_reserved",
            "max_memory_allocated",
            "max_memory_reserved",
        ]
        # inference mode is entered once, before the first phase
        self.assertEqual(calls, ["inference_mode"] + one_phase * 6)

    def test_outputs_live_until_the_reading_and_are_freed_before_the_next_phase(self):
        document = self.measure(warmup=3, repeats=2)
        rows = document["phases"]
        weights = 33088 * 4
        inputs = 16 * 64 * 4
        output = inputs
        self.assertEqual(rows[0]["end_allocated_bytes"], weights)
        self.assertEqual(rows[1]["end_allocated_bytes"], weights + inputs)
        for row in rows[2:]:
            self.assertEqual(row["baseline_allocated_bytes"], weights + inputs, row["phase"])
            self.assertEqual(row["end_allocated_bytes"], weights + inputs + output, row["phase"])
            # peak: the hidden activation (4x) and the output exist together; never two outputs
            self.assertEqual(row["peak_allocated_bytes"], weights + inputs + 4 * inputs + output, row["phase"])
            self.assertLessEqual(row["end_allocated_bytes"], row["end_reserved_bytes"])
        self.assertEqual(rows[3]["forward_passes"], 3)

    def test_warmup_zero_still_emits_the_row(self):
        rows = self.measure(warmup=0, repeats=1)["phases"]
        self.assertEqual([row["phase"] for row in rows], ["model_load", "inputs", "cold_forward", "warmup", "warm_forward"])
        self.assertEqual(rows[3]["forward_passes"], 0)
        self.assertEqual(rows[3]["end_allocated_bytes"], rows[3]["baseline_allocated_bytes"])

    def test_missing_index_is_refused(self):
        with self.assertRaises(mm.KitError) as caught:
            self.measure(device="cuda:7")
        self.assertEqual(caught.exception.exit_code, 2)
        self.assertIn("cuda:7 does not exist", str(caught.exception))

    def test_no_gpu_is_refused(self):
        self.torch.cuda.is_available = lambda: False
        with self.assertRaises(mm.KitError) as caught:
            self.measure()
        self.assertEqual(caught.exception.exit_code, 2)
        self.assertIn("no GPU", str(caught.exception))

    def test_out_of_memory_exits_1_and_writes_nothing(self):
        for phase in ("model_load", "cold_forward"):
            with self.subTest(phase=phase), tempfile.TemporaryDirectory() as folder:
                sys.modules["torch"] = make_fake_torch(fail_in=phase)
                output = os.path.join(folder, "m.json")
                stderr = _capture_stderr(lambda: mm.main(["measure", "--device", "cuda:0", *SMALL, "--output", output]))
                self.assertEqual(stderr[0], 1)
                self.assertIn("out of memory", stderr[1])
                self.assertIn(phase, stderr[1])
                self.assertEqual(len(stderr[1].splitlines()), 1)
                self.assertEqual(os.listdir(folder), [])

    def test_cli_writes_one_new_file(self):
        with tempfile.TemporaryDirectory() as folder:
            output = os.path.join(folder, "m.json")
            code, _ = _capture_stderr(lambda: mm.main(["measure", "--device", "cuda:0", *SMALL, "--output", output]))
            self.assertEqual(code, 0)
            self.assertEqual(os.listdir(folder), ["m.json"])
            with open(output, encoding="utf-8") as stream:
                document = json.load(stream)
            self.assertEqual(document["configuration"]["device"], "cuda:0")
            self.assertEqual(len(document["phases"]), 6)
            code, message = _capture_stderr(lambda: mm.main(["measure", "--device", "cuda:0", *SMALL, "--output", output]))
            self.assertEqual(code, 2)
            self.assertIn("already exists", message)


class GraphFloor(unittest.TestCase):
    """measure_graph against the fake torch: the graph object, its counters, the flag."""

    def setUp(self):
        """Installs a fake torch in sys.modules (removed in tearDown)."""
        self.saved = sys.modules.get("torch")
        self.torch = make_fake_torch()
        sys.modules["torch"] = self.torch

    def tearDown(self):
        """Restores sys.modules."""
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved

    def test_absent_unless_asked(self):
        document = mm.run_measurement("cuda:0", 1, 16, 64)
        self.assertNotIn("graph", document)
        self.assertNotIn("capture_begin", self.torch.allocator.calls)

    def test_graph_object_after_the_phases(self):
        document = mm.run_measurement("cuda:0", 1, 16, 64, graph_replays=4)
        self.assertEqual(len(document["phases"]), 6)
        graph = document["graph"]
        with open(SCHEMA, encoding="utf-8") as stream:
            schema = json.load(stream)
        required = schema_object(schema, schema["properties"]["graph"])["required"]
        self.assertEqual(sorted(required), sorted(graph))
        self.assertEqual(graph["replays"], 4)
        self.assertEqual(graph["batches"], 5)
        self.assertEqual(graph["memory_pool"], "private")
        self.assertEqual(graph["capture_warmup_forwards"], 3)
        # the fake event pair always reads 1.5 ms: 1.5 ms / 4 replays per forward
        self.assertEqual(graph["batch_gpu_seconds_per_forward"], [0.0015 / 4] * 5)
        self.assertEqual(graph["median_gpu_seconds_per_forward"], 0.0015 / 4)
        self.assertLessEqual(graph["synchronised_wall_seconds_min"], graph["synchronised_wall_seconds_median"])
        calls = self.torch.allocator.calls
        self.assertEqual(calls.count("replay"), 5 * 4 + 4)
        self.assertLess(calls.index("capture_begin"), calls.index("capture_end"))
        self.assertLess(calls.index("capture_end"), calls.index("replay"))
        weights, inputs = 33088 * 4, 16 * 64 * 4
        capture = graph["capture"]
        self.assertEqual(capture["baseline_allocated_bytes"], weights + inputs)
        # the captured output stays alive for the replays; warm-up outputs are freed
        self.assertEqual(capture["end_allocated_bytes"], weights + inputs + inputs)
        self.assertEqual(capture["peak_allocated_bytes"], weights + inputs + 4 * inputs + inputs)
        replay = graph["replay"]
        self.assertEqual(replay["baseline_allocated_bytes"], replay["end_allocated_bytes"])
        self.assertIn("launch overhead", mm.graph_text(document))
        self.assertEqual(mm.graph_text({"graph": None}), "")

    def test_bad_replays_flag_is_exit_2_before_anything_runs(self):
        for bad in ("0", "-1", "1000001", "x", "1.5"):
            with self.subTest(bad=bad), tempfile.TemporaryDirectory() as folder:
                output = os.path.join(folder, "m.json")
                code, message = _capture_stderr(
                    lambda: mm.main(["measure", "--device", "cuda:0", *SMALL, "--graph-replays", bad, "--output", output])
                )
                self.assertEqual(code, 2)
                self.assertIn("--graph-replays", message)
                self.assertEqual(os.listdir(folder), [])

    def test_cli_writes_the_graph(self):
        with tempfile.TemporaryDirectory() as folder:
            output = os.path.join(folder, "m.json")
            code, _ = _capture_stderr(
                lambda: mm.main(["measure", "--device", "cuda:0", *SMALL, "--graph-replays", "3", "--output", output])
            )
            self.assertEqual(code, 0)
            with open(output, encoding="utf-8") as stream:
                self.assertEqual(json.load(stream)["graph"]["replays"], 3)


NOTEBOOK = os.path.join(ROOT, "dist", "mesure-memoire.ipynb")


class Notebook(unittest.TestCase):
    """The notebook: clean nbformat 4.5, same code as the script, runs top to bottom."""

    def setUp(self):
        """Loads the notebook and installs a fake torch (removed in tearDown)."""
        with open(NOTEBOOK, encoding="utf-8") as stream:
            self.notebook = json.load(stream)
        self.saved = sys.modules.get("torch")
        sys.modules["torch"] = make_fake_torch()
        self.cwd = os.getcwd()

    def tearDown(self):
        """Restores sys.modules and the working folder."""
        os.chdir(self.cwd)
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved

    def code_cells(self):
        """(id, source) of every code cell, in order."""
        return [(c["id"], "".join(c["source"])) for c in self.notebook["cells"] if c["cell_type"] == "code"]

    def test_format_and_no_saved_state(self):
        self.assertEqual(self.notebook["nbformat"], 4)
        self.assertGreaterEqual(self.notebook["nbformat_minor"], 5)
        self.assertEqual(self.notebook["metadata"]["kernelspec"]["name"], "python3")
        self.assertNotIn("widgets", self.notebook["metadata"])
        self.assertEqual(self.notebook["cells"][0]["cell_type"], "markdown")
        self.assertEqual(self.code_cells()[0][0], "parameters")
        for cell in self.notebook["cells"]:
            self.assertRegex(cell["id"], r"^[A-Za-z0-9_-]{1,64}$")
            if cell["cell_type"] == "code":
                self.assertEqual(cell["outputs"], [])
                self.assertIsNone(cell["execution_count"])
                self.assertNotRegex("".join(cell["source"]), r"(import|from)\s+mesure_memoire")

    def test_code_cells_are_the_script_regions(self):
        with open(SCRIPT, encoding="utf-8") as stream:
            script = stream.read()
        regions = dict(re.findall(r"^# notebook-cell: (\w+)\n(.*?)^# end-notebook-cell$", script, re.M | re.S))
        cells = dict(self.code_cells())
        self.assertEqual(set(regions), {"imports", "common", "estimate", "environment", "measure"})
        for name, code in regions.items():
            self.assertEqual(cells[f"code-{name}"], code.strip("\n"), name)

    def test_runs_top_to_bottom_with_a_gpu(self):
        with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)
            namespace = {"__name__": "__notebook__"}
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                for cell_id, source in self.code_cells():
                    exec(compile(source, cell_id, "exec"), namespace)  # noqa: S102 (the notebook's own code)
                    if cell_id == "parameters":
                        namespace["RUN_LARGER"] = True
                        namespace["LARGER"] = dict(namespace["LARGER"], width=128)
            self.assertEqual(sorted(os.listdir(folder)), ["mesures-petit-essai.json", "mesures.json"])
            with open("mesures.json", encoding="utf-8") as stream:
                larger = json.load(stream)
            self.assertEqual(larger["configuration"]["width"], 128)
            self.assertEqual(len(larger["phases"]), 3 + 1 + 5)
            self.assertIn("17.038516 GiB", out.getvalue())
            self.assertIn("mesures-petit-essai.json ", out.getvalue())  # the SHA-256 line
            os.chdir(self.cwd)

    def test_without_gpu_the_measurement_cell_raises_and_writes_nothing(self):
        sys.modules["torch"].cuda.is_available = lambda: False
        with tempfile.TemporaryDirectory() as folder:
            os.chdir(folder)
            namespace = {"__name__": "__notebook__"}
            with contextlib.redirect_stdout(io.StringIO()):
                for cell_id, source in self.code_cells():
                    if cell_id == "run-small":
                        with self.assertRaises(Exception) as caught:
                            exec(compile(source, cell_id, "exec"), namespace)  # noqa: S102
                        self.assertEqual(caught.exception.exit_code, 2)
                        break
                    exec(compile(source, cell_id, "exec"), namespace)  # noqa: S102
            self.assertEqual(os.listdir(folder), [])
            os.chdir(self.cwd)


CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


class ControlCharacters(unittest.TestCase):
    """Messages and the environment text escape control characters as ``lab`` does (Rust's
    ``char::escape_default``): one line per message, no escape sequence reaching the terminal."""

    def assert_clean_refusal(self, args, fragment):
        """Exit 2, nothing on stdout, one stderr line free of control characters with ``fragment``."""
        done = run(*args, isolated=True)
        self.assertEqual(done.returncode, 2, done.stderr)
        self.assertEqual(done.stdout, "")
        self.assertTrue(done.stderr.endswith("\n"), done.stderr)
        line = done.stderr[:-1]
        self.assertTrue(line.startswith("mesure_memoire.py: error: "), line)
        self.assertIsNone(CONTROLS.search(line), line)
        self.assertIn(fragment, line)

    def test_errors_are_escaped_like_lab(self):
        self.assert_clean_refusal(
            ["estimate", "--parameters", "7\x1b[2J", "--bits", "16"],
            "invalid value '7\\u{1b}[2J' for '--parameters <P>': must be a whole number of at least 1, written with the digits 0-9 only",
        )
        self.assert_clean_refusal(
            ["estimate", "--parameters", "7", "--bits", "16", "--reserve-gib", "4\n\t\x85"],
            "invalid value '4\\n\\t\\u{85}' for '--reserve-gib <R>': must be a plain decimal number of GiB",
        )
        with tempfile.TemporaryDirectory() as folder:
            output = os.path.join(folder, "m.json")
            self.assert_clean_refusal(
                ["measure", "--device", "cu\x1bda:0", *SMALL, "--output", output],
                "invalid value 'cu\\u{1b}da:0' for '--device <cuda:N|all|LIST>': write cuda:N, e.g. cuda:0",
            )
            self.assert_clean_refusal(
                ["measure", "--device", "cuda:0", *SMALL, "--dtype", "f\x1b", "--output", output],
                "invalid value 'f\\u{1b}' for '--dtype <DTYPE>': must be one of float32, float16, bfloat16",
            )
            self.assertEqual(os.listdir(folder), [])
        self.assert_clean_refusal(["estimate", "--parameters", "7", "--bits", "16", "--x\x7f"], "--x\\u{7f}")

    def test_environment_text_escapes_the_device(self):
        reference = run("environment", "--device", "cuda:0", isolated=True)
        done = run("environment", "--device", "cuda:\x1b[31mRED\nx", isolated=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        self.assertIsNone(CONTROLS.search(done.stdout.replace("\n", "")), done.stdout)
        self.assertEqual(len(done.stdout.splitlines()), len(reference.stdout.splitlines()), done.stdout)
        self.assertIn("'cuda:\\u{1b}[31mRED\\nx':", done.stdout)
        env = json.loads(run("environment", "--device", "cuda:\x1b[31mRED", "--json", isolated=True).stdout)
        self.assertEqual(env["device"], "cuda:\x1b[31mRED")

    def test_environment_text_escapes_what_pytorch_says(self):
        env = mm.collect_environment("cuda:0", torch=None, reason="ImportError: first\nsecond \x1b[0m")
        text = mm.environment_text(env)
        self.assertIn("(ImportError: first\\nsecond \\u{1b}[0m)", text)
        self.assertIsNone(CONTROLS.search(text.replace("\n", "")), text)

    def test_one_line_is_rust_escape_default_on_control_characters(self):
        self.assertEqual(mm.one_line("a\tb\nc\rd"), "a\\tb\\nc\\rd")
        self.assertEqual(mm.one_line("\x00\x01\x1b\x1f\x7f\x80\x9f"), "\\u{0}\\u{1}\\u{1b}\\u{1f}\\u{7f}\\u{80}\\u{9f}")
        kept = "cuda:0 'x' \"y\" \\u{1b} \u00e9\u00a0\u2030 \U0001f600"
        self.assertEqual(mm.one_line(kept), kept)
        once = mm.one_line("x\x1b\ny")
        self.assertEqual(mm.one_line(once), once)
        self.assertEqual(mm.one_line("a\udcffb"), "a\ufffdb")
        self.assertEqual(str(mm.KitError("got 'x\x1b\ny'")), "got 'x\\u{1b}\\ny'")


class EnvironmentDiagnostic(unittest.TestCase):
    """docs/PROTOCOL.md §3: environment always exits 0 and says "not available" with the reason."""

    NOT_GPU = {
        "cpu": "'cpu' is not a GPU",
        "mps": "Apple Metal is not supported: the measurement needs a CUDA or ROCm GPU named cuda:N",
        "mps:0": "Apple Metal is not supported",
        "cuda": "a bare 'cuda' is refused",
        "cuda:x": "write cuda:N with N a GPU index, e.g. cuda:0",
        "cuda:-1": "write cuda:N with N a GPU index",
        "": "write cuda:N, e.g. cuda:0 (ROCm GPUs are cuda:N too)",
        "cuda:99999999999": "the GPU index is too large: write cuda:N with N at most 2147483647",
        "cuda:2147483648": "the GPU index is too large",
        "cuda:" + "9" * 4400: "is too large: write cuda:N with N at most 2147483647",
        # One spelling only, as PyTorch and lab: no leading zero, space, sign or capital.
        "cuda:01": "the GPU index has a leading zero: write cuda:1",
        "cuda:00": "the GPU index has a leading zero: write cuda:0",
        "cuda:" + "0" * 4400 + "7": "has a leading zero: write cuda:7",
        "cuda:0 ": "write cuda:N with N a GPU index",
        " cuda:0": "write cuda:N, e.g. cuda:0 (ROCm",
        "cuda: 0": "write cuda:N with N a GPU index",
        "cuda:+1": "write cuda:N with N a GPU index",
        "CUDA:0": "write cuda:N, e.g. cuda:0 (ROCm",
        "cuda:\u0663": "write cuda:N with N a GPU index",
    }

    def setUp(self):
        """Remembers sys.modules' torch (a test may install a fake one)."""
        self.saved = sys.modules.get("torch")

    def tearDown(self):
        """Restores sys.modules."""
        if self.saved is None:
            sys.modules.pop("torch", None)
        else:
            sys.modules["torch"] = self.saved

    def test_a_device_that_is_not_a_gpu_is_reported_not_refused(self):
        for device, reason in self.NOT_GPU.items():
            with self.subTest(device=device):
                done = run("environment", "--device", device, isolated=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                self.assertEqual(done.stderr, "")
                self.assertRegex(done.stdout, rf"(?m)^'{re.escape(device)}':\s+not available \(.*{re.escape(reason)}")
                done = run("environment", "--device", device, "--json", isolated=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                env = json.loads(done.stdout)
                self.assertEqual(env["device"], device)
                self.assertIs(env["device_available"], False)
                self.assertIn(reason, env["device_error"])

    def test_measure_still_refuses_them(self):
        with tempfile.TemporaryDirectory() as folder:
            for device, reason in self.NOT_GPU.items():
                with self.subTest(device=device):
                    output = os.path.join(folder, "m.json")
                    done = run("measure", "--device", device, *SMALL, "--output", output, isolated=True)
                    self.assertEqual(done.returncode, 2, done.stderr)
                    self.assertIn(reason, done.stderr)
                    self.assertEqual(len(done.stderr.splitlines()), 1)
            self.assertEqual(os.listdir(folder), [])

    def test_device_count_is_unknown_without_pytorch(self):
        env = json.loads(run("environment", "--device", "cuda:0", "--json", isolated=True).stdout)
        self.assertIsNone(env["device_count"])
        self.assertIs(env["torch_available"], False)
        self.assertEqual(env["device_error"], "PyTorch cannot be imported")
        text = run("environment", "--device", "cuda:0", isolated=True).stdout
        self.assertIn("GPUs visible:      not available (PyTorch cannot be imported)\n", text)
        self.assertIn("cuda:0:            not available (PyTorch cannot be imported)\n", text)
        self.assertNotIn("GPUs visible:      0", text)

    def environment(self, *args, gpu=True):
        """Runs ``main(["environment", *args])`` with the fake torch; returns (code, stdout)."""
        torch = make_fake_torch()
        if not gpu:
            torch.cuda.is_available = lambda: False
            torch.cuda.device_count = lambda: 0
        sys.modules["torch"] = torch
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = mm.main(["environment", *args])
        return code, out.getvalue()

    def test_pytorch_without_gpu_counts_a_real_zero(self):
        code, text = self.environment("--device", "cuda:0", gpu=False)
        self.assertEqual(code, 0)
        self.assertIn("GPUs visible:      0\n", text)
        self.assertIn("cuda:0:            not available (PyTorch 0.0.0+fake sees no GPU", text)
        code, text = self.environment("--device", "cuda:0", "--json", gpu=False)
        env = json.loads(text)
        self.assertEqual(env["device_count"], 0)
        self.assertIs(env["device_available"], False)
        self.assertIn("sees no GPU", env["device_error"])

    def test_pytorch_with_a_gpu(self):
        env = json.loads(self.environment("--device", "cuda:0", "--json")[1])
        self.assertEqual(env["device_count"], 1)
        self.assertIs(env["device_available"], True)
        self.assertIsNone(env["device_error"])
        env = json.loads(self.environment("--device", "cuda:3", "--json")[1])
        self.assertEqual(env["device_count"], 1)
        self.assertIs(env["device_available"], False)
        self.assertEqual(env["device_error"], "cuda:3 does not exist: PyTorch sees 1 GPU(s), cuda:0 to cuda:0")
        code, text = self.environment("--device", "cpu")
        self.assertEqual(code, 0)
        self.assertIn("pytorch:           0.0.0+fake\n", text)
        self.assertIn("GPUs visible:      1\n", text)
        self.assertIn("'cpu':            not available ('cpu' is not a GPU", text)


class InputClasses(unittest.TestCase):
    """Input classes where the twins once disagreed with lab (lab/tests/differential/ checks
    them against lab): integers of any length, the hidden-character rule, paths the tool
    found itself."""

    def refused(self, args, fragment):
        """``args`` exits 2 with one stderr line containing ``fragment`` and no traceback."""
        done = run(*args, isolated=True)
        self.assertEqual(done.returncode, 2, done.stderr[-500:])
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr[-500:])
        self.assertNotIn("Traceback", done.stderr)
        self.assertIn(fragment, done.stderr)
        self.assertEqual(done.stdout, "")

    def test_integers_past_the_conversion_limit_are_too_large(self):
        for value in ("9" * 4400, "1" + "0" * 5000, "9" * 100_000):
            with self.subTest(digits=len(value)):
                self.refused(["estimate", "--parameters", value, "--bits", "16"], "for '--parameters <P>': must be a whole number from 1 to 18446744073709551615")
                self.refused(["estimate", "--parameters", "7", "--bits", value], "for '--bits <B>': must be a whole number from 1 to 4294967295")
                self.refused(["estimate", "--parameters", "7", "--bits", "16", "--reserve-gib", value], "for '--reserve-gib <R>': accepts at most 15 digits")
                with tempfile.TemporaryDirectory() as folder:
                    output = os.path.join(folder, "m.json")
                    for flag in ("--batch", "--context", "--width", "--warmup", "--repeats", "--seed"):
                        args = {"--device": "cuda:0", "--batch": "1", "--context": "1", "--width": "1", "--output": output}
                        args[flag] = value
                        self.refused(["measure", *[item for pair in args.items() for item in pair]], f"for '{flag} <")
                    self.refused(["measure", "--device", "cuda:" + value, *SMALL, "--output", output], "is too large: write cuda:N with N at most 2147483647")
                    self.assertEqual(os.listdir(folder), [])

    def test_leading_zeros_of_any_length_are_the_number(self):
        zeros = "0" * 5000
        done = run("estimate", "--parameters", zeros + "7000000000", "--bits", zeros + "16", "--json")
        self.assertEqual(done.returncode, 0, done.stderr[-300:])
        result = json.loads(done.stdout)
        self.assertEqual((result["parameters"], result["bits"], result["weights_bytes"]), (7000000000, 16, 14000000000))

    def test_huge_python_ints_from_the_notebook_are_refused_not_crashed(self):
        for value in (10**5000, -(10**5000), 2**64):
            with self.subTest(bits=value.bit_length()):
                with self.assertRaises(mm.KitError) as caught:
                    mm.estimate_weights(value, 16)
                self.assertEqual(caught.exception.exit_code, 2)
                self.assertIn("for '--parameters <P>': must be a whole number", str(caught.exception))
                with self.assertRaises(mm.KitError):
                    mm.estimate_weights(7, 16, value)
        self.assertIn("a number of 16610 bits", str(self._error(lambda: mm.parse_int("--batch", 10**5000, 1))))

    @staticmethod
    def _error(call):
        """The KitError ``call`` raises."""
        try:
            call()
        except mm.KitError as error:
            return error
        raise AssertionError("no KitError")

    def test_hidden_characters_are_escaped_in_every_message(self):
        for char in ("\x1c", "\x1b", "\x9b", "\xad", "\u200b", "\u202e", "\u2028", "\u2029", "\ufeff", "\U000e0041"):
            with self.subTest(char=hex(ord(char))):
                done = run("measure", "--device", f"cuda:{char}0", *SMALL, "--output", "m.json", isolated=True)
                self.assertEqual(done.returncode, 2)
                self.assertIn(f"\\u{{{ord(char):x}}}", done.stderr)
                self.assertEqual(mm._HIDDEN.findall(done.stderr.rstrip("\n")), [])

    def test_paths_the_tool_found_itself_do_not_show_the_home_folder(self):
        home = os.path.expanduser("~")
        self.assertEqual(mm.public_text(f"OSError: {home}/venv/lib/libtorch.so: no such file"), "OSError: ~/venv/lib/libtorch.so: no such file")
        self.assertEqual(mm.public_text("no home here"), "no home here")
        # A write that fails (here: a full disk at fsync) names the path the user typed,
        # never the temporary file or its absolute folder, and leaves nothing behind.
        from unittest import mock

        with tempfile.TemporaryDirectory() as folder:
            target = os.path.join("out", "m.json")
            os.mkdir(os.path.join(folder, "out"))
            full = OSError(28, "No space left on device")
            with mock.patch.object(mm.os, "fsync", side_effect=full), _chdir(folder):
                error = self._error(lambda: mm.write_new_json(target, {"a": 1}))
            self.assertEqual(error.exit_code, 1)
            self.assertEqual(str(error), "cannot write out/m.json: No space left on device; nothing was written")
            self.assertEqual(os.listdir(os.path.join(folder, "out")), [])


class _chdir:
    """Runs a block in another working folder (contextlib.chdir is Python 3.11+)."""

    def __init__(self, folder):
        """Remembers the folder to enter."""
        self.folder = folder

    def __enter__(self):
        """Enters the folder."""
        self.previous = os.getcwd()
        os.chdir(self.folder)

    def __exit__(self, *exc):
        """Returns to the previous folder."""
        os.chdir(self.previous)


def _capture_stderr(call):
    """Runs ``call`` with stdout/stderr captured; returns ``(result, stderr text)``."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = call()
    return result, err.getvalue()


if __name__ == "__main__":
    unittest.main()
