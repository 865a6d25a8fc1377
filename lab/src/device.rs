//! The GPU a command names, from the `--device` flag to the worker: [`Device`] (one `cuda:N`)
//! and [`Devices`] (one, `all`, or a list). The text is parsed once, here, into these types;
//! everything after (the configuration, the worker request, the document, the messages) holds
//! the type and shows it through its one [`Display`](std::fmt::Display): `cuda:N`.
//!
//! The grammar is libtorch's own spelling (`torch.device("cuda:1")` prints `cuda:1`): `cuda:`
//! then `0` or a digit 1-9 followed by digits, at most [`DEVICE_INDEX_MAX`]. The Python kit
//! (`dist/mesure_memoire.py`, `_device_reason` and `_devices_reason`) refuses the same
//! spellings with the same words; `lab/tests/differential/refusals.rs` holds the two side by
//! side.

use crate::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Why a device text is refused: one line, without the flag name (clap adds it).
pub type Refusal = String;

/// Largest device index: libtorch's and Python's device indices are signed 32-bit at most,
/// so 2147483647 (`i32::MAX`). The Python kit applies the same rule.
pub const DEVICE_INDEX_MAX: u32 = i32::MAX as u32;

/// A GPU, `cuda:N`: the only device the measurement accepts (ROCm builds of PyTorch name their
/// GPUs `cuda:N` too). Shown and serialized as `cuda:N` (a JSON string); read back by
/// [`Device::parse`], so a document or a request can only hold a device the flag accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Device {
    index: u32,
}

impl Device {
    /// cuda:0: the GPU asked for what does not depend on the GPU (how many libtorch sees,
    /// its version), since every machine with a GPU has it.
    pub const FIRST: Device = Device { index: 0 };

    /// GPU `index`, `None` above [`DEVICE_INDEX_MAX`].
    pub fn new(index: u32) -> Option<Device> {
        (index <= DEVICE_INDEX_MAX).then_some(Device { index })
    }

    /// The GPU index N of `cuda:N` (what libtorch and the worker's C calls take).
    pub fn index(self) -> u32 {
        self.index
    }

    /// Parses `cuda:N` with N written as libtorch prints it: `0`, or a digit 1-9 followed by
    /// digits, at most [`DEVICE_INDEX_MAX`] (no leading zero, sign, space or capital). `cpu`,
    /// `mps`, a bare `cuda` and anything else are refused with one line saying what to write:
    /// the measurement never falls back to the CPU.
    ///
    /// # Errors
    /// A [`Refusal`] naming the problem and the spelling to use.
    pub fn parse(text: &str) -> std::result::Result<Device, Refusal> {
        if let Some(index) = text.strip_prefix("cuda:") {
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return Err("write cuda:N with N a GPU index, e.g. cuda:0".into());
            }
            if index.len() > 1 && index.starts_with('0') {
                let plain = index.trim_start_matches('0');
                let plain = if plain.is_empty() { "0" } else { plain };
                return Err(format!(
                    "the GPU index has a leading zero: write cuda:{plain}"
                ));
            }
            // An index beyond u32 fails to parse: too large as well.
            return index
                .parse::<u32>()
                .ok()
                .and_then(Device::new)
                .ok_or_else(|| {
                    format!(
                        "the GPU index is too large: write cuda:N with N at most {DEVICE_INDEX_MAX}"
                    )
                });
        }
        Err(match text {
            "cuda" => {
                "name the GPU index explicitly, e.g. cuda:0 (a bare 'cuda' is refused)".into()
            }
            "cpu" => "'cpu' is not a GPU: lab measures a GPU and never falls back to the CPU; \
                      write cuda:N"
                .into(),
            t if t == "mps" || t.starts_with("mps:") => "Apple Metal is not supported: the \
                 measurement needs a CUDA or ROCm GPU named cuda:N"
                .into(),
            _ => "write cuda:N, e.g. cuda:0 (ROCm GPUs are cuda:N too)".into(),
        })
    }

    /// [`Device::parse`] as a usage error (exit 2) naming the text: `device 'cpu': ...`.
    ///
    /// # Errors
    /// [`Error::Usage`] when the text is not one `cuda:N`.
    pub fn parse_usage(text: &str) -> Result<Device> {
        Device::parse(text).map_err(|refusal| Error::usage(format!("device '{text}': {refusal}")))
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The one place a device becomes text (`pad`: table columns may give it a width).
        f.pad(&format!("cuda:{}", self.index))
    }
}

