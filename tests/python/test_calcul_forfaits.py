"""Tests of dist/calcul_forfaits.py: worked examples, rounding, catalog validation, bad input.

Standard library only; run with ``python3 -m unittest discover -s tests/python``.
"""

import csv
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "dist", "calcul_forfaits.py")
CATALOG = os.path.join(ROOT, "data", "tarifs-forfaits.csv")
JSON_KEYS = [
    "gpu",
    "model",
    "days",
    "lots",
    "gpus_per_lot",
    "gpus",
    "lot_price_cents",
    "total_cents",
    "total_usd",
    "accepted_results",
    "unit_cost_usd",
    "catalog",
]


def load_module():
    """Imports calcul_forfaits.py from dist/ under a private name."""
    spec = importlib.util.spec_from_file_location("calcul_forfaits_under_test", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cf = load_module()


def run(*args, script=SCRIPT, cwd=None):
    """Runs the script with ``args``; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, cwd=cwd, check=False
    )


def catalog_bytes():
    """The repository's catalog file, as bytes."""
    with open(CATALOG, "rb") as stream:
        return stream.read()


def catalog_rows():
    """The repository's catalog as a list of CSV records (header first)."""
    with open(CATALOG, newline="", encoding="utf-8") as stream:
        return list(csv.reader(stream))


def to_csv(records, delimiter=",", line_end="\n"):
    """Serialises records with the given delimiter and line end."""
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=delimiter, lineterminator=line_end).writerows(records)
    return buffer.getvalue().encode("utf-8")


