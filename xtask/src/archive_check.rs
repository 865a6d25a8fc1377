//! The verify steps about the release archive: built twice with the same SHA-256, then read
//! back against its manifest by three independent readers (`lab::kit`, Python's `zipfile`,
//! `unzip -t`).

use crate::{dist, findings_result, Ctx};
use anyhow::{bail, Context, Result};
use lab::kit;
use std::path::Path;
use xshell::cmd;

/// Builds the archive into `target/dist`, then again with `cargo xtask dist` under another
/// time zone, umask and locale into a scratch folder, and requires the same SHA-256.
///
/// The archive of an earlier run is removed first, and only a successful build is handed to
/// the archive steps ([`Ctx::built`]): when this step fails they fail too, instead of
/// reporting `ok` about an older archive.
pub fn reproducible(ctx: &Ctx) -> Result<()> {
    let out_dir = dist::default_out_dir(&ctx.root);
    let stale = out_dir.join(kit::ARCHIVE_NAME);
    match std::fs::remove_file(&stale) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", stale.display()))
        }
        _ => {}
    }
    let first = dist::build(&ctx.root, &out_dir)?;
    let scratch = ctx.root.join("target").join("dist-repro-check");
    // `cargo xtask`, not this process's executable: `cargo test` may have replaced it.
    let (root, out) = (&ctx.root, &scratch);
    let script = r#"umask 077 && exec cargo xtask dist --source "$0" --out-dir "$1""#;
    cmd!(ctx.sh, "sh -c {script} {root} {out}")
        .env("TZ", "Pacific/Kiritimati")
        .env("LC_ALL", "C")
        .quiet()
        .ignore_stdout()
        .run()?;
    let second = std::fs::read(scratch.join(kit::ARCHIVE_NAME))
        .with_context(|| format!("cannot read the second build under {}", scratch.display()))?;
    let _ = std::fs::remove_dir_all(&scratch);
    let second = lab::digest::sha256_hex(&second);
    if first.sha256 != second {
        bail!(
            "{}: two builds differ: {} then {second}",
            kit::ARCHIVE_NAME,
            first.sha256
        );
    }
    lab::errln!("{} sha256 {}", first.path.display(), first.sha256);
    *ctx.built.borrow_mut() = Some(first.path);
    Ok(())
}

/// Reads the built archive back with `lab::kit::verify_archive`.
pub fn read_back(ctx: &Ctx) -> Result<()> {
    let report = kit::verify_archive(&ctx.built_archive()?);
    findings_result(&report.findings)
}

/// Python's `zipfile` as an independent reader: CRCs, the nine names in path order, no
/// archive comment, no extra fields, no flags, Unix 0644 regular files, and every size and
/// SHA-256 against the manifest.
const PYTHON_CHECK: &str = r#"
import hashlib, json, sys, zipfile
path, root = sys.argv[1], sys.argv[2]
problems = []
with zipfile.ZipFile(path) as z:
    bad = z.testzip()
    if bad is not None:
        problems.append(f"{bad}: CRC or read error")
    infos = z.infolist()
    names = [i.filename for i in infos]
    if len(names) != 9 or len(set(names)) != 9:
        problems.append(f"{path}: {len(names)} entries ({len(set(names))} distinct), expected 9")
    if names != sorted(names):
        problems.append(f"{path}: members not in path order: {names}")
    if z.comment:
        problems.append(f"{path}: has an archive comment")
    if infos and infos[0].header_offset != 0:
        problems.append(f"{path}: first entry at offset {infos[0].header_offset}, expected 0")
    for i in infos:
        if not i.filename.startswith(root + "/") or i.is_dir():
            problems.append(f"{i.filename}: not a file under {root}/")
        if i.extra:
            problems.append(f"{i.filename}: has extra fields {i.extra!r}")
        if i.flag_bits & ~0b110:
            problems.append(f"{i.filename}: flags {i.flag_bits:#x}")
        if i.create_system != 3 or (i.external_attr >> 16) != 0o100644:
            problems.append(f"{i.filename}: system {i.create_system}, mode {oct(i.external_attr >> 16)}")
        if i.compress_type != zipfile.ZIP_DEFLATED:
            problems.append(f"{i.filename}: compression {i.compress_type}, expected deflate")
    manifest = json.loads(z.read(root + "/MANIFEST.json"))
    listed = [m["path"] for m in manifest["members"]]
    if sorted(listed) != sorted(names):
        problems.append(f"{root}/MANIFEST.json: lists {listed}, archive has {names}")
    for m in manifest["members"]:
        if m["path"] == root + "/MANIFEST.json":
            if m["size"] is not None or m["sha256"] is not None:
                problems.append(f"{m['path']}: its own entry must be unhashed")
            continue
        if m["path"] not in names:
            continue
        data = z.read(m["path"])
        if len(data) != m["size"] or hashlib.sha256(data).hexdigest() != m["sha256"]:
            problems.append(f"{m['path']}: size or SHA-256 differs from MANIFEST.json")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
"#;

/// Runs [`PYTHON_CHECK`] on the built archive with an isolated `python3 -I`.
pub fn python_zipfile(ctx: &Ctx) -> Result<()> {
    let path = ctx.built_archive()?;
    let root = kit::KIT_ROOT;
    cmd!(ctx.sh, "python3 -I -c {PYTHON_CHECK} {path} {root}")
        .quiet()
        .run()
        .context("python zipfile found problems (listed above)")?;
    Ok(())
}

/// `unzip -t` (Info-ZIP) as a third reader. Missing `unzip` is a failure, not a skip: CI's
/// `.ci/run` installs it, and a developer machine gets the install hint.
pub fn unzip_test(ctx: &Ctx) -> Result<()> {
    let path = ctx.built_archive()?;
    if !on_path("unzip") {
        bail!(
            "`unzip` is not installed (Debian/Ubuntu: apt-get install unzip; .ci/run installs it)"
        );
    }
    let listing = cmd!(ctx.sh, "unzip -t {path}").quiet().read()?;
    let last = listing.lines().last().unwrap_or_default();
    if !last.contains("No errors detected") {
        bail!("unzip -t: {listing}");
    }
    lab::errln!("{}", last.trim());
    Ok(())
}

/// Whether `program` is an executable file in a `PATH` folder.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| is_file(&dir.join(program))))
}

fn is_file(path: &Path) -> bool {
    path.metadata().is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a successful dist step in the same run, every archive step fails, whatever
    /// archive an earlier run left in target/dist.
    #[test]
    fn archive_steps_fail_without_this_runs_dist_step() {
        let ctx = Ctx::new(crate::project_root()).unwrap();
        for step in [read_back, python_zipfile, unzip_test] {
            let error = step(&ctx).unwrap_err().to_string();
            assert!(
                error.contains("the dist step of this run did not build one"),
                "{error}"
            );
        }
    }
}