impl std::str::FromStr for Device {
    type Err = Refusal;

    fn from_str(text: &str) -> std::result::Result<Device, Refusal> {
        Device::parse(text)
    }
}

/// The document's spelling, as the v1 schema states it (`cuda:` and digits; `lab` itself reads
/// only what [`Device::parse`] accepts).
impl schemars::JsonSchema for Device {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Device".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "pattern": "^cuda:[0-9]+$" })
    }
}

impl Serialize for Device {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Device {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Device, D::Error> {
        let text = String::deserialize(deserializer)?;
        Device::parse(&text)
            .map_err(|refusal| serde::de::Error::custom(format!("device {text:?}: {refusal}")))
    }
}

/// A [`Device`] on the worker's wire as its bare index (`"device_index": 0`), the shape of
/// [`crate::worker::WorkerRequest::Environment`]. Use with `#[serde(with = "as_index")]`.
pub mod as_index {
    use super::Device;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes the index N.
    pub fn serialize<S: Serializer>(
        device: &Device,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_u32(device.index())
    }

    /// Reads an index N, refusing one above [`super::DEVICE_INDEX_MAX`].
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Device, D::Error> {
        let index = u32::deserialize(deserializer)?;
        Device::new(index).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "device index {index} is above {}",
                super::DEVICE_INDEX_MAX
            ))
        })
    }
}

/// What `--device` names on the commands that may use several GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// `cuda:N`: one GPU.
    One(Device),
    /// `all`: every GPU libtorch sees.
    All,
    /// `cuda:0,cuda:1,...`: these GPUs, in this order, no repeats.
    List(Vec<Device>),
}

impl Devices {
    /// One `cuda:N` ([`Device::parse`]), `all`, or a list `cuda:0,cuda:1` (commas only, no
    /// spaces, no empty entry, each GPU once).
    ///
    /// # Errors
    /// A [`Refusal`] naming the entry that is wrong.
    pub fn parse(text: &str) -> std::result::Result<Devices, Refusal> {
        if text == "all" {
            return Ok(Devices::All);
        }
        if !text.contains(',') {
            return Device::parse(text).map(Devices::One);
        }
        let mut list = Vec::new();
        for part in text.split(',') {
            if part.is_empty() {
                return Err("has an empty entry: write cuda:0,cuda:1 (or all)".into());
            }
            let device =
                Device::parse(part).map_err(|refusal| format!("entry '{part}': {refusal}"))?;
            if list.contains(&device) {
                return Err(format!(
                    "names {device} twice: list each GPU once (or write all)"
                ));
            }
            list.push(device);
        }
        Ok(Devices::List(list))
    }

    /// [`Devices::parse`] as a usage error (exit 2) naming the text.
    ///
    /// # Errors
    /// [`Error::Usage`] when the text is not a device, `all` or a list.
    pub fn parse_usage(text: &str) -> Result<Devices> {
        Devices::parse(text).map_err(|refusal| Error::usage(format!("device '{text}': {refusal}")))
    }

