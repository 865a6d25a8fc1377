//! `lab plan --model ORG/NAME` from the local Hugging Face cache: the root as
//! `huggingface_hub` finds it, the snapshot by `refs/main` or `--revision`, each broken cache
//! refused in one line that names no personal path.

use crate::support::Lab;
use std::path::Path;

const HASH_A: &str = "0123456789abcdef0123456789abcdef01234567";
const HASH_B: &str = "89abcdef0123456789abcdef0123456789abcdef";

/// A cache root holding `meta-llama/Llama-3.1-8B` with snapshot A (config linked into
/// `blobs/`, as the library stores it) and `refs/main` = `main_ref`, plus an empty
/// `Qwen/Qwen3-0.6B` folder.
fn cache(main_ref: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("models--meta-llama--Llama-3.1-8B");
    std::fs::create_dir_all(model.join("blobs")).unwrap();
    std::fs::create_dir_all(model.join("refs")).unwrap();
    std::fs::create_dir_all(model.join("snapshots").join(HASH_A)).unwrap();
    std::fs::create_dir_all(dir.path().join("models--Qwen--Qwen3-0.6B")).unwrap();
    let config = crate::support::repo_root().join("examples/models/llama-3.1-8b/config.json");
    std::fs::copy(config, model.join("blobs/c0ffee")).unwrap();
    std::os::unix::fs::symlink(
        "../../blobs/c0ffee",
        model.join("snapshots").join(HASH_A).join("config.json"),
    )
    .unwrap();
    if let Some(r) = main_ref {
        std::fs::write(model.join("refs/main"), r).unwrap();
    }
    dir
}

/// `lab plan --model ARGS... --json` with only `vars` of the cache variables set.
fn plan(vars: &[(&str, &Path)], args: &[&str]) -> Lab {
    let mut lab = Lab::new(&["plan", "--json", "--gpu", "h200", "--model"]);
    for a in args {
        lab = lab.arg(*a);
    }
    for name in [
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_HOME",
        "XDG_CACHE_HOME",
        "HOME",
    ] {
        lab = match vars.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => lab.env(name, v.as_os_str()),
            None => lab.env_remove(name),
        };
    }
    lab
}

#[test]
fn each_cache_variable_finds_the_snapshot_of_refs_main() {
    let root = cache(Some(&format!("{HASH_A}\n")));
    let hub = root.path();
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("home");
    std::fs::create_dir_all(home.join(".cache/huggingface")).unwrap();
    std::os::unix::fs::symlink(hub, home.join(".cache/huggingface/hub")).unwrap();
    std::fs::create_dir_all(parent.path().join("hf")).unwrap();
    std::os::unix::fs::symlink(hub, parent.path().join("hf/hub")).unwrap();
    let hf_home = parent.path().join("hf");
    let empty = Path::new("");
    let cases: [&[(&str, &Path)]; 5] = [
        &[("HF_HUB_CACHE", hub)],
        &[("HUGGINGFACE_HUB_CACHE", hub)],
        &[("HF_HOME", &hf_home)],
        &[("HOME", &home)],
        // An empty variable counts as not set: the next one is used.
        &[("HF_HUB_CACHE", empty), ("HF_HOME", empty), ("HOME", &home)],
    ];
    // A relative HF_HUB_CACHE is taken from the folder lab runs in.
    let v = plan(
        &[("HF_HUB_CACHE", Path::new("hub"))],
        &["meta-llama/Llama-3.1-8B"],
    )
    .current_dir(hf_home.clone())
    .json();
    assert_eq!(v["parameters"], 8030261248u64);
    for vars in cases {
        let v = plan(vars, &["meta-llama/Llama-3.1-8B"]).json();
        assert_eq!(
            v["model"],
            format!("models--meta-llama--Llama-3.1-8B/snapshots/{HASH_A}"),
            "{vars:?}"
        );
        assert_eq!(v["parameters"], 8030261248u64);
    }
}

#[test]
fn a_revision_is_a_branch_ref_or_a_cached_commit() {
    let root = cache(Some(HASH_A));
    let hub = root.path();
    let model = hub.join("models--meta-llama--Llama-3.1-8B");
    std::fs::write(model.join("refs/dev"), HASH_A).unwrap();
    // huggingface_hub writes a tag's commit to refs/<tag> and a pull request's to
    // refs/pr/<n>, as it does a branch's.
    std::fs::write(model.join("refs/v1.0"), HASH_A).unwrap();
    std::fs::create_dir_all(model.join("refs/pr")).unwrap();
    std::fs::write(model.join("refs/pr/1"), HASH_A).unwrap();
    for rev in [HASH_A, "dev", "main", "v1.0", "pr/1"] {
        let v = plan(
            &[("HF_HUB_CACHE", hub)],
            &["meta-llama/Llama-3.1-8B", "--revision", rev],
        )
        .json();
        assert_eq!(v["parameters"], 8030261248u64, "{rev}");
    }
    // A commit that is not cached, a branch without a ref, a name that is neither.
    let missing = plan(
        &[("HF_HUB_CACHE", hub)],
        &["meta-llama/Llama-3.1-8B", "--revision", HASH_B],
    )
    .refused(
        2,
        &format!("snapshot {HASH_B} is not in models--meta-llama--Llama-3.1-8B/snapshots"),
    );
    assert!(
        missing.contains(&format!("snapshots cached: {HASH_A}")),
        "{missing}"
    );
    plan(
        &[("HF_HUB_CACHE", hub)],
        &["meta-llama/Llama-3.1-8B", "--revision", "v2"],
    )
    .refused(2, "refs/v2 is missing");
    for bad in ["../../x", "/main", "a b", ""] {
        plan(
            &[("HF_HUB_CACHE", hub)],
            &["meta-llama/Llama-3.1-8B", "--revision", bad],
        )
        .refused(
            2,
            "neither a 40-character commit hash nor a branch or tag name",
        );
    }
    // --revision with a folder of this machine.
    let folder = crate::support::repo_root().join("examples/models/llama-3.1-8b");
    Lab::new(&["plan", "--revision", "main", "--model"])
        .arg(&folder)
        .refused(2, "leave --revision out");
}

