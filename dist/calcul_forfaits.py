#!/usr/bin/env python3
"""IteraGPU Lab v1: price of an IteraGPU package and cost per accepted result.

Python 3.10 or later, standard library only. The Python twin of ``lab price``: same flags,
same validation, same rounding, same exit codes and the same ``--json`` keys.

    python calcul_forfaits.py --gpu b200 --days 7 --lots 2 [--accepted-results K] [--json]

* Prices come from ``tarifs-forfaits.csv``: the file beside this script by default (in the
  repository, ``../data/tarifs-forfaits.csv``), or ``--tariffs FILE``. The catalog is
  validated strictly (15 GPU models x 3, 7 and 30 days, whole positive cents per lot).
* total = lot price x lots; GPUs = GPUs per lot x lots. No pro-rata, no currency conversion.
* ``--accepted-results`` has no default; given, unit cost = package total / accepted
  results in USD, rounded half to even to 6 decimals. Absent, the unit cost is null.
* Exit codes: 0 success; 2 bad input or invalid catalog (one line on stderr), including a
  catalog path that is empty, not a regular file or larger than 1 MiB; 1 catalog file that
  is missing or cannot be read, or standard output that cannot be written.
"""

import argparse
import csv
import hashlib
import io
import json
import os
import re
import stat
import sys

SNAPSHOT_DATE = "2026-09-24"
DURATIONS = (3, 7, 30)
MODEL_COUNT = 15
HEADER = ("gpu", "model", "gpus_per_lot", "days", "price_cents")
CATALOG_NAME = "tarifs-forfaits.csv"
# SHA-256 of the *content* of the shipped catalog (its rows in the canonical form of
# content_sha256), the same constant as lab's catalog::SHIPPED_CONTENT_SHA256. A catalog with
# these rows, whatever its bytes (BOM, CRLF, row order, extra columns), carries SNAPSHOT_DATE;
# while SHIPPED_IS_ILLUSTRATIVE is true it is also labelled illustrative. Any other content
# carries no date.
SHIPPED_CONTENT_SHA256 = "d402c41982dbc5220353c1c15900bc78a2220a8105b3dde18f85cbe7218ac044"
SHIPPED_IS_ILLUSTRATIVE = True
# Largest catalog file read (1 MiB; the real catalog is about 2 KB).
MAX_CATALOG_BYTES = 1 << 20
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
I64_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]+")