class WorkedExamples(unittest.TestCase):
    """docs/PROTOCOL.md §5's examples and the rounding rules."""

    def quote(self, *args):
        """Runs the script with --json and returns the parsed object."""
        done = run(*args, "--json")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, "")
        return json.loads(done.stdout)

    def test_two_b200_lots_are_four_gpus_at_twice_the_lot_price(self):
        result = self.quote("--gpu", "b200", "--days", "7", "--lots", "2")
        self.assertEqual(list(result), JSON_KEYS)
        self.assertEqual(result["gpus_per_lot"], 2)
        self.assertEqual(result["gpus"], 4)
        self.assertEqual(result["lot_price_cents"], 153216)
        self.assertEqual(result["total_cents"], 2 * 153216)
        self.assertEqual(result["total_usd"], "3064.32")
        self.assertIsNone(result["accepted_results"])
        self.assertIsNone(result["unit_cost_usd"])
        self.assertEqual(list(result["catalog"]), ["snapshot_date", "sha256", "embedded", "illustrative"])
        self.assertEqual(result["catalog"]["snapshot_date"], "2026-09-24")
        self.assertIs(result["catalog"]["illustrative"], True)
        self.assertEqual(result["catalog"]["sha256"], cf.hashlib.sha256(catalog_bytes()).hexdigest())
        self.assertIs(result["catalog"]["embedded"], False)

    def test_unit_cost_on_exact_ties_rounds_to_even(self):
        down = self.quote("--gpu", "b200", "--days", "7", "--lots", "1", "--accepted-results", "2560000")
        self.assertEqual(down["unit_cost_usd"], "0.000598")  # 598.5 micro-dollars
        up = self.quote("--gpu", "b200", "--days", "7", "--lots", "1", "--accepted-results", "7680000")
        self.assertEqual(up["unit_cost_usd"], "0.000200")  # 199.5 micro-dollars
        self.assertEqual(up["accepted_results"], 7680000)

    def test_unit_cost_function(self):
        self.assertEqual(cf.unit_cost_usd(1, 20_000), "0.000000")
        self.assertEqual(cf.unit_cost_usd(7, 20_000), "0.000004")
        self.assertEqual(cf.unit_cost_usd(1, 4_000), "0.000002")
        self.assertEqual(cf.unit_cost_usd(1, 800), "0.000012")
        self.assertEqual(cf.unit_cost_usd(1, 3), "0.003333")
        self.assertEqual(cf.unit_cost_usd(306432, 1), "3064.320000")
        self.assertEqual(cf.unit_cost_usd(2**63 - 1, 1), "92233720368547758.070000")

    def test_round_half_even_ratio(self):
        self.assertEqual(cf.round_half_even_ratio(5, 2), 2)
        self.assertEqual(cf.round_half_even_ratio(7, 2), 4)
        self.assertEqual(cf.round_half_even_ratio(8, 3), 3)
        self.assertEqual(cf.round_half_even_ratio(7, 3), 2)

    def test_unit_cost_is_within_half_a_micro_dollar(self):
        for total in (1, 999, 153216, 587520 * 10, 2**63 - 1):
            for results in (1, 3, 7, 1000, 123457, 2**64 - 1):
                micro = int(cf.unit_cost_usd(total, results).replace(".", ""))
                # |micro x results - total x 10^4| <= results / 2, in whole tenths of micro-dollars
                self.assertLessEqual(abs(micro * results * 2 - total * 10_000 * 2), results)

    def test_total_is_lot_price_times_lots_for_every_row(self):
        rows, info = cf.load_catalog(CATALOG)
        self.assertEqual(len(rows), 45)
        for row in rows:
            for lots in (1, 2, 3, 10):
                result = cf.quote(rows, info, row["gpu"], row["days"], lots)
                self.assertEqual(result["total_cents"], row["price_cents"] * lots)
                self.assertEqual(result["gpus"], row["gpus_per_lot"] * lots)
                self.assertEqual(result["total_usd"], f"{row['price_cents'] * lots / 100:.2f}")

    def test_largest_total_that_fits_is_accepted(self):
        rows, info = cf.load_catalog(CATALOG)
        result = cf.quote(rows, info, "t4", 3, (2**63 - 1) // 2520)
        self.assertLessEqual(result["total_cents"], 2**63 - 1)
        with self.assertRaises(cf.PriceError):
            cf.quote(rows, info, "t4", 3, (2**63 - 1) // 2520 + 1)

    def test_text_output_names_the_lots_and_the_label(self):
        done = run("--gpu", "b200", "--days", "7", "--lots", "2")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("2 lots x 2 GPUs per lot = 4 GPUs", done.stdout)
        self.assertIn("3064.32 USD", done.stdout)
        self.assertIn("illustrative prices (stand-ins for the 2026-09-24 snapshot)", done.stdout)

    def test_text_output_singular_and_plural(self):
        for gpu, lots, expected in (
            ("t4", "1", "1 lot x 1 GPU per lot = 1 GPU\n"),
            ("t4", "3", "3 lots x 1 GPU per lot = 3 GPUs\n"),
            ("b200", "1", "1 lot x 2 GPUs per lot = 2 GPUs\n"),
        ):
            done = run("--gpu", gpu, "--days", "7", "--lots", lots)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(expected, done.stdout)


class Output(unittest.TestCase):
    """Standard output that cannot be written: one line, exit 1; a closed pipe is quiet."""

    ARGS = ("--gpu", "b200", "--days", "7", "--lots", "1")

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
    def test_full_device_is_one_line_and_exit_1(self):
        for args in (self.ARGS, (*self.ARGS, "--json"), ("--help",)):
            with open("/dev/full", "w") as full:
                done = subprocess.run(
                    [sys.executable, SCRIPT, *args], stdout=full, stderr=subprocess.PIPE, text=True, check=False
                )
            self.assertEqual(done.returncode, 1, done.stderr)
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn("cannot write to standard output", done.stderr)
            self.assertNotIn("Traceback", done.stderr)

    @unittest.skipUnless(os.path.exists("/dev/full"), "needs /dev/full")
    def test_full_stderr_keeps_the_exit_code(self):
        for args, code in (((*self.ARGS, "--bogus"), 2), (("--gpu", "nope", "--days", "7", "--lots", "1"), 2),
                           (("--tariffs", "/nonexistent/t.csv", *self.ARGS), 1)):
            with open("/dev/full", "w") as full:
                done = subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=full, check=False)
            self.assertEqual(done.returncode, code, args)

    def test_closed_pipe_is_not_an_error(self):
        for args in (self.ARGS, ("--help",)):
            read_end, write_end = os.pipe()
            os.close(read_end)
            try:
                done = subprocess.run([sys.executable, SCRIPT, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False)
            finally:
                os.close(write_end)
            self.assertEqual(done.returncode, 0, (args, done.stderr))
            self.assertEqual(done.stderr, "", args)


class BadInput(unittest.TestCase):
    """Every bad input: one line on stderr, exit 2 (1 for an unreadable file), nothing on stdout."""

    def assert_refused(self, args, code=2, fragment=None):
        """Runs the script and checks the exit code, the single stderr line and its content."""
        done = run(*args)
        self.assertEqual(done.returncode, code, (args, done.stdout, done.stderr))
        self.assertEqual(done.stdout, "", args)
        lines = done.stderr.splitlines()
        self.assertEqual(len(lines), 1, (args, done.stderr))
        self.assertTrue(lines[0].startswith("calcul_forfaits.py: error: "), lines[0])
        self.assertNotIn("Traceback", done.stderr)
        if fragment:
            self.assertIn(fragment, lines[0])
        return lines[0]

    def test_unknown_gpu_lists_the_valid_ids(self):
        line = self.assert_refused(["--gpu", "x100", "--days", "7", "--lots", "1"], fragment="b200")
        self.assertIn("t4", line)
        self.assertIn("mi325x", line)

    def test_wrong_duration_lists_the_valid_ones(self):
        for days in ("5", "1", "0", "-7", "7.0", "+7", "31", "seven", ""):
            self.assert_refused(["--gpu", "b200", "--days", days, "--lots", "1"], fragment="3, 7, 30")

    def test_bad_lots(self):
        for lots in ("0", "-1", "1.5", "1e3", "1,000", "1_000", " 1", "+1", "", "18446744073709551616"):
            self.assert_refused(["--gpu", "b200", "--days", "7", "--lots", lots], fragment="--lots")
        line = self.assert_refused(
            ["--gpu", "b200", "--days", "7", "--lots", "1.5"],
            fragment="invalid value '1.5' for '--lots <N>': must be a whole number of at least 1, written with the digits 0-9 only (write all the digits: no decimal point, exponent or separator)",
        )
        self.assertNotIn("7000000000", line)

    def test_abbreviated_flags_are_refused(self):
        for args in (
            ["--gpu", "b200", "--day", "7", "--lots", "1"],
            ["--gpu", "b200", "--days", "7", "--lot", "1"],
            ["--gpu", "b200", "--days", "7", "--lots", "1", "--acc", "5"],
            ["--gp", "b200", "--days", "7", "--lots", "1"],
        ):
            self.assert_refused(args)
        # the misspelt flag is named, not the required one it hides (as lab says)
        self.assert_refused(
            ["--gpu", "b200", "--day", "7", "--lots", "1"], fragment="unexpected argument '--day' found"
        )

    def test_bad_accepted_results(self):
        for results in ("0", "-3", "2.5", "1e2", "", "many"):
            self.assert_refused(
                ["--gpu", "b200", "--days", "7", "--lots", "1", "--accepted-results", results],
                fragment="--accepted-results",
            )

    def test_overflowing_total(self):
        self.assert_refused(["--gpu", "b200", "--days", "30", "--lots", "9223372036854775807"], fragment="64-bit")
        self.assert_refused(["--gpu", "b200", "--days", "30", "--lots", "18446744073709551615"], fragment="64-bit")

    def test_flag_problems(self):
        self.assert_refused(["--days", "7", "--lots", "1"], fragment="--gpu")
        self.assert_refused(["--gpu", "b200", "--lots", "1"], fragment="--days")
        self.assert_refused(["--gpu", "b200", "--days", "7"], fragment="--lots")
        self.assert_refused(["--gpu", "b200", "--days", "7", "--lots", "1", "--lots", "2"], fragment="multiple")
        self.assert_refused(["--gpu", "b200", "--days", "7", "--lots", "1", "--currency", "EUR"])
        self.assert_refused([])

    def test_unreadable_catalog_exits_1(self):
        self.assert_refused(["--gpu", "b200", "--days", "7", "--lots", "1", "--tariffs", "/nonexistent/tarifs.csv"], code=1)

    def test_catalog_that_is_not_a_small_regular_file_exits_2(self):
        base = ["--gpu", "b200", "--days", "7", "--lots", "1", "--tariffs"]
        self.assert_refused(base + [""], fragment="--tariffs")
        with tempfile.TemporaryDirectory() as folder:
            self.assert_refused(base + [folder], fragment="not a regular file")
            big = os.path.join(folder, "big.csv")
            with open(big, "wb") as stream:
                stream.write(catalog_bytes() + b"\n" * (1 << 20))
            self.assert_refused(base + [big], fragment="larger than 1048576 bytes (1 MiB)")
            # Exactly 1 MiB is read (trailing blank lines are accepted).
            edge = os.path.join(folder, "edge.csv")
            with open(edge, "wb") as stream:
                stream.write(catalog_bytes() + b"\n" * ((1 << 20) - len(catalog_bytes())))
            self.assertEqual(run(*base[:-1], "--tariffs", edge).returncode, 0)
        if os.path.exists("/dev/zero"):
            self.assert_refused(base + ["/dev/zero"], fragment="/dev/zero: not a regular file")

    def test_help_exits_0(self):
        done = run("--help")
        self.assertEqual(done.returncode, 0)
        self.assertIn("--accepted-results", done.stdout)


class CatalogValidation(unittest.TestCase):
    """The validator accepts harmless text variants and refuses every malformed catalog."""

    def setUp(self):
        """A temporary folder for catalog variants."""
        self.folder = tempfile.mkdtemp()

    def tearDown(self):
        """Removes the temporary folder."""
        shutil.rmtree(self.folder)

    def write(self, data, name="tarifs.csv"):
        """Writes ``data`` into the temporary folder and returns its path."""
        path = os.path.join(self.folder, name)
        with open(path, "wb") as stream:
            stream.write(data)
        return path

    def price_with(self, data):
        """Runs ``--gpu b200 --days 7 --lots 2 --json`` on catalog bytes ``data``."""
        return run("--gpu", "b200", "--days", "7", "--lots", "2", "--json", "--tariffs", self.write(data))

    def assert_invalid(self, data, fragment):
        """The catalog ``data`` is refused with exit 2 and a line containing ``fragment``."""
        done = self.price_with(data)
        self.assertEqual(done.returncode, 2, done.stdout + done.stderr)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertIn(fragment, done.stderr)
        self.assertEqual(done.stdout, "")

    def test_shipped_catalog_shape(self):
        rows = catalog_rows()
        self.assertEqual(rows[0][:5], list(cf.HEADER))
        self.assertEqual(len(rows) - 1, 45)
        self.assertEqual(len({row[0] for row in rows[1:]}), 15)
        self.assertEqual({(r[0], r[2]) for r in rows[1:] if r[0] == "b200"}, {("b200", "2")})

    def test_bom_crlf_blank_lines_and_extra_columns_are_accepted(self):
        records = catalog_rows()
        variants = [
            b"\xef\xbb\xbf" + catalog_bytes(),
            to_csv(records, line_end="\r\n"),
            catalog_bytes() + b"\n",
            to_csv(records, line_end="\r\n") + b"\r\n",
            to_csv([record + (["note"] if i else ["comment"]) for i, record in enumerate(records)]),
        ]
        for data in variants:
            done = self.price_with(data)
            self.assertEqual(done.returncode, 0, done.stderr)
            result = json.loads(done.stdout)
            self.assertEqual(result["total_cents"], 306432)
            self.assertEqual(result["catalog"]["sha256"], cf.hashlib.sha256(data).hexdigest())

    def test_malformed_catalogs_are_refused_with_the_line(self):
        records = catalog_rows()

        def changed(row, column, value):
            """The catalog with one field replaced (row 1 is the first data row)."""
            copy = [list(record) for record in records]
            copy[row][column] = value
            return to_csv(copy)

        cases = [
            (to_csv(records, delimiter=";"), "semicolons"),
            (to_csv(records + [records[5]]), "duplicate"),
            (to_csv(records[:3] + records[4:]), "no 30-day row"),
            (changed(2, 4, "12.50"), "line 3"),
            (changed(2, 4, "1,234"), "line 3"),
            (changed(2, 4, "0"), "price_cents"),
            (changed(2, 4, "-5"), "price_cents"),
            (changed(2, 4, ""), "price_cents"),
            (changed(2, 4, " 5586"), "price_cents"),
            (changed(38, 2, "3"), "lot size"),
            (changed(38, 1, "NVIDIA B200"), "called"),
            (changed(1, 3, "14"), "days must be one of 3, 7, 30"),
            (changed(1, 0, ""), "gpu must be"),
            (changed(1, 0, "t 4"), "gpu must be"),
            (changed(1, 1, " "), "model name"),
            (changed(0, 4, "price"), "header"),
            (to_csv(records[:-3]), "14 GPU models"),
            (to_csv(records[:1]), "no rows"),
            (b"", "empty"),
            (b"\n\n", "empty"),
            (catalog_bytes().replace(b"b200", b"b\xff200"), "UTF-8"),
            (catalog_bytes().replace(b"t4,NVIDIA T4 16 GB,1,3,2520", b"t4,NVIDIA T4 16 GB,1,3,2520,x"), "fields"),
            (catalog_bytes().replace(b"t4,NVIDIA T4 16 GB,1,3,2520", b'"t4,NVIDIA T4 16 GB,1,3,2520'), "line"),
        ]
        for data, fragment in cases:
            with self.subTest(fragment=fragment):
                self.assert_invalid(data, fragment)

    def test_price_with_a_thousands_separator_names_its_line(self):
        records = [list(record) for record in catalog_rows()]
        records[7][4] = "1,234"
        done = self.price_with(to_csv(records))
        self.assertIn("line 8", done.stderr)

    def test_line_breaks_cr_and_nul_name_the_line_where_the_row_starts(self):
        text = catalog_bytes()
        self.assert_invalid(text.replace(b"NVIDIA T4 16 GB,1,7,", b'"NVIDIA T4\n16 GB",1,7,', 1), "line 3: a field contains a line break")
        self.assert_invalid(text.replace(b"\n", b"\r"), "line 1: a carriage return without a line feed")
        self.assert_invalid(text.replace(b",5586\n", b",5586\rx\n", 1), "line 3: a carriage return")
        self.assert_invalid(text.replace(b"NVIDIA L4", b"NVIDIA\x00L4", 1), "line 5: a NUL character")
        blank = text.replace(b"\n", b"\n\n\n", 2).replace(b",5586\n", b",55.86\n", 1)
        self.assert_invalid(blank, "line 7: price_cents")

    def test_catalog_label_follows_the_content_not_the_bytes(self):
        text = catalog_bytes()
        crlf = json.loads(self.price_with(text.replace(b"\n", b"\r\n")).stdout)["catalog"]
        self.assertEqual(crlf["snapshot_date"], "2026-09-24")
        self.assertIs(crlf["illustrative"], True)
        self.assertEqual(crlf["sha256"], cf.hashlib.sha256(text.replace(b"\n", b"\r\n")).hexdigest())
        other_bytes = text.replace(b",2520\n", b",2999\n", 1)
        other = json.loads(self.price_with(other_bytes).stdout)["catalog"]
        self.assertIsNone(other["snapshot_date"])
        self.assertIs(other["illustrative"], False)
        path = self.write(other_bytes, "other.csv")
        done = run("--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", path)
        self.assertIn(f"catalog from {path} (snapshot date unknown)", done.stdout)
        self.assertNotIn("illustrative", done.stdout)
        self.assertNotIn("2026-09-24", done.stdout)

    def test_shipped_content_digest_is_recomputed_from_the_data_file(self):
        # Canonical form, written out independently of the script: rows sorted by gpu then
        # days, each the JSON array [gpu,model,gpus_per_lot,days,price_cents] and a newline.
        records = [record for record in catalog_rows()[1:] if record]
        self.assertEqual(len(records), 45)
        lines = sorted(
            (r[0], int(r[3]), json.dumps([r[0], r[1], int(r[2]), int(r[3]), int(r[4])], separators=(",", ":"), ensure_ascii=False))
            for r in records
        )
        canonical = "".join(line + "\n" for _, _, line in lines).encode("utf-8")
        self.assertEqual(cf.hashlib.sha256(canonical).hexdigest(), cf.SHIPPED_CONTENT_SHA256)
        rows, _ = cf.parse_catalog(catalog_bytes())
        self.assertEqual(cf.content_sha256(rows), cf.SHIPPED_CONTENT_SHA256)
        # The same constant as lab's.
        with open(os.path.join(ROOT, "lab", "src", "catalog.rs"), encoding="utf-8") as stream:
            self.assertIn(f'"{cf.SHIPPED_CONTENT_SHA256}"', stream.read())

    def test_parse_catalog_keeps_file_order(self):
        rows, sha256 = cf.parse_catalog(catalog_bytes())
        self.assertEqual(rows[0]["gpu"], "t4")
        self.assertEqual(rows[0]["line"], 2)
        self.assertEqual(len(sha256), 64)


class CatalogLookup(unittest.TestCase):
    """Default catalog: beside the script, else ../data/ (repository layout), else exit 1."""

    def test_kit_layout_reads_the_file_beside_the_script(self):
        with tempfile.TemporaryDirectory() as kit:
            shutil.copy(SCRIPT, kit)
            shutil.copy(CATALOG, kit)
            done = run("--gpu", "h200", "--days", "3", "--lots", "1", "--json", script=os.path.join(kit, "calcul_forfaits.py"), cwd="/")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(json.loads(done.stdout)["total_cents"], 23040)

    def test_repository_layout_falls_back_to_data(self):
        done = run("--gpu", "h200", "--days", "3", "--lots", "1", "--json", cwd="/")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["catalog"]["sha256"], cf.hashlib.sha256(catalog_bytes()).hexdigest())

    def test_missing_catalog_exits_1_with_a_hint(self):
        with tempfile.TemporaryDirectory() as alone:
            shutil.copy(SCRIPT, alone)
            done = run("--gpu", "h200", "--days", "3", "--lots", "1", script=os.path.join(alone, "calcul_forfaits.py"))
            self.assertEqual(done.returncode, 1)
            self.assertIn("--tariffs", done.stderr)
            self.assertEqual(len(done.stderr.splitlines()), 1)


class ControlCharacters(unittest.TestCase):
    """Messages quoting user input escape control characters as ``lab`` does (Rust's
    ``char::escape_default``): one line, no escape sequence reaching the terminal."""

    def assert_clean_refusal(self, args, code, fragment):
        """Exit ``code``, one stderr line free of control characters, containing ``fragment``."""
        done = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, check=False)
        self.assertEqual(done.returncode, code, done.stderr)
        self.assertEqual(done.stdout, b"")
        stderr = done.stderr.decode("utf-8")
        self.assertTrue(stderr.endswith("\n"), stderr)
        line = stderr[:-1]
        self.assertTrue(line.startswith("calcul_forfaits.py: error: "), line)
        controls = [char for char in line if ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F]
        self.assertEqual(controls, [], line)
        self.assertIn(fragment, line)

    def test_escape_sequences_in_flags_are_escaped_like_lab(self):
        base = {"--gpu": "b200", "--days": "7", "--lots": "1"}
        cases = [
            ("--gpu", "b2\x1b[31m00", 2, "unknown GPU 'b2\\u{1b}[31m00'; valid ids: "),
            ("--gpu", "b2\n00", 2, "unknown GPU 'b2\\n00'"),
            ("--days", "7\x1b", 2, "invalid value '7\\u{1b}' for '--days <D>': must be one of 3, 7, 30 (packages are not pro-rated)"),
            ("--days", "\x1b[2J7", 2, "invalid value '\\u{1b}[2J7' for '--days <D>'"),
            ("--lots", "1\x1b", 2, "invalid value '1\\u{1b}' for '--lots <N>': must be a whole number of at least 1, written with the digits 0-9 only"),
            ("--lots", "1\n2\t\x7f\x85\r", 2, "invalid value '1\\n2\\t\\u{7f}\\u{85}\\r' for '--lots <N>'"),
            ("--accepted-results", "\x07", 2, "invalid value '\\u{7}' for '--accepted-results <K>': must be a whole number of at least 1, written with the digits 0-9 only"),
            ("--tariffs", "/no/such/\x1b[31m.csv", 1, "cannot read catalog /no/such/\\u{1b}[31m.csv: "),
        ]
        for flag, value, code, fragment in cases:
            with self.subTest(flag=flag, value=value):
                args = dict(base, **{flag: value})
                self.assert_clean_refusal([item for pair in args.items() for item in pair], code, fragment)

    def test_usage_errors_are_escaped_too(self):
        self.assert_clean_refusal(
            ["--gpu", "b200", "--days", "7", "--lots", "1", "--x\x1b[0m"], 2, "unrecognized arguments: --x\\u{1b}[0m"
        )

    def test_one_line_is_rust_escape_default_on_control_characters(self):
        self.assertEqual(cf.one_line("a\tb\nc\rd"), "a\\tb\\nc\\rd")
        self.assertEqual(cf.one_line("\x00\x01\x1b\x1f\x7f\x80\x9f"), "\\u{0}\\u{1}\\u{1b}\\u{1f}\\u{7f}\\u{80}\\u{9f}")
        # Printable text, backslashes, quotes and non-ASCII letters are kept as they are.
        kept = "b200 'x' \"y\" \\u{1b} \u00e9\u00a0\u2030 \U0001f600"
        self.assertEqual(cf.one_line(kept), kept)
        # Escaping twice changes nothing more.
        once = cf.one_line("x\x1b\ny")
        self.assertEqual(cf.one_line(once), once)
        # An argument byte that is not UTF-8 (a lone surrogate) becomes U+FFFD, as in lab.
        self.assertEqual(cf.one_line("a\udcffb"), "a\ufffdb")
        self.assertEqual(str(cf.PriceError("got 'x\x1b\ny'")), "got 'x\\u{1b}\\ny'")



