//! One safetensors header read in one pass: the JSON goes straight from the bytes into one
//! compact [`Tensor`] per entry (name borrowed from the header bytes, dtype, shape, offsets),
//! with no JSON tree in between, so that a header of 10⁶ tensors costs about a hundred bytes a
//! tensor on top of its own text.
//!
//! It refuses what the tree reader it replaces refused, in the same order and with the same
//! message ([`super::safetensors::parse_header`] documents the checks): a key given twice at
//! any depth or text that is not JSON first, where the reader meets it; then the first entry
//! (in file order) that is not a well-formed tensor; then the layout of the data. Unknown
//! keys inside an entry are walked over (and checked for duplicates), as the reference
//! library ignores them.

use super::json::{self, others_are, Duplicates, Key, Kind, Skip};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// A safetensors element type: every dtype the reference library reads (`safetensors`
/// 0.7, `src/tensor.rs`, `enum Dtype` and `Dtype::bitsize`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dtype {
    /// `BOOL`, 8 bits.
    Bool,
    /// `F4` (OCP MX FP4, two a byte), 4 bits.
    F4,
    /// `F6_E2M3` (OCP MX FP6), 6 bits.
    F6E2M3,
    /// `F6_E3M2` (OCP MX FP6), 6 bits.
    F6E3M2,
    /// `U8`.
    U8,
    /// `I8`.
    I8,
    /// `F8_E5M2`.
    F8E5M2,
    /// `F8_E4M3`.
    F8E4M3,
    /// `F8_E8M0` (OCP MX scale).
    F8E8M0,
    /// `F8_E4M3FNUZ`.
    F8E4M3Fnuz,
    /// `F8_E5M2FNUZ`.
    F8E5M2Fnuz,
    /// `I16`.
    I16,
    /// `U16`.
    U16,
    /// `F16`.
    F16,
    /// `BF16`.
    Bf16,
    /// `I32`.
    I32,
    /// `U32`.
    U32,
    /// `F32`.
    F32,
    /// `C64` (complex, two 32-bit parts).
    C64,
    /// `F64`.
    F64,
    /// `I64`.
    I64,
    /// `U64`.
    U64,
}

impl Dtype {
    /// Every dtype, in the reference library's order.
    pub const ALL: [Dtype; 22] = [
        Dtype::Bool,
        Dtype::F4,
        Dtype::F6E2M3,
        Dtype::F6E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8E5M2,
        Dtype::F8E4M3,
        Dtype::F8E8M0,
        Dtype::F8E4M3Fnuz,
        Dtype::F8E5M2Fnuz,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::Bf16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
    ];

    /// The name a header spells it with (`"BF16"`, `"F8_E4M3FNUZ"`).
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bool => "BOOL",
            Dtype::F4 => "F4",
            Dtype::F6E2M3 => "F6_E2M3",
            Dtype::F6E3M2 => "F6_E3M2",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8E5M2 => "F8_E5M2",
            Dtype::F8E4M3 => "F8_E4M3",
            Dtype::F8E8M0 => "F8_E8M0",
            Dtype::F8E4M3Fnuz => "F8_E4M3FNUZ",
            Dtype::F8E5M2Fnuz => "F8_E5M2FNUZ",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::Bf16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
        }
    }

    /// Width of one element in bits (`Dtype::bitsize` of the reference library).
    pub fn bits(self) -> u64 {
        match self {
            Dtype::F4 => 4,
            Dtype::F6E2M3 | Dtype::F6E3M2 => 6,
            Dtype::Bool
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8E5M2
            | Dtype::F8E4M3
            | Dtype::F8E8M0
            | Dtype::F8E4M3Fnuz
            | Dtype::F8E5M2Fnuz => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::Bf16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
        }
    }

    /// The dtype spelled `name` exactly (the reference library's names are case-sensitive),
    /// or `None`.
    pub fn from_name(name: &str) -> Option<Dtype> {
        // A match on the text (its length first), not a walk over the 22 names: it runs once
        // per tensor.
        Some(match name {
            "BOOL" => Dtype::Bool,
            "F4" => Dtype::F4,
            "F6_E2M3" => Dtype::F6E2M3,
            "F6_E3M2" => Dtype::F6E3M2,
            "U8" => Dtype::U8,
            "I8" => Dtype::I8,
            "F8_E5M2" => Dtype::F8E5M2,
            "F8_E4M3" => Dtype::F8E4M3,
            "F8_E8M0" => Dtype::F8E8M0,
            "F8_E4M3FNUZ" => Dtype::F8E4M3Fnuz,
            "F8_E5M2FNUZ" => Dtype::F8E5M2Fnuz,
            "I16" => Dtype::I16,
            "U16" => Dtype::U16,
            "F16" => Dtype::F16,
            "BF16" => Dtype::Bf16,
            "I32" => Dtype::I32,
            "U32" => Dtype::U32,
            "F32" => Dtype::F32,
            "C64" => Dtype::C64,
            "F64" => Dtype::F64,
            "I64" => Dtype::I64,
            "U64" => Dtype::U64,
            _ => return None,
        })
    }
}