# One explicit character rule, the same as lab's (lab/src/text.rs), not what Python calls
# whitespace (str.isspace() also counts U+001C..U+001F): *hidden* characters are the C0
# controls, DEL, the C1 controls, U+2028, U+2029 and the Unicode 15.1 format characters
# (general category Cf); *spaces* are the Unicode 15.1 space separators (general category Zs).
_FORMAT_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)
_HIDDEN_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029)) + _FORMAT_RANGES
SPACES = frozenset(
    "\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000"
)
# Hidden characters, plus lone surrogates (command-line bytes that are not UTF-8).
_HIDDEN = re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _HIDDEN_RANGES) + "\ud800-\udfff]")
# What json_visible escapes: the hidden characters above U+001F.
_JSON_HIDDEN = re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _HIDDEN_RANGES[1:]) + "]")
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
    hidden characters (``\\u{202e}``, ``\\u{feff}``...). Text quoting user input or a file thus
    stays one line, shows what it holds and sends no escape sequence to the terminal.
    Backslashes and visible text are kept as they are; a command-line byte that is not UTF-8
    (a lone surrogate in Python) becomes U+FFFD, as in ``lab``.
    """
    return _HIDDEN.sub(_escape_one, str(text))


def json_visible(text):
    """JSON text with every hidden character that ``json.dumps`` left raw written as a JSON
    escape (``\\u202e``; a surrogate pair above U+FFFF), as ``lab`` prints JSON: the value is
    unchanged, the terminal gets no control or format character. C0 controls are left alone:
    ``json.dumps`` escapes them in strings, and outside strings they are layout."""

    def escape(match):
        """The JSON escape of one character, as UTF-16 code units."""
        data = match.group().encode("utf-16-be", "surrogatepass")
        return "".join(f"\\u{int.from_bytes(data[i:i + 2], 'big'):04x}" for i in range(0, len(data), 2))

    return _JSON_HIDDEN.sub(escape, text)


class PriceError(Exception):
    """A failure reported as one line: exit code 2 for bad input, 1 for an unreadable file."""

    def __init__(self, message, exit_code=2):
        """Keeps the message, control characters escaped (see ``one_line``), and the exit code."""
        super().__init__(one_line(message))
        self.exit_code = exit_code


def print_error(message):
    """Prints ``calcul_forfaits.py: error: MESSAGE`` on stderr as one line: every message of
    this script goes through here, control characters escaped (see ``one_line``)."""
    # A standard error that cannot be written (2>/dev/full) must not change the exit code.
    try:
        print(f"calcul_forfaits.py: error: {one_line(message)}", file=sys.stderr, flush=True)
    except OSError:
        pass


def durations_list():
    """The valid durations as text: ``3, 7, 30``."""
    return ", ".join(str(days) for days in DURATIONS)


def _is_digits(text):
    """Whether ``text`` is one or more ASCII digits and nothing else."""
    return bool(_DIGITS.fullmatch(text))


def whole_number(text, maximum):
    """The value of ``text`` when it is ASCII digits only (leading zeros allowed) and at most
    ``maximum``, else None.

    The length is checked before converting: Python refuses to convert more than 4300 digits
    (a traceback), while a long number is simply too large, as ``lab`` says.
    """
    if not _is_digits(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


# Rust's char::is_whitespace (Unicode White_Space), which lab's number rule uses for its
# "(no spaces)" hint.
_WHITE_SPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000"
    + "".join(chr(code) for code in range(0x2000, 0x200B))
)
# The value name lab shows for each flag of `lab price` (lab/src/cli/mod.rs, value_name).
FLAG_METAVARS = {"--days": "D", "--lots": "N", "--accepted-results": "K"}


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


def positive_integer(flag, text, maximum):
    """Parses a flag value made of ASCII digits only, from 1 to ``maximum``.

    Raises PriceError (exit 2) for zero, signs, decimals, exponents, separators, spaces or
    a number too large (however many digits), with ``lab``'s message (lab/src/values.rs,
    ``whole``).
    """
    value = whole_number(text, maximum)
    if value is not None and value >= 1:
        return value
    span = "of at least 1" if maximum == U64_MAX else f"from 1 to {maximum}"
    if _is_digits(text):
        reason = f"must be a whole number {span}" if value == 0 else f"must be a whole number from 1 to {maximum}"
    else:
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
        reason = f"must be a whole number {span}, written with the digits 0-9 only{hint}"
    raise PriceError(flag_refusal(flag, text, reason))


def parse_days(text):
    """Parses ``--days``: 3, 7 or 30 written in digits; anything else lists the valid ones."""
    days = whole_number(text, max(DURATIONS))
    if days in DURATIONS:
        return days
    raise PriceError(flag_refusal("--days", text, f"must be one of {durations_list()} (packages are not pro-rated)"))


def _catalog_integer(text, maximum):
    """A catalog field of ASCII digits with a value from 1 to ``maximum``, else None."""
    value = whole_number(text, maximum)
    return value if value is not None and value >= 1 else None


# The hint for a row whose fields are separated by semicolons (a spreadsheet's CSV export
# in some languages), and how to get a UTF-8 catalog: the same words as lab's.
SEMICOLONS = " (fields must be separated by commas, not semicolons: save the file as CSV with comma separators)"
SAVE_AS_UTF8 = 'save it as UTF-8 CSV (spreadsheet: Save As, "CSV UTF-8"; text editor: encoding UTF-8)'


def _decode(body):
    """The text of catalog bytes whose one optional UTF-8 byte-order mark is already removed.

    Raises PriceError (exit 2) naming the line and the encoding the bytes look like, as
    ``lab`` does: UTF-16 (a UTF-16 byte-order mark ``FF FE`` or ``FE FF``, or a zero byte
    among the first two, as ASCII text in UTF-16 has), a second byte-order mark (U+FEFF is
    then content, which no header starts with), or bytes that are not UTF-8 (a single-byte
    encoding such as Latin-1 or Windows-1252).
    """
    if len(body) >= 2:
        first, second = body[0], body[1]
        if (first, second) in ((0xFF, 0xFE), (0xFE, 0xFF)) or (first == 0) != (second == 0):
            raise PriceError(
                f"line 1: the catalog looks like UTF-16 text (it starts with bytes {first:02X} {second:02X}), "
                f"not UTF-8: {SAVE_AS_UTF8}"
            )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as error:
        line = 1 + body.count(b"\n", 0, error.start)
        raise PriceError(
            f"line {line}: the catalog is not UTF-8 text (byte {body[error.start]:02X}); it looks like Latin-1 or "
            f"Windows-1252: {SAVE_AS_UTF8}"
        ) from None
    if text.startswith("\ufeff"):
        raise PriceError(f"line 1: the file starts with a second byte-order mark (U+FEFF); keep at most one: {SAVE_AS_UTF8}")
    return text


def _check_text(line, what, value):
    """Refuses (PriceError, exit 2) a ``what`` field holding a hidden character (a control or
    format character, see ``one_line``), naming it as ``U+XXXX``, as ``lab`` does."""
    found = _HIDDEN.search(value)
    if found:
        raise PriceError(
            f"line {line}: {what} contains U+{ord(found.group()):04X}, a control or format character; "
            f"remove it, found '{value}'"
        )


def parse_catalog(data):
    """Validates catalog bytes and returns ``(rows, sha256)``; rows are dicts in file order.

    Accepts UTF-8 with at most one byte-order mark (UTF-16, Latin-1 and a second mark are
    refused with a hint, see ``_decode``), LF or CRLF line ends and blank lines. Checks,
    naming the line: the header (must start with gpu,model,gpus_per_lot,days,price_cents),
    the field count of every row, non-empty ids without spaces and model names not only
    spaces, neither holding a hidden character (see ``one_line``), whole positive
    ``gpus_per_lot`` and ``price_cents`` (``12.50``, ``1,234``, ``0``, ``-5`` refused),
    durations 3/7/30, no duplicate model/duration, one lot size and one name per model,
    every model offered for every duration, exactly 15 models. Raises PriceError (exit 2).
    """
    sha256 = hashlib.sha256(data).hexdigest()
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    text = _decode(body)
    # Lines are counted at each line feed (LF or CRLF ends), as lab does; a carriage return
    # alone or a NUL is refused with its line.
    for match in re.finditer(r"\r(?!\n)|\x00", text):
        line = 1 + text.count("\n", 0, match.start())
        what = "a NUL character" if match.group() == "\x00" else "a carriage return without a line feed (end lines with LF or CRLF)"
        raise PriceError(f"line {line}: {what}")
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CATALOG_BYTES + 1))
    reader = csv.reader(io.StringIO(text, newline=""))
    records = []
    start = 1
    try:
        for record in reader:
            # A record starts on the line after the previous one ended (blank lines are
            # empty records): the line lab reports.
            if record:
                if any("\n" in field or "\r" in field for field in record):
                    raise PriceError(f"line {start}: a field contains a line break; each row must be on one line")
                records.append((start, record))
            start = reader.line_num + 1
    except csv.Error as error:
        raise PriceError(f"line {start}: {error}") from None
    if not records:
        raise PriceError(f"the file is empty; expected a header starting {','.join(HEADER)}")
    header_line, header = records[0]
    width = len(header)
    if width < len(HEADER) or tuple(header[: len(HEADER)]) != HEADER:
        found = ",".join(header)
        hint = SEMICOLONS if ";" in found else ""
        shown = found if len(found) <= 80 else found[:80] + "..."
        raise PriceError(f"line {header_line}: the header must start with {','.join(HEADER)}, found '{shown}'{hint}")
    rows = []
    for line, record in records[1:]:
        if len(record) != width:
            hint = ""
            if any(";" in field for field in record):
                hint = SEMICOLONS
            elif len(record) > width:
                hint = " (a price must be written without separators, e.g. 1234 not 1,234)"
            raise PriceError(f"line {line}: expected {width} fields like the header, found {len(record)}{hint}")
        gpu, model = record[0], record[1]
        _check_text(line, "gpu", gpu)
        if not gpu or any(char in SPACES for char in gpu):
            raise PriceError(f"line {line}: gpu must be a non-empty identifier without spaces, found '{identifier(gpu)}'")
        _check_text(line, "model name", model)
        if all(char in SPACES for char in model):
            raise PriceError(f"line {line}: model name is empty")
        gpus_per_lot = _catalog_integer(record[2], U32_MAX)
        if gpus_per_lot is None:
            raise PriceError(f"line {line}: gpus_per_lot must be a whole number from 1 to {U32_MAX}, found '{record[2]}'")
        days = whole_number(record[3], max(DURATIONS))
        if days not in DURATIONS:
            raise PriceError(f"line {line}: days must be one of {durations_list()}, found '{record[3]}'")
        price_cents = _catalog_integer(record[4], I64_MAX)
        if price_cents is None:
            raise PriceError(
                f"line {line}: price_cents must be a whole number of cents from 1 to {I64_MAX}, found '{record[4]}'"
            )
        for previous in (row for row in rows if row["gpu"] == gpu):
            if previous["days"] == days:
                raise PriceError(f"line {line}: duplicate entry for {gpu} {days} days (first on line {previous['line']})")
            if previous["gpus_per_lot"] != gpus_per_lot:
                raise PriceError(
                    f"line {line}: {gpu} has {gpus_per_lot} GPUs per lot here but {previous['gpus_per_lot']} on "
                    f"line {previous['line']}; the lot size must be the same for every duration"
                )
            if previous["model"] != model:
                raise PriceError(f"line {line}: {gpu} is called '{model}' here but '{previous['model']}' on line {previous['line']}")
        rows.append(
            {"gpu": gpu, "model": model, "gpus_per_lot": gpus_per_lot, "days": days, "price_cents": price_cents, "line": line}
        )
    if not rows:
        raise PriceError(f"line {header_line}: the catalog has a header but no rows")
    first_line = {}
    offered = {}
    for row in rows:
        first_line.setdefault(row["gpu"], row["line"])
        offered.setdefault(row["gpu"], set()).add(row["days"])
    for gpu, line in first_line.items():
        missing = [days for days in DURATIONS if days not in offered[gpu]]
        if missing:
            raise PriceError(f"line {line}: {gpu} has no {missing[0]}-day row (every model needs {durations_list()} days)")
    if len(first_line) != MODEL_COUNT:
        raise PriceError(
            f"the catalog lists {len(first_line)} GPU models ({len(rows)} rows); expected {MODEL_COUNT} models x "
            f"{len(DURATIONS)} durations = {MODEL_COUNT * len(DURATIONS)} rows"
        )
    return rows, sha256


def content_sha256(rows):
    """SHA-256 of catalog rows in canonical form, the same as lab's ``catalog::content_sha256``.

    The rows sorted by ``gpu`` then ``days``, each written as the JSON array
    ``[gpu,model,gpus_per_lot,days,price_cents]`` without spaces (non-ASCII kept as UTF-8)
    and followed by a line feed; extra columns are not part of it.
    """
    lines = [
        json.dumps([row["gpu"], row["model"], row["gpus_per_lot"], row["days"], row["price_cents"]], separators=(",", ":"), ensure_ascii=False)
        + "\n"
        for row in sorted(rows, key=lambda row: (row["gpu"], row["days"]))
    ]
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def catalog_info(rows, sha256):
    """The ``catalog`` object of the JSON output for validated ``rows`` read as bytes hashing to ``sha256``."""
    shipped = content_sha256(rows) == SHIPPED_CONTENT_SHA256
    return {
        "snapshot_date": SNAPSHOT_DATE if shipped else None,
        "sha256": sha256,
        "embedded": False,
        "illustrative": SHIPPED_IS_ILLUSTRATIVE and shipped,
    }


def describe_catalog(info, path):
    """One phrase for the text output saying where the prices come from (as ``lab`` says)."""
    origin = "catalog" if path == "-" else f"catalog from {path}"  # "-": standard input
    if info["illustrative"]:
        return f"{origin}, illustrative prices (stand-ins for the {SNAPSHOT_DATE} snapshot)"
    if info["snapshot_date"] is not None:
        return f"{origin}, snapshot {info['snapshot_date']}"
    return f"{origin} (snapshot date unknown)"


def default_catalog_path():
    """The catalog beside this script, else the repository's ``../data/`` copy; None if neither."""
    found = _default_catalog()
    return None if found is None else found[0]