#[test]
fn broken_refs_are_refused_by_name() {
    let cases = [
        (None, "refs/main is missing"),
        (
            Some("not-a-hash"),
            "refs/main does not hold a commit hash (found 'not-a-hash')",
        ),
        (Some(""), "refs/main does not hold a commit hash"),
        (Some(HASH_B), &*format!("snapshot {HASH_B} is not in")),
    ];
    for (main, needle) in cases {
        let root = cache(main);
        let line = plan(
            &[("HF_HUB_CACHE", root.path())],
            &["meta-llama/Llama-3.1-8B"],
        )
        .refused(2, needle);
        assert!(!line.contains(&root.path().display().to_string()), "{line}");
    }
    // refs/main that is a folder.
    let root = cache(None);
    std::fs::create_dir(
        root.path()
            .join("models--meta-llama--Llama-3.1-8B/refs/main"),
    )
    .unwrap();
    plan(
        &[("HF_HUB_CACHE", root.path())],
        &["meta-llama/Llama-3.1-8B"],
    )
    .refused(2, "refs/main is missing or unreadable");
}

#[test]
fn a_model_not_cached_names_where_it_looked_and_what_is_there() {
    let root = cache(Some(HASH_A));
    let line = plan(&[("HF_HUB_CACHE", root.path())], &["meta-llama/Llama-3.2-1B"])
        .refused(2, "not in the Hugging Face cache ($HF_HUB_CACHE, looked for models--meta-llama--Llama-3.2-1B)");
    assert!(
        line.contains("cached: Qwen/Qwen3-0.6B, meta-llama/Llama-3.1-8B"),
        "{line}"
    );
    assert!(line.contains("never downloads"), "{line}");
    assert!(!line.contains(&root.path().display().to_string()), "{line}");
    // An empty cache, a cache folder that does not exist, no variable and no home.
    let empty = tempfile::tempdir().unwrap();
    plan(&[("HF_HUB_CACHE", empty.path())], &["a/b"]).refused(2, "no model is cached there");
    plan(&[("HF_HUB_CACHE", &empty.path().join("nowhere"))], &["a/b"])
        .refused(2, "no model is cached there");
    plan(&[], &["a/b"]).refused(
        2,
        "neither HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME nor HOME is set",
    );
    // Not an ORG/NAME and not here: still a missing path (exit 1), as before.
    plan(&[("HF_HUB_CACHE", root.path())], &["a/b/c"]).refused(1, "cannot read --model a/b/c");
    // An ORG/NAME-shaped path through a file of this folder is that path, refused by the
    // system (exit 1), never looked up in the cache.
    let here = tempfile::tempdir().unwrap();
    std::fs::write(here.path().join("notes"), "x").unwrap();
    let out = crate::support::lab()
        .current_dir(here.path())
        .env("HF_HUB_CACHE", root.path())
        .args(["plan", "--model", "notes/config.json"])
        .output()
        .unwrap();
    crate::support::assert_refused(
        &out,
        1,
        "cannot read --model notes/config.json: Not a directory",
    );
}

#[test]
fn messages_from_inside_a_snapshot_show_no_personal_path() {
    let root = cache(Some(HASH_A));
    let snapshot = root
        .path()
        .join("models--meta-llama--Llama-3.1-8B/snapshots")
        .join(HASH_A);
    // A dangling link where the library put a blob, and a config that is not JSON.
    std::fs::remove_file(snapshot.join("config.json")).unwrap();
    std::os::unix::fs::symlink("../../blobs/gone", snapshot.join("config.json")).unwrap();
    let line = plan(
        &[("HF_HUB_CACHE", root.path())],
        &["meta-llama/Llama-3.1-8B"],
    )
    .refused(1, "");
    assert!(
        line.contains(&format!(
            "models--meta-llama--Llama-3.1-8B/snapshots/{HASH_A}"
        )),
        "{line}"
    );
    assert!(!line.contains(&root.path().display().to_string()), "{line}");
    std::fs::remove_file(snapshot.join("config.json")).unwrap();
    std::fs::write(snapshot.join("config.json"), "{").unwrap();
    let line = plan(
        &[("HF_HUB_CACHE", root.path())],
        &["meta-llama/Llama-3.1-8B"],
    )
    .refused(2, "is not valid JSON");
    assert!(!line.contains(&root.path().display().to_string()), "{line}");
}
