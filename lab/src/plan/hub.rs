//! `--model ORG/NAME`: a model already in the local Hugging Face cache, found the way
//! `huggingface_hub` lays it out, never downloaded.
//!
//! The cache root is the first of (`huggingface_hub/constants.py`): `HF_HUB_CACHE`, the
//! older `HUGGINGFACE_HUB_CACHE`, `HF_HOME/hub`, `XDG_CACHE_HOME/huggingface/hub`,
//! `~/.cache/huggingface/hub` (a variable set to the empty string counts as not set; a
//! leading `~/` is the home folder, as the library's `expanduser`). A model is the folder
//! `models--ORG--NAME`, its files under `snapshots/<commit>/` (links into `blobs/`), the
//! commit of a branch or tag in `refs/<name>` (`main` by default, `--revision` for another
//! branch, a tag, a pull request `pr/N`, or a commit hash itself).
//!
//! Nothing personal is printed: paths are shown relative to the cache root, the root itself
//! by the variable it came from (`$HF_HOME/hub`).

use crate::{Error, Result};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A model found in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The snapshot folder, to read.
    pub path: PathBuf,
    /// The snapshot relative to the cache root: `models--ORG--NAME/snapshots/<commit>`.
    pub shown: String,
    /// The cache root, to take out of messages.
    pub root: PathBuf,
}

/// The cache root and how to name it without expanding it: (path, `$HF_HUB_CACHE`...).
///
/// `var` reads one environment variable (the process environment outside tests).
///
/// # Errors
/// [`Error::Usage`] when no variable is set and the home folder is unknown (`HOME` unset).
pub fn root(var: &dyn Fn(&str) -> Option<OsString>) -> Result<(PathBuf, String)> {
    let set = |name: &str| var(name).filter(|v| !v.is_empty());
    let home = set("HOME").map(PathBuf::from);
    let expand = |value: OsString| -> PathBuf {
        let path = PathBuf::from(&value);
        match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(h)) => h.join(rest),
            _ => path,
        }
    };
    if let Some(v) = set("HF_HUB_CACHE") {
        return Ok((expand(v), "$HF_HUB_CACHE".into()));
    }
    if let Some(v) = set("HUGGINGFACE_HUB_CACHE") {
        return Ok((expand(v), "$HUGGINGFACE_HUB_CACHE".into()));
    }
    if let Some(v) = set("HF_HOME") {
        return Ok((expand(v).join("hub"), "$HF_HOME/hub".into()));
    }
    if let Some(v) = set("XDG_CACHE_HOME") {
        return Ok((
            expand(v).join("huggingface").join("hub"),
            "$XDG_CACHE_HOME/huggingface/hub".into(),
        ));
    }
    match home {
        Some(h) => Ok((
            h.join(".cache").join("huggingface").join("hub"),
            "~/.cache/huggingface/hub".into(),
        )),
        None => Err(Error::usage(
            "--model ORG/NAME is looked up in the Hugging Face cache, but neither HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME nor HOME is set: set HF_HUB_CACHE to the cache folder, or give the model folder",
        )),
    }
}

/// Whether `text` reads as a Hub repository id `ORG/NAME` (letters, digits, `-`, `_`, `.`;
/// neither part `.` or `..` nor starting with `.`), as opposed to a path.
pub fn is_repo_id(text: &str) -> bool {
    let mut parts = text.split('/');
    let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    [org, name].iter().all(|p| {
        !p.is_empty()
            && p.len() <= 96
            && !p.starts_with('.')
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    })
}

/// The snapshot of `repo` (`ORG/NAME`) at `revision` (`main` when `None`) under `root`;
/// `where_` names the root in messages.
///
/// # Errors
/// [`Error::Usage`], one line, when the model is not cached (the cached models listed), a
/// branch has no ref, a ref does not hold a commit hash, or the snapshot it names (or the
/// commit given) is not in `snapshots/` (the snapshots cached listed).
pub fn resolve(root: &Path, where_: &str, repo: &str, revision: Option<&str>) -> Result<Resolved> {
    let folder_name = format!("models--{}", repo.replace('/', "--"));
    let folder = root.join(&folder_name);
    if !folder.is_dir() {
        let cached = cached_models(root);
        return Err(Error::usage(format!(
            "--model {repo}: not a folder here, and not in the Hugging Face cache ({where_}, looked for {folder_name}); {}; lab never downloads: fetch it first (hf download {repo}) or give its folder",
            if cached.is_empty() {
                "no model is cached there".to_string()
            } else {
                format!("cached: {}", shortlist(&cached))
            }
        )));
    }
    let revision = revision.unwrap_or("main");
    let snapshots = folder.join("snapshots");
    let commit = if is_commit(revision) {
        revision.to_string()
    } else {
        if !is_ref_name(revision) {
            return Err(Error::usage(format!(
                "--revision '{}' is neither a 40-character commit hash nor a branch or tag name",
                crate::text::excerpt(revision)
            )));
        }
        let ref_file = folder.join("refs").join(revision);
        let text = read_ref(&ref_file).ok_or_else(|| {
            Error::usage(format!(
                "--model {repo}: {folder_name}/refs/{revision} is missing or unreadable in the cache ({where_}); snapshots cached: {}; give --revision with one of them",
                shortlist(&listing(&snapshots))
            ))
        })?;
        let commit = text.trim();
        if !is_commit(commit) {
            return Err(Error::usage(format!(
                "--model {repo}: {folder_name}/refs/{revision} does not hold a commit hash (found '{}'); the cache is damaged: fetch the model again or give --revision HASH",
                crate::text::excerpt(commit)
            )));
        }
        commit.to_string()
    };
    let path = snapshots.join(&commit);
    if !path.is_dir() {
        return Err(Error::usage(format!(
            "--model {repo}: snapshot {commit} is not in {folder_name}/snapshots (cache {where_}); snapshots cached: {}",
            shortlist(&listing(&snapshots))
        )));
    }
    Ok(Resolved {
        path,
        shown: format!("{folder_name}/snapshots/{commit}"),
        root: root.to_path_buf(),
    })
}