def _default_catalog():
    """``(path, shown)`` of the default catalog (see ``default_catalog_path``), or None.

    ``shown`` is what messages print: the path relative to this script's folder, never the
    absolute path, which would show the home folder and so the user name.
    """
    here = os.path.dirname(os.path.abspath(__file__))
    for relative in (CATALOG_NAME, os.path.join(os.pardir, "data", CATALOG_NAME)):
        candidate = os.path.join(here, relative)
        if os.path.isfile(candidate):
            where = "beside" if relative == CATALOG_NAME else "relative to the folder of"
            return os.path.normpath(candidate), f"{relative} {where} calcul_forfaits.py"
    return None


def load_catalog(path=None):
    """Reads and validates the catalog; returns ``(rows, info)``.

    ``info`` is the ``catalog`` object of the JSON output: ``snapshot_date`` (the shipped
    snapshot's date when the rows are the shipped catalog's, else None), ``sha256`` of the
    file's bytes, ``embedded`` (always false here: this script reads a file; only ``lab``
    carries a compiled-in copy) and ``illustrative``. Raises PriceError: exit 1 if the file
    is missing or cannot be read; exit 2 for an empty path, a path that is not a regular file
    (``/dev/zero``, a folder, a pipe), a file over 1 MiB, or content that is not a valid
    catalog.
    """
    path, shown = _resolve_catalog(path)
    return _load_catalog(path, shown)


