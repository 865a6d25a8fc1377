#!/usr/bin/env python3
"""Re-runs the examples shown in the documents and reports every output that changed.

Usage (from the repository root, after `cargo build --bin lab` and `cargo xtask dist`):

    python3 docs/check-examples.py [--lab target/debug/lab] [--fix] [FILE.md ...]

`--fix` writes each differing output into the document in place of the one shown (review the
diff before committing: a changed output may be a regression, not a new truth).

A `console` block is checked when every command in it (lines starting with `$ `) is one of
`lab ...` (or `target/release/lab ...`, as README's tour writes it), `cp ...`, `sed ...` or
`cat ...`; blocks with anything else (a `cargo` command,
a command on a GPU (`cuda:`), which only the GPU machine can re-run, an elided output `…`)
are skipped and counted. Each checked block runs in a
fresh scratch folder holding copies of `data/`, `dist/`, `examples/` and the built kit
`target/dist/`, so that the documented relative paths work and nothing in the repository is
written. The expected output of a command is the lines after it up to the next command.
Exit status 1 when any output differs, with a unified diff per difference.
"""

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

DEFAULT_FILES = ["README.md", "docs/GUIDE.md", "docs/PLANNING.md", "docs/RELEASE.md"]
ALLOWED = ("lab ", "target/release/lab ", "cp ", "sed ", "cat ")
COPIED = ["data", "dist", "examples", os.path.join("target", "dist")]


def blocks(text):
    """Yields (line number, lines) of every ```console block."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            yield start + 1, lines[start:j]
            i = j + 1
        else:
            i += 1


def commands(block):
    """Splits a block into (command, expected output lines, index in the block of the first
    output line); joins `\\` continuations."""
    out = []
    for i, line in enumerate(block):
        if line.startswith("$ "):
            out.append([line[2:], [], i + 1])
        elif out and out[-1][0].endswith("\\") and not out[-1][1]:
            out[-1][0] = out[-1][0][:-1].rstrip() + " " + line.strip()
            out[-1][2] = i + 1
        elif out:
            out[-1][1].append(line)
        else:
            return None
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default=os.path.join("target", "debug", "lab"))
    parser.add_argument("--fix", action="store_true", help="write the actual outputs into the documents")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    root = os.getcwd()
    lab = os.path.abspath(args.lab)
    files = args.files or [f for f in DEFAULT_FILES if os.path.exists(f)]
    checked = skipped = failed = 0
    for name in files:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
        fixes = []  # (first line index in the file, number of lines, replacement lines)
        for line_no, block in blocks(text):
            cmds = commands(block)
            if (
                not cmds
                or any(not c.startswith(ALLOWED) for c, _, _ in cmds)
                or any("cuda:" in c for c, _, _ in cmds)
                or any("…" in "\n".join(o) for _, o, _ in cmds)
            ):
                skipped += 1
                continue
            checked += 1
            with tempfile.TemporaryDirectory() as scratch:
                for folder in COPIED:
                    source = os.path.join(root, folder)
                    if os.path.isdir(source):
                        shutil.copytree(source, os.path.join(scratch, folder))
                env = dict(os.environ, PATH=os.path.dirname(lab) + os.pathsep + os.environ["PATH"])
                for command, expected, first in cmds:
                    for prefix in ("lab ", "target/release/lab "):
                        if command.startswith(prefix):
                            command = shlex_quote(lab) + command[len(prefix) - 1 :]
                    run = subprocess.run(
                        ["bash", "-c", command],
                        cwd=scratch,
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                    )
                    actual = run.stdout.rstrip("\n").split("\n") if run.stdout else []
                    want = expected[:]
                    while want and want[-1] == "":
                        want.pop()
                    if actual != want:
                        failed += 1
                        blank = expected[len(want):]
                        fixes.append((line_no - 1 + first, len(expected), actual + blank))
                        print(f"{name}:{line_no}: $ {command}")
                        sys.stdout.writelines(
                            line + "\n"
                            for line in difflib.unified_diff(
                                want, actual, "shown", "actual", lineterm=""
                            )
                        )
        if args.fix and fixes:
            lines = text.split("\n")
            for start, count, new in sorted(fixes, reverse=True):
                lines[start : start + count] = new
            with open(name, "w", encoding="utf-8") as handle:
                handle.write("\n".join(lines))
            print(f"{name}: {len(fixes)} outputs written")
    print(f"{checked} blocks checked, {skipped} skipped, {failed} outputs differ")
    return 1 if failed else 0


def shlex_quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


if __name__ == "__main__":
    sys.exit(main())
