//! `phases` in the document: the five protocol steps ([`Phase`]) and one measured row per
//! step ([`PhaseRow`]); `docs/PROTOCOL.md §4`.

use super::AllocatorCounters;

/// Longest time a timing field of a measurement document may hold: 30 days (2,592,000 s),
/// the longest package of the catalog. A measurement runs on a rented package, so no phase of
/// it (nor a graph capture or replay) lasts longer; `1e308` s is a corrupt or forged file.
pub const MAX_SECONDS: f64 = 2_592_000.0;

/// Shortest non-zero time a timing field may hold: one nanosecond, the resolution of the
/// finest clock either twin reads (`Instant`, `time.perf_counter_ns`; CUDA events resolve
/// about half a microsecond). A smaller positive value (a subnormal such as `5e-324`) is not
/// a time any clock measured.
pub const MIN_SECONDS: f64 = 1e-9;

/// Checks one timing field of a document read from a file: a finite number of seconds from
/// [`MIN_SECONDS`] to [`MAX_SECONDS`], or exactly 0 where `zero` says a clock may read nothing
/// (a CUDA-event time of an empty range; a host clock around a step always moves: a wall time
/// of 0 is refused). `field` names it as the document does (`phases[3].wall_seconds`).
///
/// # Errors
/// One line naming the field, the value, the bound and why.
pub fn check_seconds(field: &str, value: f64, zero: bool) -> std::result::Result<(), String> {
    let shown = serde_json::to_string(&value).unwrap_or_else(|_| value.to_string());
    let range = format!(
        "a time of {MIN_SECONDS} s (one nanosecond, the finest clock) to {MAX_SECONDS} s (30 \
         days, the longest package){}",
        if zero { ", or 0" } else { "" }
    );
    let why = if !value.is_finite() {
        "not a finite number"
    } else if value < 0.0 {
        "negative"
    } else if value == 0.0 {
        if zero {
            return Ok(());
        }
        "zero, and a host clock around a step always moves"
    } else if value < MIN_SECONDS {
        "below one nanosecond"
    } else if value > MAX_SECONDS {
        "more than 30 days"
    } else {
        return Ok(());
    };
    Err(format!(
        "{field} is {shown}, {why}; it must be {range} (write a document with lab measure or \
         mesure_memoire.py)"
    ))
}
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The five phases of the protocol, in the order they run (their document names are
/// `model_load`, `inputs`, `cold_forward`, `warmup`, `warm_forward`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Build and initialise the model on the CPU, move it to the GPU.
    ModelLoad,
    /// Create the synthetic input on the GPU.
    Inputs,
    /// First forward pass.
    ColdForward,
    /// All warm-up passes together.
    Warmup,
    /// One timed forward pass after warm-up (one row per repetition).
    WarmForward,
}

impl Phase {
    /// All phases in protocol order.
    pub const ALL: [Phase; 5] = [
        Phase::ModelLoad,
        Phase::Inputs,
        Phase::ColdForward,
        Phase::Warmup,
        Phase::WarmForward,
    ];

    /// The name used in the document (`model_load`, ..., `warm_forward`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::ModelLoad => "model_load",
            Phase::Inputs => "inputs",
            Phase::ColdForward => "cold_forward",
            Phase::Warmup => "warmup",
            Phase::WarmForward => "warm_forward",
        }
    }
}

/// Writes the document name (`model_load`, ...).
impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: table columns give a width (`{:<13}`).
        f.pad(self.as_str())
    }
}

/// One row of `phases`: one protocol step (`docs/PROTOCOL.md §4`).
///
/// In the schema, a `warm_forward` row has an integer repetition and every other row a null one.
///
/// Read by a hand-written visitor ([`Deserialize`] below), not serde's derive: the derive of a
/// `#[serde(flatten)]` field buffers every row into a generic map first, which for a document
/// of 100,000 repetitions cost more than the rest of `lab report --json` together.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(extend(
    "if" = { "properties": { "phase": { "const": "warm_forward" } } },
    "then" = { "properties": { "repetition": { "type": "integer" } } },
    "else" = { "properties": { "repetition": { "type": "null" } } }
))]
pub struct PhaseRow {
    /// The step.
    pub phase: Phase,
    /// 1-based index for `warm_forward`, `None` (JSON null) for the other phases.
    #[schemars(range(min = 1))]
    pub repetition: Option<u64>,
    /// Forward passes run inside the step (0 for model_load and inputs). Not in the v1 schema
    /// (any value is valid there), so left out of the generated one.
    #[schemars(skip)]
    pub forward_passes: u64,
    /// Host clock around the whole step (synchronize, counter reads, work, synchronize), s.
    #[schemars(range(min = 0))]
    pub wall_seconds: f64,
    /// Time between two CUDA events recorded on the current stream around the work, s;
    /// `None` where not measured. Includes the GPU waiting for the host's launches.
    #[schemars(range(min = 0))]
    pub gpu_seconds: Option<f64>,
    /// The allocator's six counters around the step (flattened: six keys of the row).
    #[serde(flatten)]
    pub counters: AllocatorCounters,
}

/// A row's time read so that a value that is not a number names its field (`invalid type:
/// string "NaN", expected wall_seconds: a number of seconds`); `nullable` takes JSON null as
/// `None` (`gpu_seconds`).
#[derive(Clone, Copy)]
struct SecondsSeed {
    field: &'static str,
    nullable: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for SecondsSeed {
    type Value = Option<f64>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        if self.nullable {
            d.deserialize_option(self)
        } else {
            d.deserialize_f64(self)
        }
    }
}

