//! `cargo xtask picture [--check]`: the guide's picture of a plan, `docs/plan-frontier.svg`,
//! is what `lab plan … --svg` draws for the README's workload ([`WORKLOAD`]); `--check` (a
//! verify step) compares without writing. And the verify step [`browser`]: `lab plan … --html`
//! rendered by headless Chromium (Debian's `chromium` package, which `.ci/run` installs),
//! with no console message and a screenshot that is not blank.
//!
//! Both run the `lab` binary of the workspace (`cargo run -p lab`), so the files are exactly
//! what a user gets.

use crate::Ctx;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use xshell::{cmd, Shell};

/// The committed picture, next to the guide.
pub const PICTURE: &str = "docs/plan-frontier.svg";

/// The README's workload: 20 000 chat requests of 512 prompt and 256 generated tokens on
/// Llama-3.1-8B, every catalog GPU and duration.
pub const WORKLOAD: [&str; 9] = [
    "plan",
    "--model",
    "examples/models/llama-3.1-8b",
    "--requests",
    "20000",
    "--input-tokens",
    "512",
    "--output-tokens",
    "256",
];

/// Flags of `cargo xtask picture`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only compare the committed picture with a fresh drawing; exit 1 if they differ.
    #[arg(long)]
    pub check: bool,
}

/// Writes the picture when it differs from `svg`, or with `check` fails naming the command
/// that regenerates it; the comparison and the atomic write are
/// [`crate::codegen::ensure_file_contents`]'s, shared with `cargo xtask codegen`.
///
/// # Errors
/// With `check`: the picture is missing or differs. Without: it cannot be written.
pub fn generate_or_check(root: &Path, svg: &[u8], check: bool) -> Result<()> {
    match crate::codegen::ensure_file_contents(root, PICTURE, svg, check)? {
        None => Ok(()),
        Some(file) => {
            bail!("{file} is not up to date; run `cargo xtask picture` and commit the result")
        }
    }
}

/// Runs `lab` with `args` plus `--FLAG OUT` in the workspace `root`; returns the file's bytes.
fn lab_file(sh: &Shell, args: &[&str], flag: &str, out: &Path) -> Result<Vec<u8>> {
    let flag = format!("--{flag}");
    // Its text answer on stdout is not needed: only the file is.
    crate::run_echoed(
        cmd!(
            sh,
            "cargo run -q -p lab --bin lab -- {args...} {flag} {out}"
        )
        .ignore_stdout(),
    )?;
    std::fs::read(out).with_context(|| format!("lab wrote no {}", out.display()))
}

/// The drawing of [`WORKLOAD`], run from `root` (the model path in it is relative).
fn draw(sh: &Shell) -> Result<Vec<u8>> {
    let dir = tempfile::tempdir()?;
    let out = dir.path().join("plan.svg");
    lab_file(sh, &WORKLOAD, "svg", &out)
}

/// Runs `cargo xtask picture [--check]`.
///
/// # Errors
/// `lab` fails, or with `--check` the picture is missing or out of date.
pub fn run(args: Args) -> Result<()> {
    let ctx = Ctx::new(crate::project_root())?;
    check_or_write(&ctx, args.check)
}

fn check_or_write(ctx: &Ctx, check: bool) -> Result<()> {
    let svg = draw(&ctx.sh)?;
    generate_or_check(&ctx.root, &svg, check)
}

/// Verify step: the committed picture is up to date.
///
/// # Errors
/// As [`run`] with `--check`.
pub fn up_to_date(ctx: &Ctx) -> Result<()> {
    check_or_write(ctx, true)
}

/// The Chromium binary: `/usr/bin/chromium` (Debian), else `chromium` on `PATH`.
fn chromium() -> Result<PathBuf> {
    let debian = PathBuf::from("/usr/bin/chromium");
    if debian.is_file() {
        return Ok(debian);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .context("no chromium: install Debian's package (`apt-get install -y chromium`; .ci/run does it when missing)")
}

/// What one headless Chromium run saw: the console lines of its log, the screenshot.
struct Seen {
    console: Vec<String>,
    png: Vec<u8>,
    dom: String,
}

/// Opens `page` in headless Chromium (a fresh profile, no network services, no sandbox: CI
/// runs as root in a container): a screenshot of `size` with the log on stderr, then the DOM.
fn open(browser: &Path, page: &Path, size: &str) -> Result<Seen> {
    let profile = tempfile::tempdir()?;
    let shot = profile.path().join("shot.png");
    let url = format!("file://{}", page.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ];
    let run = |extra: &[String], data: &Path| {
        std::process::Command::new(browser)
            .args(common)
            .arg(format!("--user-data-dir={}", data.display()))
            .args(extra)
            .arg(&url)
            .output()
            .with_context(|| format!("cannot start {}", browser.display()))
    };
    let output = run(
        &[
            format!("--screenshot={}", shot.display()),
            format!("--window-size={size}"),
            "--enable-logging=stderr".into(),
            "--v=0".into(),
        ],
        &profile.path().join("a"),
    )?;
    let log = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!("chromium exited with {}: {log}", output.status);
    }
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let png =
        std::fs::read(&shot).with_context(|| format!("chromium wrote no screenshot: {log}"))?;
    let output = run(&["--dump-dom".into()], &profile.path().join("b"))?;
    Ok(Seen {
        console,
        png,
        dom: String::from_utf8_lossy(&output.stdout).into_owned(),
    })
}