    /// The GPUs to use, given how many GPUs libtorch sees. `All` with no GPU, or a device
    /// that does not exist, is a usage error (exit 2; nothing was measured).
    ///
    /// # Errors
    /// [`Error::Usage`] naming the missing GPU and the ones that exist.
    pub fn resolve(&self, device_count: u64) -> Result<Vec<Device>> {
        let check = |device: Device| {
            if u64::from(device.index()) < device_count {
                Ok(device)
            } else if device_count == 0 {
                Err(Error::usage(
                    "libtorch sees no GPU: check the driver with nvidia-smi; nothing was measured",
                ))
            } else {
                Err(Error::usage(format!(
                    "{device} does not exist: libtorch sees {device_count} GPU(s), {}; nothing \
                     was measured",
                    visible_range(device_count)
                )))
            }
        };
        match self {
            Devices::One(device) => Ok(vec![check(*device)?]),
            Devices::List(list) => list.iter().map(|d| check(*d)).collect(),
            Devices::All if device_count == 0 => Err(check(Device::FIRST).unwrap_err()),
            Devices::All => Ok(
                (0..device_count.min(u64::from(DEVICE_INDEX_MAX) + 1) as u32)
                    .map(|index| Device { index })
                    .collect(),
            ),
        }
    }

    /// Whether this names several GPUs (or may: `all`).
    pub fn is_several(&self) -> bool {
        !matches!(self, Devices::One(_))
    }

    /// The device a measurement's flags are checked for before anything runs: the one named,
    /// else [`Device::FIRST`] (several GPUs get the same flags, checked once).
    pub fn checked_as(&self) -> Device {
        match self {
            Devices::One(device) => *device,
            Devices::List(_) | Devices::All => Device::FIRST,
        }
    }
}

/// `cuda:0 to cuda:3`: the GPUs libtorch sees when it counts `count` of them (at least one),
/// as the messages about a missing GPU name them (`lab` and the worker).
pub fn visible_range(count: u64) -> String {
    let last = count.saturating_sub(1).min(u64::from(DEVICE_INDEX_MAX)) as u32;
    format!("{} to {}", Device::FIRST, Device { index: last })
}

