//! Which catalog GPU a device is, from the name its runtime reports (`torch.cuda.get_device_name`,
//! `nvidia-smi`, as a measurement document records it in `environment.device_name`). One rule
//! for every command that ties a measurement to the catalog: `lab record` (the measurement's
//! GPU is the package's) and `lab plan --calibration` (the measured GPU whose factors a
//! document replaces).
//!
//! Names as runtimes print them (seen in the threads cited in `data/gpu-memory.csv`: "NVIDIA
//! H100 80GB HBM3", "NVIDIA A100-SXM4-40GB", "NVIDIA GeForce RTX 4090", "NVIDIA B200", "AMD
//! Instinct MI300X", "Tesla T4"; the H200 of `examples/h200/`: "NVIDIA H200"). The PCIe and NVL
//! boards of a GPU report their form factor in the name ("NVIDIA H100 PCIe", "NVIDIA H100
//! NVL", "NVIDIA A100 80GB PCIe", "NVIDIA H200 NVL"); the SXM boards do not always ("NVIDIA
//! H100 80GB HBM3"). A catalog GPU sold as SXM is therefore not matched by a name that says
//! PCIe or NVL: those boards have other bandwidth and power limits (H100 PCIe 2.0 TB/s against
//! SXM 3.35 TB/s, NVIDIA's H100 datasheet).

use crate::catalog::Catalog;

/// The words of a catalog GPU id that the name a runtime reports for that GPU holds, e.g.
/// `h100` in "NVIDIA H100 80GB HBM3", `rtx` `6000` `ada` in "NVIDIA RTX 6000 Ada Generation".
const DEVICE_WORDS: [(&str, &[&str]); 15] = [
    ("t4", &["t4"]),
    ("l4", &["l4"]),
    ("a10", &["a10"]),
    ("rtx4090", &["rtx", "4090"]),
    ("rtx5090", &["rtx", "5090"]),
    ("rtx6000ada", &["rtx", "6000", "ada"]),
    ("l40s", &["l40s"]),
    ("rtxpro6000", &["rtx", "pro", "6000"]),
    ("a100-40gb", &["a100", "40gb"]),
    ("a100-80gb", &["a100", "80gb"]),
    ("h100", &["h100"]),
    ("h200", &["h200"]),
    ("b200", &["b200"]),
    ("mi300x", &["mi300x"]),
    ("mi325x", &["mi325x"]),
];

/// Form-factor words of boards that are not SXM modules.
const NOT_SXM: [&str; 2] = ["pcie", "nvl"];

/// The lowercase alphanumeric words of a name: "NVIDIA A100-SXM4-80GB" → `nvidia a100 sxm4 80gb`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether a device named `device_name` is a GPU of the catalog id `gpu`: every word of the
/// id ([`DEVICE_WORDS`]; for an id not listed there, its own `-`-separated parts) is a word of
/// the name, compared without case. "NVIDIA L40S" is not an `l4`, "NVIDIA A100-SXM4-80GB" not
/// an `a10` nor an `a100-40gb`. This alone does not look at the form factor; see
/// [`device_is_model`].
pub fn device_is(gpu: &str, device_name: &str) -> bool {
    let name = words(device_name);
    let own: Vec<&str>;
    let wanted: &[&str] = match DEVICE_WORDS.iter().find(|(id, _)| *id == gpu) {
        Some((_, w)) => w,
        None => {
            own = gpu.split('-').filter(|w| !w.is_empty()).collect();
            &own
        }
    };
    !wanted.is_empty() && wanted.iter().all(|w| name.iter().any(|n| n == w))
}

/// [`device_is`], and the board's form factor is the catalog model's: a catalog `model`
/// text with the word `SXM` ("NVIDIA H100 80 GB SXM") is not matched by a name with `PCIe`
/// or `NVL` in it.
pub fn device_is_model(gpu: &str, model: &str, device_name: &str) -> bool {
    let sxm = words(model).iter().any(|w| w.starts_with("sxm"));
    let other_board = words(device_name)
        .iter()
        .any(|w| NOT_SXM.contains(&w.as_str()));
    device_is(gpu, device_name) && !(sxm && other_board)
}

/// The one catalog GPU id a device named `device_name` is ([`device_is_model`] against every
/// catalog row); `None` when none or several are.
pub fn catalog_gpu(catalog: &Catalog, device_name: &str) -> Option<String> {
    let mut found: Vec<&str> = Vec::new();
    for e in catalog.entries() {
        if device_is_model(&e.gpu, &e.model, device_name) && !found.contains(&e.gpu.as_str()) {
            found.push(&e.gpu);
        }
    }
    match found.as_slice() {
        [one] => Some((*one).to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One name per catalog GPU, as its runtime prints it.
    const NAMES: [(&str, &str); 15] = [
        ("t4", "Tesla T4"),
        ("l4", "NVIDIA L4"),
        ("a10", "NVIDIA A10"),
        ("rtx4090", "NVIDIA GeForce RTX 4090"),
        ("rtx5090", "NVIDIA GeForce RTX 5090"),
        ("rtx6000ada", "NVIDIA RTX 6000 Ada Generation"),
        ("l40s", "NVIDIA L40S"),
        (
            "rtxpro6000",
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
        ),
        ("a100-40gb", "NVIDIA A100-SXM4-40GB"),
        ("a100-80gb", "NVIDIA A100-SXM4-80GB"),
        ("h100", "NVIDIA H100 80GB HBM3"),
        ("h200", "NVIDIA H200"),
        ("b200", "NVIDIA B200"),
        ("mi300x", "AMD Instinct MI300X"),
        ("mi325x", "AMD Instinct MI325X"),
    ];

    #[test]
    fn device_names_match_their_catalog_id_only() {
        let catalog = Catalog::embedded().unwrap();
        assert_eq!(
            catalog.gpu_ids(),
            NAMES.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
            "one name per catalog GPU"
        );
        for (id, _) in NAMES {
            for (other, name) in NAMES {
                assert_eq!(device_is(id, name), id == other, "{id} vs {name}");
            }
        }
        assert!(!device_is("h200", ""));
        assert!(device_is("x-9", "Vendor X 9"));
    }

    #[test]
    fn every_catalog_gpu_is_found_from_its_runtime_name_and_nothing_else() {
        let c = Catalog::embedded().unwrap();
        for (id, name) in NAMES {
            assert_eq!(catalog_gpu(&c, name).as_deref(), Some(id), "{name}");
        }
        for name in [
            "NVIDIA A100",
            "NVIDIA H20",
            "NVIDIA GeForce RTX 3090",
            "",
            "NVIDIA H100 PCIe",
            "NVIDIA H100 NVL",
            "NVIDIA H200 NVL",
            "NVIDIA A100 80GB PCIe",
            "NVIDIA A100-PCIE-40GB",
        ] {
            assert_eq!(catalog_gpu(&c, name), None, "{name}");
        }
        assert_eq!(
            catalog_gpu(&c, "NVIDIA A100 80GB SXM4").as_deref(),
            Some("a100-80gb")
        );
    }
}