/// Pixels of an 8-bit RGB or RGBA PNG that are not white, and all its pixels.
fn ink(png: &[u8]) -> Result<(usize, usize)> {
    let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info()?;
    let mut buf = vec![0; reader.output_buffer_size().context("PNG too large")?];
    let info = reader.next_frame(&mut buf)?;
    let channels = match (info.color_type, info.bit_depth) {
        (png::ColorType::Rgb, png::BitDepth::Eight) => 3,
        (png::ColorType::Rgba, png::BitDepth::Eight) => 4,
        other => bail!("unexpected PNG format {other:?}"),
    };
    let pixels = &buf[..info.buffer_size()];
    let inked = pixels
        .chunks_exact(channels)
        .filter(|p| p[..3].iter().any(|c| *c < 250))
        .count();
    Ok((inked, pixels.len() / channels))
}

/// Verify step: `lab plan … --html` (the README's workload, and a training one) opens in
/// headless Chromium with no console message, its DOM holds the drawing, and the screenshot
/// is at least 2 % ink. First a page made to fail (a console error) proves the detector sees
/// one, so the step cannot pass by seeing nothing.
///
/// # Errors
/// No chromium, `lab` fails, or any check above fails.
pub fn browser(ctx: &Ctx) -> Result<()> {
    let browser = chromium()?;
    let dir = tempfile::tempdir()?;
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><p>x</p><script>console.error('made to fail')</script></body></html>",
    )?;
    let seen = open(&browser, &bad, "400,300")?;
    if !seen.console.iter().any(|l| l.contains("made to fail")) {
        bail!(
            "the console detector missed a page's console.error: {:?}",
            seen.console
        );
    }
    let training = [
        "plan",
        "--model",
        "examples/models/qwen2.5-0.5b",
        "--mode",
        "training",
        "--train-tokens",
        "50000000",
        "--method",
        "lora",
    ];
    for (name, args) in [("serving", &WORKLOAD[..]), ("training", &training[..])] {
        let page = dir.path().join(format!("{name}.html"));
        lab_file(&ctx.sh, args, "html", &page)?;
        let seen = open(&browser, &page, "1100,1400")?;
        if !seen.console.is_empty() {
            bail!(
                "{name}: the page logged to the console:\n{}",
                seen.console.join("\n")
            );
        }
        for needle in ["<svg", "class=\"frontier\"", "<table>", "<h1>answer: "] {
            if !seen.dom.contains(needle) {
                bail!("{name}: the loaded page has no {needle}");
            }
        }
        let (inked, all) = ink(&seen.png)?;
        lab::errln!("{name}: {inked} of {all} pixels not white");
        if inked * 50 < all {
            bail!("{name}: the screenshot is blank ({inked} of {all} pixels not white)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{generate_or_check, ink};

    #[test]
    fn generate_then_check_then_detect_a_change() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        let path = dir.path().join(super::PICTURE);
        let err = generate_or_check(dir.path(), b"a", true).unwrap_err();
        assert!(err.to_string().contains("cargo xtask picture"), "{err}");
        assert!(!path.exists());
        generate_or_check(dir.path(), b"a", false).unwrap();
        generate_or_check(dir.path(), b"a", true).unwrap();
        std::fs::write(&path, b"b").unwrap();
        let err = generate_or_check(dir.path(), b"a", true).unwrap_err();
        assert!(err.to_string().contains("not up to date"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), b"b");
    }

    /// A 4 x 2 PNG with `dark` non-white pixels.
    fn png_with(dark: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut enc = png::Encoder::new(&mut out, 4, 2);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().unwrap();
        let mut data = vec![255u8; 4 * 2 * 3];
        for i in 0..dark {
            data[i * 3] = 10;
        }
        w.write_image_data(&data).unwrap();
        w.finish().unwrap();
        out
    }

    #[test]
    fn ink_counts_non_white_pixels() {
        for dark in [0, 1, 5, 8] {
            assert_eq!(ink(&png_with(dark)).unwrap(), (dark, 8));
        }
        assert!(ink(b"not a png").is_err());
    }
}