class InputClasses(unittest.TestCase):
    """Input classes where the twins once disagreed with lab (lab/tests/differential/ checks
    the same inputs against lab): integers of any length, byte-order marks and encodings,
    control and format characters, the default catalog's name."""

    def write(self, data):
        """Writes catalog bytes to a temporary file and returns its path."""
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        path = os.path.join(folder, "tariffs.csv")
        with open(path, "wb") as stream:
            stream.write(data)
        return path

    def refused(self, args, fragment):
        """``args`` exits 2 with one stderr line containing ``fragment`` and no traceback."""
        done = run(*args)
        self.assertEqual(done.returncode, 2, done.stderr[-500:])
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr[-500:])
        self.assertNotIn("Traceback", done.stderr)
        self.assertIn(fragment, done.stderr)
        self.assertEqual(done.stdout, "")
        return done.stderr

    def test_integers_past_the_conversion_limit_are_too_large(self):
        for value in ("9" * 4400, "1" + "0" * 5000, "9" * 100_000):
            with self.subTest(digits=len(value)):
                base = {"--gpu": "t4", "--days": "3", "--lots": "1"}
                for flag, fragment in (
                    ("--lots", "for '--lots <N>': must be a whole number from 1 to 18446744073709551615"),
                    ("--days", "for '--days <D>': must be one of 3, 7, 30 (packages are not pro-rated)"),
                    ("--accepted-results", "for '--accepted-results <K>': must be a whole number from 1 to 18446744073709551615"),
                ):
                    args = dict(base, **{flag: value})
                    self.refused([item for pair in args.items() for item in pair], fragment)
        self.assertIsNone(cf.whole_number("9" * 5000, cf.U64_MAX))
        self.assertEqual(cf.whole_number("0" * 5000 + "7", 30), 7)
        self.assertEqual(cf.whole_number("0" * 5000, 30), 0)
        self.assertEqual(cf.whole_number("18446744073709551615", cf.U64_MAX), cf.U64_MAX)
        self.assertIsNone(cf.whole_number("18446744073709551616", cf.U64_MAX))

    def test_leading_zeros_of_any_length_are_the_number(self):
        zeros = "0" * 5000
        done = run("--gpu", "t4", "--days", zeros + "3", "--lots", zeros + "2", "--accepted-results", zeros + "4", "--json")
        self.assertEqual(done.returncode, 0, done.stderr[-300:])
        result = json.loads(done.stdout)
        self.assertEqual((result["days"], result["lots"], result["accepted_results"]), (3, 2, 4))
        self.assertEqual(result["total_cents"], 5040)

    def test_long_integers_in_a_catalog_are_refused_with_their_line(self):
        text = catalog_bytes()
        nines = b"9" * 4400
        for data, fragment in (
            (text.replace(b",2520\n", b"," + nines + b"\n", 1), "line 2: price_cents must be a whole number"),
            (text.replace(b",1,3,2520\n", b"," + nines + b",3,2520\n", 1), "line 2: gpus_per_lot must be a whole number"),
            (text.replace(b",1,3,2520\n", b",1,3" + nines + b",2520\n", 1), "line 2: days must be one of 3, 7, 30"),
        ):
            self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(data)], fragment)

    def test_one_byte_order_mark_is_allowed_a_second_is_content(self):
        bom = b"\xef\xbb\xbf"
        done = run("--gpu", "t4", "--days", "3", "--lots", "1", "--json", "--tariffs", self.write(bom + catalog_bytes()))
        self.assertEqual(done.returncode, 0, done.stderr)
        for marks in (2, 3):
            line = self.refused(
                ["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(bom * marks + catalog_bytes())],
                "line 1: the file starts with a second byte-order mark (U+FEFF); keep at most one",
            )
            self.assertNotIn("\ufeff", line)
        # A mark at the start of a row is a hidden character in the id, shown escaped.
        data = catalog_bytes().replace(b"\nt4,", b"\n" + bom + b"t4,", 1)
        line = self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(data)], "line 2: gpu contains U+FEFF")
        self.assertIn("found '\\u{feff}t4'", line)

    def test_other_encodings_are_named_with_a_hint(self):
        text = catalog_bytes().decode("utf-8")
        hint = 'save it as UTF-8 CSV (spreadsheet: Save As, "CSV UTF-8"; text editor: encoding UTF-8)'
        latin = text.replace("NVIDIA A10", "NVIDIA A10 r\u00e9serv\u00e9").encode("latin-1")
        cases = (
            (text.encode("utf-16"), "line 1: the catalog looks like UTF-16 text (it starts with bytes FF FE)"),
            (b"\xfe\xff" + text.encode("utf-16-be"), "line 1: the catalog looks like UTF-16 text (it starts with bytes FE FF)"),
            (text.encode("utf-16-le"), "(it starts with bytes 67 00)"),
            (text.encode("utf-16-be"), "(it starts with bytes 00 67)"),
            (latin, "the catalog is not UTF-8 text (byte E9); it looks like Latin-1 or Windows-1252"),
            (text.replace("NVIDIA L4", "NVIDIA L4 \u20ac").encode("cp1252"), "(byte 80)"),
        )
        for data, fragment in cases:
            with self.subTest(fragment=fragment):
                line = self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(data)], fragment)
                self.assertTrue(line.rstrip("\n").endswith(hint), line)
        # The line of the first byte that is not UTF-8.
        first_a10 = 1 + next(i for i, row in enumerate(text.splitlines()) if "NVIDIA A10" in row)
        self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(latin)], f"line {first_a10}: ")

    def test_a_row_separated_by_semicolons_gets_the_hint(self):
        lines = catalog_bytes().decode("utf-8").splitlines()
        for index in (1, 6, 45):
            changed = list(lines)
            changed[index] = changed[index].replace(",", ";")
            data = ("\n".join(changed) + "\n").encode("utf-8")
            with self.subTest(line=index + 1):
                self.refused(
                    ["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(data)],
                    f"line {index + 1}: expected 5 fields like the header, found 1 (fields must be separated by commas, not semicolons",
                )

    def test_hidden_characters_in_ids_and_model_names_are_refused(self):
        text = catalog_bytes().decode("utf-8")
        for char in ("\x1c", "\x1d", "\x1e", "\x1f", "\x1b", "\t", "\x7f", "\x85", "\x9b", "\xad", "\u200b", "\u202e", "\u2028", "\u2029", "\ufeff", "\U000e0041"):
            code = f"U+{ord(char):04X}"
            with self.subTest(char=code):
                model = text.replace("NVIDIA T4 16 GB", f"NVIDIA{char}T4").encode("utf-8")
                line = self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(model)], f"line 2: model name contains {code}, a control or format character")
                self.assertFalse(any(cf._HIDDEN.match(c) for c in line.rstrip("\n")), repr(line))
                gpu = text.replace("\nt4,", f"\nt{char}4,").encode("utf-8")
                self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(gpu)], f"line 2: gpu contains {code}")
        for space in ("\xa0", "\u3000", "\u2003", " "):
            gpu = text.replace("\nt4,", f"\nt{space}4,").encode("utf-8")
            self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(gpu)], "line 2: gpu must be a non-empty identifier without spaces")
            model = text.replace("NVIDIA T4 16 GB", space * 3).encode("utf-8")
            self.refused(["--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", self.write(model)], "line 2: model name is empty")
        # Inner spaces of any kind and accents are visible text: accepted.
        for model in ("NVIDIA\u00a0T4", "NVIDIA\u3000T4", " R\u00e9serv\u00e9 "):
            data = text.replace("NVIDIA T4 16 GB", model).encode("utf-8")
            done = run("--gpu", "t4", "--days", "3", "--lots", "1", "--json", "--tariffs", self.write(data))
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(json.loads(done.stdout)["model"], model)

    def test_the_character_rule_is_explicit(self):
        import unicodedata

        hidden = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF and cf._HIDDEN.match(chr(c))]
        self.assertEqual(len(hidden), 32 + 1 + 32 + 2 + 170)
        # Every hidden character is a control, a separator of lines/paragraphs or a format
        # character in this Python's Unicode database (15.1's list may be newer than it).
        for code in hidden:
            category = unicodedata.category(chr(code))
            self.assertIn(category, ("Cc", "Cf", "Zl", "Zp", "Cn"), hex(code))
        for char in cf.SPACES:
            self.assertEqual(unicodedata.category(char), "Zs", repr(char))
        # Not Python's whitespace (which counts U+001C..U+001F): those are hidden, not spaces.
        self.assertFalse(any(c in cf.SPACES for c in "\x1c\x1d\x1e\x1f\t\n\x85"))

    def test_text_and_json_output_show_no_hidden_character(self):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        path = os.path.join(folder, "tarifs \x1b[2J\u202e\u200b.csv")
        shutil.copy(CATALOG, path)
        done = run("--gpu", "t4", "--days", "3", "--lots", "1", "--tariffs", path)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("tarifs \\u{1b}[2J\\u{202e}\\u{200b}.csv", done.stdout)
        self.assertFalse(any(cf._HIDDEN.match(c) for c in done.stdout.replace("\n", "")), repr(done.stdout))
        self.assertEqual(cf.json_visible('{"m": "a\u202e\x9b\U000e0041"}'), '{"m": "a\\u202e\\u009b\\udb40\\udc41"}')
        self.assertEqual(json.loads(cf.json_visible(json.dumps({"m": "\u2028\xad"}, indent=2, ensure_ascii=False))), {"m": "\u2028\xad"})

    def test_the_default_catalog_is_named_without_the_home_folder(self):
        done = run("--gpu", "t4", "--days", "3", "--lots", "1", cwd="/")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("catalog from ../data/tarifs-forfaits.csv relative to the folder of calcul_forfaits.py,", done.stdout)
        self.assertNotIn(ROOT, done.stdout)
        with tempfile.TemporaryDirectory() as kit:
            shutil.copy(SCRIPT, kit)
            shutil.copy(CATALOG, kit)
            done = run("--gpu", "t4", "--days", "3", "--lots", "1", script=os.path.join(kit, "calcul_forfaits.py"), cwd="/")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("catalog from tarifs-forfaits.csv beside calcul_forfaits.py,", done.stdout)
            self.assertNotIn(kit, done.stdout)
            # A default catalog that is refused is named the same way.
            with open(os.path.join(kit, "tarifs-forfaits.csv"), "ab") as stream:
                stream.write(b"x\n")
            done = run("--gpu", "t4", "--days", "3", "--lots", "1", script=os.path.join(kit, "calcul_forfaits.py"), cwd="/")
            self.assertEqual(done.returncode, 2)
            self.assertTrue(done.stderr.startswith("calcul_forfaits.py: error: catalog tarifs-forfaits.csv beside calcul_forfaits.py: line 47"), done.stderr)
            self.assertNotIn(kit, done.stderr)


if __name__ == "__main__":
    unittest.main()