/// The totals of one header, for [`super::safetensors::Summary`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Tensors read.
    pub tensors: u64,
    /// Elements of all tensors.
    pub elements: u64,
    /// Bytes of tensor data.
    pub data_bytes: u64,
    /// Elements per stored dtype, by name.
    pub elements_by_dtype: std::collections::BTreeMap<String, u64>,
}

/// One tensor of a header. Its shape lies in [`Header::shape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tensor<'a> {
    /// The tensor's name, borrowed from the header bytes unless it holds a JSON escape.
    pub name: Cow<'a, str>,
    /// Element type.
    pub dtype: Dtype,
    /// Elements (the product of the shape; 1 for a scalar).
    pub elements: u64,
    /// First byte of its data, relative to the end of the header.
    pub begin: u64,
    /// One past its last byte, relative to the end of the header.
    pub end: u64,
    /// Where its dimensions lie in the header's dimension list.
    dims: (u32, u32),
}

/// A header read by [`parse`]: its tensors in file order and their totals.
#[derive(Debug, Clone, Default)]
pub struct Header<'a> {
    /// Totals.
    pub summary: Totals,
    /// The tensors in the order the header lists them (`__metadata__` left out).
    pub tensors: Vec<Tensor<'a>>,
    dims: Vec<u64>,
}

impl Header<'_> {
    /// The shape of `tensor` (a tensor of this header), outermost dimension first.
    pub fn shape(&self, tensor: &Tensor) -> &[u64] {
        let (start, len) = tensor.dims;
        &self.dims[start as usize..(start + len) as usize]
    }
}

/// Parses header bytes (the JSON after the 8-byte length) for a data section of `data_len`
/// bytes.
///
/// # Errors
/// The one-line message of [`super::safetensors::parse_header`].
pub fn parse(header: &[u8], data_len: u64) -> Result<Header<'_>, String> {
    // An entry takes 60 bytes or more of text (`"t":{"dtype":"U8","shape":[],"data_offsets":
    // [0,0]}`), real ones about a hundred: sized once for that, the set and the list do not
    // grow by doubling through a header of 10⁶ tensors.
    let guess = header.len() / 96;
    let mut state = State {
        out: Header {
            tensors: Vec::with_capacity(guess),
            ..Header::default()
        },
        keys: Vec::with_capacity(guess),
        problem: None,
        data_len,
        dtype_elements: [None; Dtype::ALL.len()],
    };
    let duplicate = Duplicates::default();
    let read = json::typed(
        header,
        &duplicate,
        Top {
            state: &mut state,
            duplicate: &duplicate,
        },
    );
    // A top-level key given twice before the point where the reader stopped (or anywhere,
    // when it did not) came first, so it is the answer, as the tree reader found it.
    let read = match json::first_repeated(&state.keys, |k| k.as_ref()) {
        Some(key) => Err(json::Problem::Duplicate {
            key: key.to_string(),
            parent: None,
        }),
        None => read,
    };
    read.map_err(|e| match e {
        json::Problem::Duplicate { key, parent: None } => format!(
            "tensor \"{}\" is listed twice in the safetensors header",
            crate::text::excerpt(&key)
        ),
        nested @ json::Problem::Duplicate { .. } => {
            format!("{} in the safetensors header", nested.describe())
        }
        invalid => format!("safetensors header is {}", invalid.describe()),
    })?;
    if let Some(problem) = state.problem {
        return Err(problem);
    }
    let mut out = state.out;
    for (dtype, n) in Dtype::ALL.iter().zip(state.dtype_elements) {
        if let Some(n) = n {
            out.summary
                .elements_by_dtype
                .insert(dtype.name().to_string(), n);
        }
    }
    contiguous(&out.tensors, data_len)?;
    Ok(out)
}

