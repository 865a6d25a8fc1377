//! A workload no GPU can run under `--gpus N` or `--tensor-parallel T` is refused naming the
//! flag that stopped it (whole lots, one machine's GPUs), never blaming memory alone.

use crate::support::Lab;

fn refused(extra: &[&str]) -> String {
    let model = crate::support::repo_root().join("examples/models/llama-3.1-8b");
    let mut lab = Lab::new(&["plan", "--requests", "1000", "--input-tokens", "100"])
        .arg("--output-tokens")
        .arg("100")
        .arg("--model")
        .arg(model);
    for a in extra {
        lab = lab.arg(a);
    }
    lab.refused(2, "no GPU of the catalog can run this workload")
}

#[test]
fn gpus_that_make_no_whole_lot_are_named() {
    // A b200 lot holds 2 GPUs: 3 is no whole number of lots.
    let line = refused(&["--gpus", "3", "--gpu", "b200"]);
    assert!(line.contains("--gpus 3"), "{line}");
    assert!(
        line.contains("lots of 2 GPUs cannot make --gpus 3"),
        "{line}"
    );
}

#[test]
fn a_degree_beyond_one_machine_is_named() {
    // An rtx4090 lot holds 1 GPU: tensor parallel 8 needs 8 in one machine.
    let line = refused(&["--tensor-parallel", "8", "--gpu", "rtx4090"]);
    assert!(line.contains("--tensor-parallel 8"), "{line}");
    assert!(line.contains("needs 8 GPUs in one machine"), "{line}");
}

#[test]
fn without_fixed_flags_the_memory_advice_stays() {
    let line = refused(&["--batch", "4294967296"]);
    assert!(line.contains("lower --batch, --context"), "{line}");
}