impl<'de> serde::de::Visitor<'de> for SecondsSeed {
    type Value = Option<f64>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: a number of seconds", self.field)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Option<f64>, E> {
        Ok(Some(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Option<f64>, E> {
        Ok(Some(v as f64))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Option<f64>, E> {
        Ok(Some(v as f64))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Option<f64>, E> {
        if self.nullable {
            Ok(None)
        } else {
            Err(E::invalid_type(serde::de::Unexpected::Unit, &self))
        }
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Option<f64>, E> {
        self.visit_none()
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<f64>, D::Error> {
        d.deserialize_f64(self)
    }
}

/// The keys of a row as serde's derive would name them; every other key is ignored, as the
/// derive does (documents may gain fields).
#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum RowKey {
    Phase,
    Repetition,
    ForwardPasses,
    WallSeconds,
    GpuSeconds,
    BaselineAllocatedBytes,
    BaselineReservedBytes,
    EndAllocatedBytes,
    EndReservedBytes,
    PeakAllocatedBytes,
    PeakReservedBytes,
    #[serde(other)]
    Other,
}

/// Reads one row field by field, with the derive's rules and words: an object only (not an
/// array), each key at most once (`duplicate field `phase``), every key but `repetition` and
/// `gpu_seconds` required (`missing field `wall_seconds``; those two read as `None` when
/// absent, as an `Option` does under the derive), unknown keys skipped.
impl<'de> Deserialize<'de> for PhaseRow {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RowVisitor;

        impl<'de> serde::de::Visitor<'de> for RowVisitor {
            type Value = PhaseRow;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("struct PhaseRow")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PhaseRow, A::Error> {
                use serde::de::Error as _;
                // Refused at the key, before its value is read (where the derive stops).
                fn once<'de, T: Deserialize<'de>, A: serde::de::MapAccess<'de>>(
                    map: &mut A,
                    slot: &mut Option<T>,
                    name: &'static str,
                ) -> Result<(), A::Error> {
                    if slot.is_some() {
                        return Err(A::Error::duplicate_field(name));
                    }
                    *slot = Some(map.next_value()?);
                    Ok(())
                }
                let mut phase = None;
                let mut repetition = None;
                let mut forward_passes = None;
                let mut wall_seconds = None;
                let mut gpu_seconds = None;
                let mut counters: [Option<u64>; 6] = [None; 6];
                const COUNTERS: [&str; 6] = [
                    "baseline_allocated_bytes",
                    "baseline_reserved_bytes",
                    "end_allocated_bytes",
                    "end_reserved_bytes",
                    "peak_allocated_bytes",
                    "peak_reserved_bytes",
                ];
                while let Some(key) = map.next_key::<RowKey>()? {
                    let counter = match key {
                        RowKey::Phase => {
                            once(&mut map, &mut phase, "phase")?;
                            continue;
                        }
                        RowKey::Repetition => {
                            once(&mut map, &mut repetition, "repetition")?;
                            continue;
                        }
                        RowKey::ForwardPasses => {
                            once(&mut map, &mut forward_passes, "forward_passes")?;
                            continue;
                        }
                        RowKey::WallSeconds => {
                            if wall_seconds.is_some() {
                                return Err(A::Error::duplicate_field("wall_seconds"));
                            }
                            wall_seconds = map.next_value_seed(SecondsSeed {
                                field: "wall_seconds",
                                nullable: false,
                            })?;
                            continue;
                        }
                        RowKey::GpuSeconds => {
                            if gpu_seconds.is_some() {
                                return Err(A::Error::duplicate_field("gpu_seconds"));
                            }
                            gpu_seconds = Some(map.next_value_seed(SecondsSeed {
                                field: "gpu_seconds",
                                nullable: true,
                            })?);
                            continue;
                        }
                        RowKey::Other => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                            continue;
                        }
                        RowKey::BaselineAllocatedBytes => 0,
                        RowKey::BaselineReservedBytes => 1,
                        RowKey::EndAllocatedBytes => 2,
                        RowKey::EndReservedBytes => 3,
                        RowKey::PeakAllocatedBytes => 4,
                        RowKey::PeakReservedBytes => 5,
                    };
                    once(&mut map, &mut counters[counter], COUNTERS[counter])?;
                }
                let phase = phase.ok_or_else(|| A::Error::missing_field("phase"))?;
                let forward_passes =
                    forward_passes.ok_or_else(|| A::Error::missing_field("forward_passes"))?;
                let wall_seconds =
                    wall_seconds.ok_or_else(|| A::Error::missing_field("wall_seconds"))?;
                let mut values = [0u64; 6];
                for (i, slot) in counters.iter().enumerate() {
                    values[i] = slot.ok_or_else(|| A::Error::missing_field(COUNTERS[i]))?;
                }
                let [baseline_allocated_bytes, baseline_reserved_bytes, end_allocated_bytes, end_reserved_bytes, peak_allocated_bytes, peak_reserved_bytes] =
                    values;
                Ok(PhaseRow {
                    phase,
                    repetition: repetition.unwrap_or(None),
                    forward_passes,
                    wall_seconds,
                    gpu_seconds: gpu_seconds.flatten(),
                    counters: AllocatorCounters {
                        baseline_allocated_bytes,
                        baseline_reserved_bytes,
                        end_allocated_bytes,
                        end_reserved_bytes,
                        peak_allocated_bytes,
                        peak_reserved_bytes,
                    },
                })
            }
        }

        deserializer.deserialize_map(RowVisitor)
    }
}