/// What the visitors share while reading one header.
struct State<'de> {
    out: Header<'de>,
    /// Top-level keys met so far (tensor names and `__metadata__`), in file order; checked
    /// for repeats once the reader stops ([`json::first_repeated`]).
    keys: Vec<Cow<'de, str>>,
    /// The first entry problem, in file order; the rest is then only walked over.
    problem: Option<String>,
    data_len: u64,
    /// Elements per dtype met, indexed as [`Dtype::ALL`].
    dtype_elements: [Option<u64>; Dtype::ALL.len()],
}

impl State<'_> {
    fn refuse(&mut self, problem: String) {
        self.problem.get_or_insert(problem);
    }
}

/// The top-level object.
struct Top<'s, 'de, 'd> {
    state: &'s mut State<'de>,
    duplicate: &'d Duplicates,
}

impl<'de> DeserializeSeed<'de> for Top<'_, 'de, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, 'de, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        self.not_object()
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        self.not_object()
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        self.not_object()
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        self.not_object()
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        self.not_object()
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        self.not_object()
    }
    fn visit_none<E>(self) -> Result<(), E> {
        self.not_object()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        Skip {
            duplicate: self.duplicate,
            parent: None,
        }
        .visit_seq(seq)?;
        self.not_object()
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let state = self.state;
        if let Some(n) = map.size_hint() {
            state.out.tensors.reserve(n);
        }
        while let Some(name) = map.next_key_seed(Key)? {
            state.keys.push(name.clone());
            if name == "__metadata__" {
                // The reference reads it as `Option<HashMap<String, String>>`: null is none.
                let ok = map.next_value_seed(Metadata {
                    duplicate: self.duplicate,
                })?;
                if !ok {
                    state.refuse("__metadata__ must be an object of strings".to_string());
                }
                continue;
            }
            let entry = map.next_value_seed(EntrySeed {
                duplicate: self.duplicate,
                parent: &name,
                dims: &mut state.out.dims,
                skip: state.problem.is_some(),
            })?;
            if state.problem.is_none() {
                state.add(name, entry);
            }
        }
        Ok(())
    }
}

impl Top<'_, '_, '_> {
    fn not_object<E>(self) -> Result<(), E> {
        self.state
            .refuse("safetensors header is not a JSON object".to_string());
        Ok(())
    }
}

impl<'de> State<'de> {
    /// Checks one entry as the tree reader did, in its order, and adds it to the header.
    fn add(&mut self, name: Cow<'de, str>, entry: Entry) {
        let dims_start = entry.dims.0 as usize;
        match self.check(&name, &entry) {
            Ok((dtype, elements, begin, end)) => {
                let bad = |what: &str| what.to_string();
                let out = &mut self.out;
                match (
                    out.summary.elements.checked_add(elements),
                    out.summary.data_bytes.checked_add(end - begin),
                ) {
                    (Some(e), Some(b)) => {
                        out.summary.elements = e;
                        out.summary.data_bytes = b;
                    }
                    (None, _) => return self.refuse(bad("the element count overflows 64 bits")),
                    (_, None) => return self.refuse(bad("the data size overflows 64 bits")),
                }
                out.summary.tensors += 1;
                // At most the element total, which was checked above.
                let slot = self.dtype_elements[dtype as usize].get_or_insert(0);
                *slot = slot.saturating_add(elements);
                out.tensors.push(Tensor {
                    name,
                    dtype,
                    elements,
                    begin,
                    end,
                    dims: entry.dims,
                });
            }
            Err(problem) => {
                self.out.dims.truncate(dims_start);
                self.refuse(problem);
            }
        }
    }