def _load_catalog(path, shown):
    """``load_catalog`` for the file at ``path``, named ``shown`` in messages; ``-`` is
    standard input, as for lab."""
    if path == "-":
        try:
            data = sys.stdin.buffer.read(MAX_CATALOG_BYTES + 1) if sys.stdin is not None else b""
        except OSError as error:
            raise PriceError(
                f"cannot read the catalog from standard input: {error.strerror or error}", exit_code=1
            ) from None
        if len(data) > MAX_CATALOG_BYTES:
            raise PriceError(f"the catalog on standard input is larger than {MAX_CATALOG_BYTES} bytes")
        try:
            rows, sha256 = parse_catalog(data)
        except PriceError as error:
            raise PriceError(f"catalog (standard input): {error}") from None
        return rows, catalog_info(rows, sha256)
    try:
        info = os.stat(path)
    except OSError as error:
        raise PriceError(f"cannot read catalog {shown}: {error.strerror or error}", exit_code=1) from None
    if not stat.S_ISREG(info.st_mode):
        raise PriceError(f"catalog {shown}: not a regular file (a catalog is a CSV file, not a folder, device or pipe)")
    too_large = f"catalog {shown}: larger than {MAX_CATALOG_BYTES} bytes (1 MiB); a catalog is a CSV file of a few KB"
    if info.st_size > MAX_CATALOG_BYTES:
        raise PriceError(too_large)
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_CATALOG_BYTES + 1)
    except OSError as error:
        raise PriceError(f"cannot read catalog {shown}: {error.strerror or error}", exit_code=1) from None
    if len(data) > MAX_CATALOG_BYTES:
        raise PriceError(too_large)
    try:
        rows, sha256 = parse_catalog(data)
    except PriceError as error:
        raise PriceError(f"catalog {shown}: {error}") from None
    return rows, catalog_info(rows, sha256)


