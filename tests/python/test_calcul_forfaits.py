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
    """SPEC section 5's examples and the rounding rules."""

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
        self.assertEqual(list(result["catalog"]), ["snapshot_date", "sha256", "embedded"])
        self.assertEqual(result["catalog"]["snapshot_date"], "2026-09-24")
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
        self.assertIn("illustrative", done.stdout)


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


if __name__ == "__main__":
    unittest.main()