    fn check(&self, name: &str, entry: &Entry) -> Result<(Dtype, u64, u64, u64), String> {
        // The name is escaped only for a message: most entries are fine.
        let bad = |what: &str| format!("tensor \"{}\": {what}", crate::text::excerpt(name));
        if !entry.object {
            return Err(bad("entry is not an object"));
        }
        let dtype = match &entry.dtype {
            Field::Absent | Field::Wrong => return Err(bad("no dtype")),
            Field::Unknown(d) => {
                return Err(bad(&format!(
                    "unknown dtype \"{}\"",
                    crate::text::excerpt(d)
                )))
            }
            Field::Known(d) => *d,
        };
        let elements = match entry.shape {
            Field::Absent | Field::Wrong | Field::Unknown(_) => return Err(bad("no shape list")),
            Field::Known(Err(what)) => return Err(bad(what)),
            Field::Known(Ok(n)) => n,
        };
        let (begin, end) = match entry.offsets {
            Field::Known(Some(pair)) => pair,
            Field::Known(None) => return Err(bad("data_offsets must be whole numbers")),
            _ => return Err(bad("data_offsets must be [begin, end]")),
        };
        let data_len = self.data_len;
        if end < begin || end > data_len {
            return Err(bad(&format!(
                "data_offsets [{begin}, {end}] lie outside the {data_len} bytes of data"
            )));
        }
        let want = u128::from(elements) * u128::from(dtype.bits());
        if want % 8 != 0 || u128::from(end - begin) != want / 8 {
            return Err(bad(&format!(
                "{} bytes of data for {elements} {} elements",
                end - begin,
                dtype.name()
            )));
        }
        Ok((dtype, elements, begin, end))
    }
}

/// One field of an entry as read: absent, of the wrong JSON type, a value the checks refuse
/// (`Unknown`, for the dtype), or read.
#[derive(Debug)]
enum Field<T> {
    Absent,
    Wrong,
    Unknown(String),
    Known(T),
}

/// One entry as read, before the checks.
struct Entry {
    object: bool,
    dtype: Field<Dtype>,
    /// The element count, or the first reason the shape is refused.
    shape: Field<Result<u64, &'static str>>,
    /// `[begin, end]` when both are whole numbers, `None` when not.
    offsets: Field<Option<(u64, u64)>>,
    dims: (u32, u32),
}

/// The value of one tensor entry.
struct EntrySeed<'a, 'd> {
    duplicate: &'d Duplicates,
    parent: &'a str,
    dims: &'a mut Vec<u64>,
    /// An earlier entry was refused: only walk this one (its keys still checked).
    skip: bool,
}

impl<'de> DeserializeSeed<'de> for EntrySeed<'_, '_> {
    type Value = Entry;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Entry, D::Error> {
        reader.deserialize_any(self)
    }
}

impl EntrySeed<'_, '_> {
    fn not_object<E>(&self) -> Result<Entry, E> {
        Ok(Entry {
            object: false,
            dtype: Field::Absent,
            shape: Field::Absent,
            offsets: Field::Absent,
            dims: (0, 0),
        })
    }
    fn walker(&self) -> Skip<'_> {
        Skip {
            duplicate: self.duplicate,
            parent: Some(self.parent),
        }
    }
}

impl<'de> Visitor<'de> for EntrySeed<'_, '_> {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a tensor entry")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_i64<E>(self, _: i64) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_u64<E>(self, _: u64) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_f64<E>(self, _: f64) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_str<E>(self, _: &str) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_unit<E>(self) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_none<E>(self) -> Result<Entry, E> {
        self.not_object()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Entry, A::Error> {
        self.walker().visit_seq(seq)?;
        self.not_object()
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        if self.skip {
            self.walker().visit_map(map)?;
            return self.not_object();
        }
        let mut entry = Entry {
            object: true,
            dtype: Field::Absent,
            shape: Field::Absent,
            offsets: Field::Absent,
            dims: (0, 0),
        };
        // Keys other than the three: checked for duplicates only.
        let mut others: HashSet<Cow<'de, str>> = HashSet::new();
        let again = |taken: bool, key: &str| {
            if taken {
                Err(json::duplicate(self.duplicate, key, Some(self.parent)))
            } else {
                Ok(())
            }
        };
        while let Some(key) = map.next_key_seed(Key)? {
            let inner = Skip {
                duplicate: self.duplicate,
                parent: Some(&key),
            };
            match key.as_ref() {
                "dtype" => {
                    again(!matches!(entry.dtype, Field::Absent), &key)?;
                    entry.dtype = map.next_value_seed(DtypeSeed(inner))?;
                }
                "shape" => {
                    again(!matches!(entry.shape, Field::Absent), &key)?;
                    let start = self.dims.len();
                    entry.shape = map.next_value_seed(ShapeSeed {
                        inner,
                        dims: &mut *self.dims,
                    })?;
                    let len = self.dims.len() - start;
                    // The header is at most 100 MB, so positions fit 32 bits; a longer
                    // list is refused as an overflow before it could get there.
                    entry.dims = (
                        u32::try_from(start).unwrap_or(u32::MAX),
                        u32::try_from(len).unwrap_or(0),
                    );
                }
                "data_offsets" => {
                    again(!matches!(entry.offsets, Field::Absent), &key)?;
                    entry.offsets = map.next_value_seed(OffsetsSeed(inner))?;
                }
                _ => {
                    again(others.contains(&key), &key)?;
                    map.next_value_seed(inner)?;
                    others.insert(key);
                }
            }
        }
        Ok(entry)
    }
}