def resolve_catalog_path(path=None):
    """``path``, or the default catalog when None. Raises PriceError: exit 2 for an empty
    path, exit 1 when no default catalog is found."""
    return _resolve_catalog(path)[0]


def _resolve_catalog(path=None):
    """``(path, shown)``: the catalog to read and how messages name it (a typed path as
    typed; the default catalog relative to this script, see ``_default_catalog``). Raises
    PriceError as ``resolve_catalog_path``."""
    if path == "":
        raise PriceError("--tariffs needs a catalog file name, got an empty one")
    if path is not None:
        return path, path
    found = _default_catalog()
    if found is None:
        raise PriceError(
            f"{CATALOG_NAME} not found beside calcul_forfaits.py: keep the kit's files together or give --tariffs FILE",
            exit_code=1,
        )
    return found


def round_half_even_ratio(numerator, denominator):
    """``numerator / denominator`` (non-negative integers) rounded to an integer, ties to even."""
    quotient, remainder = divmod(numerator, denominator)
    twice = 2 * remainder
    if twice > denominator or (twice == denominator and quotient % 2 == 1):
        quotient += 1
    return quotient


def cents_to_usd(cents):
    """A whole number of cents (>= 0) as dollars with exactly 2 decimals: 306432 -> 3064.32."""
    return f"{cents // 100}.{cents % 100:02d}"