/// `message` with the cache root taken out (`<root>/models--...` shown as `models--...`).
pub fn hide_root(root: &Path, message: &str) -> String {
    let mut prefix = root.display().to_string();
    if !prefix.ends_with('/') {
        prefix.push('/');
    }
    message.replace(&prefix, "")
}

/// [`hide_root`] over an error, keeping its kind.
pub fn hide_in_error(root: &Path, error: Error) -> Error {
    match error {
        Error::Usage(m) => Error::Usage(hide_root(root, &m)),
        Error::Runtime(m) => Error::Runtime(hide_root(root, &m)),
        Error::OutOfMemory(m) => Error::OutOfMemory(hide_root(root, &m)),
    }
}

/// The `ORG/NAME` of every `models--ORG--NAME` folder under `root`, sorted.
pub fn cached_models(root: &Path) -> Vec<String> {
    let mut out: Vec<String> = listing(root)
        .into_iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("models--")?;
            let (org, name) = rest.split_once("--")?;
            Some(format!("{org}/{name}"))
        })
        .collect();
    out.sort();
    out
}

/// The names in a folder (empty when unreadable), sorted, each escaped for one line.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|r| {
            r.filter_map(|e| e.ok())
                .map(|e| crate::text::one_line(&e.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// At most 10 names, then how many more.
fn shortlist(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_string();
    }
    let mut s = names
        .iter()
        .take(10)
        .map(|n| crate::text::excerpt(n))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        s.push_str(&format!(" and {} more", names.len() - 10));
    }
    s
}

/// A commit hash as the cache names snapshots: 40 lowercase hexadecimal digits.
fn is_commit(text: &str) -> bool {
    text.len() == 40 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A branch name safe to join under `refs/`: no empty, `.` or `..` part, no leading `/`.
fn is_ref_name(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 256
        && text.split('/').all(|p| {
            !p.is_empty()
                && p != "."
                && p != ".."
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        })
}

/// A ref file's text, when it is a small readable file (a commit hash and maybe a newline).
fn read_ref(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > 1024 {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn the_root_follows_huggingface_hubs_order_and_ignores_empty_variables() {
        let all = [
            ("HF_HUB_CACHE", "/c"),
            ("HUGGINGFACE_HUB_CACHE", "/old"),
            ("HF_HOME", "/h"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/home/u"),
        ];
        type Vars<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Vars, &str, &str); 7] = [
            (&all, "/c", "$HF_HUB_CACHE"),
            (&all[1..], "/old", "$HUGGINGFACE_HUB_CACHE"),
            (&all[2..], "/h/hub", "$HF_HOME/hub"),
            (
                &all[3..],
                "/x/huggingface/hub",
                "$XDG_CACHE_HOME/huggingface/hub",
            ),
            (
                &all[4..],
                "/home/u/.cache/huggingface/hub",
                "~/.cache/huggingface/hub",
            ),
            (
                &[("HF_HUB_CACHE", ""), ("HF_HOME", ""), ("HOME", "/home/u")],
                "/home/u/.cache/huggingface/hub",
                "~/.cache/huggingface/hub",
            ),
            (
                &[("HF_HOME", "~/hf"), ("HOME", "/home/u")],
                "/home/u/hf/hub",
                "$HF_HOME/hub",
            ),
        ];
        for (vars, path, named) in cases {
            let (p, n) = root(&env(vars)).unwrap();
            assert_eq!((p, n.as_str()), (PathBuf::from(path), named), "{vars:?}");
        }
        let e = root(&env(&[("HF_HOME", "")])).unwrap_err().to_string();
        assert!(e.contains("neither HF_HUB_CACHE"), "{e}");
    }

    #[test]
    fn repo_ids_are_two_plain_parts() {
        for ok in [
            "meta-llama/Llama-3.1-8B",
            "Qwen/Qwen3-0.6B",
            "a/b",
            "org_1/m.v2",
        ] {
            assert!(is_repo_id(ok), "{ok}");
        }
        for not in [
            "llama",
            "a/b/c",
            "/a/b",
            "a/",
            "./a",
            "../a",
            "a/..",
            "a/.b",
            "a b/c",
            "a\\b/c",
            "",
            "examples/models/llama-3.1-8b",
        ] {
            assert!(!is_repo_id(not), "{not}");
        }
    }

    #[test]
    fn commits_and_branch_names() {
        assert!(is_commit(&"a".repeat(40)));
        for bad in [
            "A".repeat(40),
            "a".repeat(39),
            "a".repeat(41),
            "g".repeat(40),
        ] {
            assert!(!is_commit(&bad), "{bad}");
        }
        for ok in ["main", "v1.0", "pr/1"] {
            assert!(is_ref_name(ok), "{ok}");
        }
        for bad in ["", "../x", "a//b", "/main", "a/.", "ma in"] {
            assert!(!is_ref_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_root_is_taken_out_of_messages() {
        let root = Path::new("/home/u/.cache/huggingface/hub");
        assert_eq!(
            hide_root(
                root,
                "cannot read /home/u/.cache/huggingface/hub/models--a--b/snapshots/x/config.json"
            ),
            "cannot read models--a--b/snapshots/x/config.json"
        );
    }
}