/// A whole number (`Some`), or any other value walked over (`None`).
struct Whole<'a>(Skip<'a>);

impl<'de> DeserializeSeed<'de> for Whole<'_> {
    type Value = Option<u64>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Option<u64>, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Whole<'_> {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a whole number")
    }
    fn visit_u64<E>(self, v: u64) -> Result<Option<u64>, E> {
        Ok(Some(v))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, v: i64) -> Result<Option<u64>, E> {
        // `-0` reads as an i64, and is the whole number 0 to serde_json's `as_u64`.
        Ok(u64::try_from(v).ok())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_str<E>(self, _: &str) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_none<E>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<u64>, A::Error> {
        self.0.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<u64>, A::Error> {
        self.0.visit_map(map).map(|_| None)
    }
}

/// The `dtype` value.
struct DtypeSeed<'a>(Skip<'a>);

impl<'de> DeserializeSeed<'de> for DtypeSeed<'_> {
    type Value = Field<Dtype>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DtypeSeed<'_> {
    type Value = Field<Dtype>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a dtype name")
    }
    others_are!(Field::Wrong);
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(match Dtype::from_name(v) {
            Some(d) => Field::Known(d),
            None => Field::Unknown(v.to_owned()),
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(|_| Field::Wrong)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(|_| Field::Wrong)
    }
}

/// The `shape` value: its dimensions go to `dims`; the answer is the element count or the
/// first reason to refuse it, in the order the tree reader found them.
struct ShapeSeed<'a, 'b> {
    inner: Skip<'a>,
    dims: &'b mut Vec<u64>,
}

impl<'de> DeserializeSeed<'de> for ShapeSeed<'_, '_> {
    type Value = Field<Result<u64, &'static str>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ShapeSeed<'_, '_> {
    type Value = Field<Result<u64, &'static str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a shape list")
    }
    others_are!(Field::Wrong);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Field::Wrong)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.inner.visit_map(map).map(|_| Field::Wrong)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut elements: Result<u64, &'static str> = Ok(1);
        while let Some(dim) = seq.next_element_seed(Whole(self.inner))? {
            if let Some(d) = dim {
                self.dims.push(d);
            }
            if let Ok(n) = elements {
                elements = match dim {
                    None => Err("shape holds something other than whole numbers"),
                    Some(d) => n.checked_mul(d).ok_or("shape overflows 64 bits"),
                };
            }
        }
        Ok(Field::Known(elements))
    }
}

/// The `data_offsets` value: `Known(Some(pair))`, `Known(None)` for two values that are not
/// both whole numbers, `Wrong` for anything but a list of two.
struct OffsetsSeed<'a>(Skip<'a>);

impl<'de> DeserializeSeed<'de> for OffsetsSeed<'_> {
    type Value = Field<Option<(u64, u64)>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OffsetsSeed<'_> {
    type Value = Field<Option<(u64, u64)>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("[begin, end]")
    }
    others_are!(Field::Wrong);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Field::Wrong)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(|_| Field::Wrong)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut values = [None, None];
        let mut count = 0usize;
        while let Some(v) = seq.next_element_seed(Whole(self.0))? {
            if let Some(slot) = values.get_mut(count) {
                *slot = v;
            }
            count += 1;
        }
        Ok(match (count, values) {
            (2, [Some(b), Some(e)]) => Field::Known(Some((b, e))),
            (2, _) => Field::Known(None),
            _ => Field::Wrong,
        })
    }
}