def unit_cost_usd(total_cents, accepted_results):
    """Cost of one accepted result in USD, half to even, exactly 6 decimals.

    Exact integer arithmetic: micro-dollars = cents x 10^4 / results, rounded once.
    """
    if accepted_results < 1:
        raise PriceError("the number of accepted results must be at least 1")
    micro = round_half_even_ratio(total_cents * 10_000, accepted_results)
    return f"{micro // 1_000_000}.{micro % 1_000_000:06d}"


def quote(rows, info, gpu, days, lots, accepted_results=None):
    """Prices ``lots`` lots of ``gpu`` for ``days`` days; returns the ``--json`` object.

    Keys, in order: gpu, model, days, lots, gpus_per_lot, gpus, lot_price_cents,
    total_cents, total_usd, accepted_results, unit_cost_usd, catalog. Raises PriceError
    (exit 2) for an unknown GPU (lists the ids), a duration other than 3, 7, 30, zero lots
    or results, or a total beyond a signed 64-bit cent count.
    """
    ids = list(dict.fromkeys(row["gpu"] for row in rows))
    if gpu not in ids:
        raise PriceError(f"unknown GPU '{identifier(gpu)}'; valid ids: {', '.join(ids)}")
    if days not in DURATIONS:
        raise PriceError(f"no {days}-day package: durations are {durations_list()} days (no pro-rata)")
    entry = next(row for row in rows if row["gpu"] == gpu and row["days"] == days)
    if lots < 1:
        raise PriceError("the number of lots must be at least 1")
    total_cents = entry["price_cents"] * lots
    if lots > I64_MAX or total_cents > I64_MAX:
        raise PriceError(
            f"{lots} lots x {entry['price_cents']} cents does not fit in a signed 64-bit cent count "
            f"(max {I64_MAX} cents); buy fewer lots"
        )
    gpus = entry["gpus_per_lot"] * lots
    if gpus > U64_MAX:
        raise PriceError(f"{lots} lots is too many: the GPU count overflows")
    return {
        "gpu": entry["gpu"],
        "model": entry["model"],
        "days": entry["days"],
        "lots": lots,
        "gpus_per_lot": entry["gpus_per_lot"],
        "gpus": gpus,
        "lot_price_cents": entry["price_cents"],
        "total_cents": total_cents,
        "total_usd": cents_to_usd(total_cents),
        "accepted_results": accepted_results,
        "unit_cost_usd": None if accepted_results is None else unit_cost_usd(total_cents, accepted_results),
        "catalog": info,
    }