/// The devices as `cuda:0,cuda:1` (how a summary names the GPUs its points ran on).
pub fn list_text(devices: &[Device]) -> String {
    devices
        .iter()
        .map(Device::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cuda(index: u32) -> Device {
        Device::new(index).unwrap()
    }

    proptest! {
        #[test]
        fn every_index_round_trips(n in any::<u64>()) {
            let text = format!("cuda:{n}");
            let parsed = Device::parse(&text);
            prop_assert_eq!(parsed.is_ok(), n <= u64::from(DEVICE_INDEX_MAX));
            if let Ok(device) = parsed {
                prop_assert_eq!(device.to_string(), text);
                prop_assert_eq!(u64::from(device.index()), n);
            }
        }

        #[test]
        fn anything_but_digits_is_refused(prefix in "[0-9]{0,5}", odd in "[^0-9]", suffix in "[0-9]{0,5}") {
            let text = format!("cuda:{prefix}{odd}{suffix}");
            prop_assert!(Device::parse(&text).is_err(), "{:?}", text);
        }
    }

    #[test]
    fn devices_are_cuda_with_a_plain_index() {
        assert_eq!(Device::parse("cuda:0"), Ok(cuda(0)));
        assert_eq!(
            Device::parse("cuda:7").map(|d| d.to_string()),
            Ok("cuda:7".into())
        );
        assert_eq!(
            Device::parse("cuda:123456789").map(Device::index),
            Ok(123_456_789)
        );
        assert_eq!(Device::new(DEVICE_INDEX_MAX + 1), None);
        for bad in [
            "cuda:00",
            "cuda:01",
            "cuda:+1",
            "cuda:-1",
            "cuda: 1",
            " cuda:0",
            "cuda:0 ",
            "cuda:2147483648",
            "cuda:99999999999999999999",
            "cuda:",
            "cuda:x",
            "CUDA:0",
            "cuda",
            "cpu",
            "mps",
            "mps:0",
            "cuda:0\n",
            "cuda:٣",
            "",
        ] {
            let refusal = Device::parse(bad).unwrap_err();
            assert!(!refusal.contains('\n'), "{bad:?}");
        }
        assert!(Device::parse("cpu")
            .unwrap_err()
            .contains("never falls back"));
        assert!(Device::parse("cuda").unwrap_err().contains("explicitly"));
        assert!(Device::parse("mps:0").unwrap_err().contains("Metal"));
        assert!(Device::parse("cuda:007")
            .unwrap_err()
            .contains("write cuda:7"));
        assert!(Device::parse("cuda:00")
            .unwrap_err()
            .contains("write cuda:0"));
        assert!(Device::parse("cuda:2147483648")
            .unwrap_err()
            .contains("at most 2147483647"));
        let e = Device::parse_usage("cpu").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("device 'cpu': "), "{e}");
    }

    #[test]
    fn a_device_is_a_json_string_and_a_bare_index_on_the_wire() {
        assert_eq!(serde_json::to_string(&cuda(3)).unwrap(), r#""cuda:3""#);
        assert_eq!(
            serde_json::from_str::<Device>(r#""cuda:12""#).unwrap(),
            cuda(12)
        );
        for bad in [r#""cuda:01""#, r#""cpu""#, "3", r#""cuda:2147483648""#] {
            assert!(serde_json::from_str::<Device>(bad).is_err(), "{bad}");
        }
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Wire {
            #[serde(with = "as_index")]
            device_index: Device,
        }
        let wire = Wire {
            device_index: cuda(5),
        };
        assert_eq!(
            serde_json::to_string(&wire).unwrap(),
            r#"{"device_index":5}"#
        );
        assert_eq!(
            serde_json::from_str::<Wire>(r#"{"device_index":5}"#).unwrap(),
            wire
        );
        assert!(serde_json::from_str::<Wire>(r#"{"device_index":2147483648}"#).is_err());
    }

    #[test]
    fn device_lists() {
        assert_eq!(Devices::parse("all"), Ok(Devices::All));
        assert_eq!(Devices::parse("cuda:1"), Ok(Devices::One(cuda(1))));
        assert_eq!(
            Devices::parse("cuda:1,cuda:0"),
            Ok(Devices::List(vec![cuda(1), cuda(0)]))
        );
        for (bad, needle) in [
            ("cuda:0,cuda:0", "names cuda:0 twice"),
            ("cuda:0,", "empty entry"),
            (",cuda:0", "empty entry"),
            ("cuda:0,,cuda:1", "empty entry"),
            ("cuda:0, cuda:3", "entry ' cuda:3'"),
            ("cuda:0,cpu", "never falls back"),
            ("cuda:0,cuda:01", "leading zero"),
            ("cuda:0,all", "entry 'all'"),
            (" all ", "write cuda:N"),
            ("ALL", "write cuda:N"),
        ] {
            let refusal = Devices::parse(bad).unwrap_err();
            assert!(refusal.contains(needle), "{bad:?}: {refusal}");
        }
        let e = Devices::parse_usage("cuda:0,cuda:0").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("twice"), "{e}");
        assert!(Devices::All.is_several());
        assert!(!Devices::One(cuda(0)).is_several());
        assert_eq!(Devices::One(cuda(4)).checked_as(), cuda(4));
        assert_eq!(Devices::List(vec![cuda(2), cuda(1)]).checked_as(), cuda(0));
        assert_eq!(Devices::All.checked_as(), cuda(0));
        assert_eq!(list_text(&[cuda(0), cuda(3)]), "cuda:0,cuda:3");
        assert_eq!(visible_range(4), "cuda:0 to cuda:3");
        assert_eq!(visible_range(1), "cuda:0 to cuda:0");
    }

    #[test]
    fn resolution_against_the_visible_gpus() {
        assert_eq!(Devices::All.resolve(2).unwrap(), vec![cuda(0), cuda(1)]);
        assert_eq!(
            Devices::List(vec![cuda(1), cuda(0)]).resolve(2).unwrap(),
            vec![cuda(1), cuda(0)]
        );
        let e = Devices::List(vec![cuda(0), cuda(2)])
            .resolve(2)
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("cuda:2 does not exist"), "{e}");
        assert!(e.to_string().contains("cuda:0 to cuda:1"), "{e}");
        let e = Devices::All.resolve(0).unwrap_err();
        assert!(e.to_string().contains("sees no GPU"), "{e}");
        assert_eq!(Devices::One(cuda(0)).resolve(1).unwrap(), vec![cuda(0)]);
    }
}