/// The `__metadata__` value: `true` when it is null or an object of strings (its keys checked
/// for duplicates under `__metadata__`).
struct Metadata<'d> {
    duplicate: &'d Duplicates,
}

impl<'de> DeserializeSeed<'de> for Metadata<'_> {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<bool, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Metadata<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("null or an object of strings")
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(true)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        Skip {
            duplicate: self.duplicate,
            parent: Some("__metadata__"),
        }
        .visit_seq(seq)
        .map(|_| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        let mut seen = HashSet::new();
        let mut strings = true;
        while let Some(key) = map.next_key_seed(Key)? {
            if !seen.insert(key.clone()) {
                return Err(json::duplicate(self.duplicate, &key, Some("__metadata__")));
            }
            let kind = map.next_value_seed(Skip {
                duplicate: self.duplicate,
                parent: Some(&key),
            })?;
            strings &= kind == Kind::String;
        }
        Ok(strings)
    }
}

/// The reference library's layout rule (`safetensors/src/tensor.rs`, `Metadata::validate`
/// and `SafeTensors::read_metadata`): sorted by `data_offsets`, the first tensor begins at 0,
/// each begins where the one before ends, and the last ends where the file ends
/// (`InvalidOffset`, `MetadataIncompleteBuffer`). So no overlap, no gap, no trailing data;
/// empty tensors may share an offset. Ties sort by name, so that the message is the same
/// whatever the order of the entries.
fn contiguous(tensors: &[Tensor], data_len: u64) -> Result<(), String> {
    let key = |t: &Tensor| (t.begin, t.end);
    let in_order = tensors.windows(2).all(|w| key(&w[0]) < key(&w[1]));
    let mut order: Vec<&Tensor> = tensors.iter().collect();
    if !in_order {
        order.sort_unstable_by(|a, b| (a.begin, a.end, &a.name).cmp(&(b.begin, b.end, &b.name)));
    }
    let mut end = 0u64;
    let mut before: Option<&str> = None;
    for t in order {
        if t.begin < end {
            return Err(format!(
                "tensors \"{}\" and \"{}\" overlap in the data (corrupt header)",
                crate::text::excerpt(before.unwrap_or_default()),
                crate::text::excerpt(&t.name)
            ));
        }
        if t.begin > end {
            return Err(format!(
                "{} unused bytes before tensor \"{}\" (data_offsets begin at {}, the data before ends at {end}); the safetensors library refuses gaps",
                t.begin - end,
                crate::text::excerpt(&t.name),
                t.begin
            ));
        }
        end = t.end;
        before = Some(&t.name);
    }
    if end != data_len {
        return Err(format!(
            "{} bytes of data past the last tensor (the tensors end at {end} of {data_len}); the safetensors library refuses a file longer than its tensors",
            data_len - end
        ));
    }
    Ok(())
}