def quote_text(result, path):
    """A short readable summary of a ``quote`` result priced from the catalog named ``path``
    (as messages name it), every line through ``one_line``: catalog text and the path reach
    the terminal escaped."""
    lot_word = "lot" if result["lots"] == 1 else "lots"
    per_lot_word = "GPU" if result["gpus_per_lot"] == 1 else "GPUs"
    gpu_word = "GPU" if result["gpus"] == 1 else "GPUs"
    lines = [
        f"{result['gpu']} ({result['model']}), {result['days']} days",
        f"  GPUs:       {result['lots']} {lot_word} x {result['gpus_per_lot']} {per_lot_word} per lot = {result['gpus']} {gpu_word}",
        f"  lot price:  {cents_to_usd(result['lot_price_cents'])} USD",
        f"  total:      {result['total_usd']} USD ({result['total_cents']} cents)",
    ]
    if result["unit_cost_usd"] is None:
        lines.append("  unit cost:  not computed (give --accepted-results K)")
    else:
        lines.append(
            f"  unit cost:  {result['unit_cost_usd']} USD per accepted result ({result['accepted_results']} accepted)"
        )
    catalog = result["catalog"]
    lines.append(f"  catalog:    {describe_catalog(catalog, path)}, sha256 {catalog['sha256']}")
    return "\n".join(one_line(line) for line in lines)


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
    write failure (``> /dev/full``) raises PriceError with exit code 1.
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
        raise PriceError(f"cannot write to standard output: {error.strerror or error}", exit_code=1) from None


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
        except PriceError as error:
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
        """Prints ``calcul_forfaits.py: error: MESSAGE`` (see ``print_error``) and exits 2."""
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
    """The command-line parser (the flags of ``lab price``)."""
    parser = _Parser(
        prog="calcul_forfaits.py",
        allow_abbrev=False,
        description="Price of an IteraGPU package and, given accepted results, the cost per result.",
    )
    parser.add_argument("--gpu", required=True, action=_Once, metavar="ID", help="GPU id from the catalog, e.g. b200")
    parser.add_argument("--days", required=True, action=_Once, metavar="D", help="package duration: 3, 7 or 30")
    parser.add_argument("--lots", required=True, action=_Once, metavar="N", help="number of lots, a whole number >= 1")
    parser.add_argument(
        "--accepted-results",
        action=_Once,
        metavar="K",
        help="distinct useful results actually accepted (no default); gives the unit cost",
    )
    parser.add_argument("--tariffs", action=_Once, metavar="FILE", help=f"catalog CSV, - for standard input (default: {CATALOG_NAME} beside this script)")
    parser.add_argument("--json", action=_Once, nargs=0, default=False, help="print one JSON object")
    return parser


def main(argv=None):
    """Runs the command line and returns the exit code (0, 1 or 2)."""
    args = build_parser().parse_args(argv)
    try:
        days = parse_days(args.days)
        lots = positive_integer("--lots", args.lots, U64_MAX)
        accepted = None
        if args.accepted_results is not None:
            accepted = positive_integer("--accepted-results", args.accepted_results, U64_MAX)
        path, shown = _resolve_catalog(args.tariffs)
        rows, info = _load_catalog(path, shown)
        result = quote(rows, info, args.gpu, days, lots, accepted)
        text = json_visible(json.dumps(result, indent=2, ensure_ascii=False)) if args.json else quote_text(result, shown)
        write_stdout(text)
    except PriceError as error:
        print_error(error)
        return error.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