#[cfg(test)]
mod oracle;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Read = Result<(Totals, std::collections::BTreeSet<String>), String>;

    fn streamed(bytes: &[u8], data_len: u64) -> Read {
        parse(bytes, data_len).map(|h| {
            let names = h.tensors.into_iter().map(|t| t.name.into_owned()).collect();
            (h.summary, names)
        })
    }

    /// Every dtype of the reference library at its width, spelled exactly; nothing else.
    /// Every name of the reference library reads as its dtype, and only those exact names
    /// (case, padding and near names refused).
    #[test]
    fn dtype_names_read_back_exactly() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::from_name(d.name()), Some(d));
            assert_eq!(Dtype::from_name(&d.name().to_lowercase()), None, "{d:?}");
            assert_eq!(Dtype::from_name(&format!("{} ", d.name())), None, "{d:?}");
        }
        for near in [
            "",
            "F8_E4M3FN",
            "FP16",
            "BFLOAT16",
            "F8",
            "U4",
            "I4",
            "F8_E8M0FNU",
        ] {
            assert_eq!(Dtype::from_name(near), None, "{near}");
        }
    }

    #[test]
    fn every_reference_dtype_is_read_at_its_width() {
        let widths = [
            ("BOOL", 8),
            ("F4", 4),
            ("F6_E2M3", 6),
            ("F6_E3M2", 6),
            ("U8", 8),
            ("I8", 8),
            ("F8_E5M2", 8),
            ("F8_E4M3", 8),
            ("F8_E8M0", 8),
            ("F8_E4M3FNUZ", 8),
            ("F8_E5M2FNUZ", 8),
            ("I16", 16),
            ("U16", 16),
            ("F16", 16),
            ("BF16", 16),
            ("I32", 32),
            ("U32", 32),
            ("F32", 32),
            ("C64", 64),
            ("F64", 64),
            ("I64", 64),
            ("U64", 64),
        ];
        assert_eq!(widths.len(), Dtype::ALL.len());
        for (name, bits) in widths {
            // 8 elements: a whole number of bytes for every width.
            let bytes = 8 * bits / 8;
            let text =
                format!(r#"{{"t":{{"dtype":"{name}","shape":[2,4],"data_offsets":[0,{bytes}]}}}}"#);
            let read = parse(text.as_bytes(), bytes).unwrap();
            assert_eq!(read.tensors[0].dtype.name(), name);
            assert_eq!(read.tensors[0].dtype.bits(), bits);
            assert_eq!(read.summary.elements_by_dtype[name], 8);
            assert_eq!(read.shape(&read.tensors[0]), &[2, 4]);
        }
        for unknown in ["bf16", "F8_E4M3FN", "C128", "Q4", "", "F8_E4M3 "] {
            let text =
                format!(r#"{{"t":{{"dtype":"{unknown}","shape":[1],"data_offsets":[0,1]}}}}"#);
            let e = parse(text.as_bytes(), 1).unwrap_err();
            assert!(e.contains("unknown dtype"), "{unknown}: {e}");
        }
        // A width that is not whole bytes over the tensor is refused, as MisalignedSlice.
        let e = parse(
            br#"{"t":{"dtype":"F6_E2M3","shape":[3],"data_offsets":[0,2]}}"#,
            2,
        )
        .unwrap_err();
        assert!(e.contains("2 bytes of data for 3 F6_E2M3 elements"), "{e}");
    }

    /// Names come straight from the header bytes unless they hold an escape; shapes, offsets
    /// and file order are kept.
    #[test]
    fn tensors_keep_name_shape_offsets_in_file_order() {
        let text = br#"{"b\u0041":{"dtype":"U8","shape":[],"data_offsets":[2,3]},"__metadata__":null,"a":{"shape":[1,2],"data_offsets":[0,2],"x":{"y":[1]},"dtype":"U8"}}"#;
        let read = parse(text, 3).unwrap();
        let names: Vec<&str> = read.tensors.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["bA", "a"]);
        assert!(matches!(read.tensors[0].name, Cow::Owned(_)));
        assert!(matches!(read.tensors[1].name, Cow::Borrowed(_)));
        assert_eq!(read.shape(&read.tensors[0]), &[] as &[u64]);
        assert_eq!(read.tensors[0].elements, 1);
        assert_eq!(read.shape(&read.tensors[1]), &[1, 2]);
        assert_eq!((read.tensors[1].begin, read.tensors[1].end), (0, 2));
        assert_eq!(read.summary.tensors, 2);
    }

    /// Duplicates anywhere, as the tree reader found them.
    #[test]
    fn duplicates_at_every_depth() {
        let cases = [
            (
                r#"{"a":{"dtype":"U8","dtype":"U8","shape":[1],"data_offsets":[0,1]}}"#,
                "key \"dtype\" in \"a\" is listed twice",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1,"x":2}}"#,
                "key \"x\" in \"a\" is listed twice",
            ),
            (
                r#"{"a":{"dtype":"U8","shape":[{"k":1,"k":1}],"data_offsets":[0,1]}}"#,
                "key \"k\" in \"shape\" is listed twice",
            ),
            (
                r#"{"__metadata__":{"f":"pt","f":"pt"}}"#,
                "key \"f\" in \"__metadata__\" is listed twice",
            ),
            (r#"[{"k":1,"k":1}]"#, "\"k\" is listed twice"),
            (
                r#"{"a":[],"a":[]}"#,
                "tensor \"a\" is listed twice in the safetensors header",
            ),
        ];
        for (text, needle) in cases {
            let e = parse(text.as_bytes(), 1).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
            assert_eq!(Err(e), oracle::parse_header(text.as_bytes(), 1).map(|_| ()));
        }
    }

    /// A valid header: entries tiling the data in a shuffled order, some empty, maybe a
    /// `__metadata__`.
    fn valid_header() -> impl Strategy<Value = (String, u64)> {
        let entry = (
            prop::sample::select(vec!["U8", "BF16", "F32", "F4", "C64", "F8_E8M0"]),
            proptest::collection::vec(0u64..4, 0..3),
        );
        (
            proptest::collection::vec(entry, 0..6),
            any::<prop::sample::Index>(),
            prop::option::of(Just(r#""__metadata__":{"format":"pt"}"#)),
        )
            .prop_map(|(entries, rotate, metadata)| {
                let mut offset = 0u64;
                let mut parts: Vec<String> = Vec::new();
                for (i, (dtype, mut shape)) in entries.into_iter().enumerate() {
                    if dtype == "F4" && shape.iter().product::<u64>() % 2 == 1 {
                        shape.push(2);
                    }
                    let bits = Dtype::from_name(dtype).unwrap().bits();
                    let n = shape.iter().product::<u64>() * bits / 8;
                    parts.push(format!(
                        r#""t{i}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{offset},{}]}}"#,
                        offset + n
                    ));
                    offset += n;
                }
                if !parts.is_empty() {
                    let k = rotate.index(parts.len());
                    parts.rotate_left(k);
                }
                if let Some(m) = metadata {
                    parts.insert(0, m.to_string());
                }
                (format!("{{{}}}", parts.join(",")), offset)
            })
    }

    /// One edit of the text: a byte replaced, inserted or removed (from characters that
    /// matter to JSON and to the checks), or a span repeated (a key or entry given twice).
    #[derive(Debug, Clone)]
    enum Edit {
        Replace(prop::sample::Index, u8),
        Insert(prop::sample::Index, u8),
        Remove(prop::sample::Index),
        Repeat(prop::sample::Index, usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        let byte = prop::sample::select(b"{}[],:\"0123456789-.e \\uaA_x\x00\xff".to_vec());
        prop_oneof![
            (any::<prop::sample::Index>(), byte.clone()).prop_map(|(i, b)| Edit::Replace(i, b)),
            (any::<prop::sample::Index>(), byte).prop_map(|(i, b)| Edit::Insert(i, b)),
            any::<prop::sample::Index>().prop_map(Edit::Remove),
            (any::<prop::sample::Index>(), 1usize..80).prop_map(|(i, n)| Edit::Repeat(i, n)),
        ]
    }

    fn apply(bytes: &mut Vec<u8>, edit: &Edit) {
        if bytes.is_empty() {
            return;
        }
        match edit {
            Edit::Replace(i, b) => {
                let i = i.index(bytes.len());
                bytes[i] = *b;
            }
            Edit::Insert(i, b) => bytes.insert(i.index(bytes.len() + 1), *b),
            Edit::Remove(i) => {
                bytes.remove(i.index(bytes.len()));
            }
            Edit::Repeat(i, n) => {
                let start = i.index(bytes.len());
                let end = (start + n).min(bytes.len());
                let span = bytes[start..end].to_vec();
                bytes.splice(start..start, span);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        // Mutated headers: the streaming reader answers exactly what the tree reader answered,
        // the same summary and names or the same message.
        #[test]
        fn same_answer_as_the_tree_reader(
            (text, data_len) in valid_header(),
            edits in proptest::collection::vec(edit(), 0..4),
            data_delta in prop_oneof![Just(0i64), -3i64..4],
        ) {
            let mut bytes = text.into_bytes();
            for e in &edits {
                apply(&mut bytes, e);
            }
            let data_len = data_len.saturating_add_signed(data_delta);
            let old = oracle::parse_header(&bytes, data_len);
            let new = streamed(&bytes, data_len);
            prop_assert_eq!(new, old, "{}", String::from_utf8_lossy(&bytes));
        }

        // Arbitrary bytes, too.
        #[test]
        fn same_answer_on_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200), data_len in 0u64..100) {
            prop_assert_eq!(streamed(&bytes, data_len), oracle::parse_header(&bytes, data_len));
        }
    }
}
