//! The model's JSON files read strictly: `config.json`, `model.safetensors.index.json` and the
//! safetensors headers go through [`parse`], which refuses a key given twice in any object.
//!
//! JSON readers disagree on such a file (most keep the last key, some the first, some refuse
//! it), so a plan read one way could differ from the model `transformers` loads: a duplicate
//! is refused rather than silently read one way. A leading UTF-8 byte-order mark is skipped
//! in the files a text editor may have saved ([`strip_bom`]).

use serde::de::{DeserializeSeed, Error as _, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt;

/// Why [`parse`] refused the bytes.
#[derive(Debug)]
pub enum Problem {
    /// Not JSON (or nested past the reader's depth limit): the reader's own message.
    Invalid(serde_json::Error),
    /// An object holds `key` twice; `parent` is the key of that object, when it is nested.
    Duplicate {
        /// The repeated key.
        key: String,
        /// The key of the object holding it; `None` at the top level.
        parent: Option<String>,
    },
}

impl Problem {
    /// The problem in a few words: `key "k" in "parent" is listed twice` (keys cut and
    /// escaped, [`crate::text::excerpt`]), or `not valid JSON: ` and the reader's message.
    pub fn describe(&self) -> String {
        match self {
            Problem::Invalid(e) => {
                format!("not valid JSON: {}", crate::text::one_line(&e.to_string()))
            }
            Problem::Duplicate { key, parent } => format!(
                "key \"{}\"{} is listed twice",
                crate::text::excerpt(key),
                parent
                    .as_deref()
                    .map(|p| format!(" in \"{}\"", crate::text::excerpt(p)))
                    .unwrap_or_default()
            ),
        }
    }

    /// The one-line message for the file shown as `shown`: `{shown}: ` and
    /// [`describe`](Self::describe), with the reason a duplicate is refused.
    pub fn message(&self, shown: &str) -> String {
        match self {
            Problem::Invalid(_) => format!("{shown}: {}", self.describe()),
            Problem::Duplicate { .. } => format!(
                "{shown}: {} (JSON readers differ on which one counts)",
                self.describe()
            ),
        }
    }
}

/// `bytes` without a leading UTF-8 byte-order mark.
pub fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes)
}

/// Parses one JSON value, refusing an object that holds a key twice, at any depth.
///
/// # Errors
/// [`Problem::Duplicate`] naming the first repeated key; [`Problem::Invalid`] for text that
/// is not one JSON value (trailing text included) or nests deeper than `serde_json`'s limit.
pub fn parse(bytes: &[u8]) -> Result<Value, Problem> {
    let duplicate = RefCell::new(None);
    let mut reader = serde_json::Deserializer::from_slice(bytes);
    let read = Strict {
        duplicate: &duplicate,
        parent: None,
    }
    .deserialize(&mut reader)
    .and_then(|value| reader.end().map(|()| value));
    match (read, duplicate.into_inner()) {
        (_, Some(problem)) => Err(problem),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(Problem::Invalid(e)),
    }
}

/// Reads one value as `serde_json::Value` does, checking each object's keys.
#[derive(Clone, Copy)]
struct Strict<'a> {
    duplicate: &'a RefCell<Option<Problem>>,
    parent: Option<&'a str>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(Strict {
            duplicate: self.duplicate,
            parent: self.parent,
        })? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let slot = match object.entry(key) {
                serde_json::map::Entry::Vacant(slot) => slot,
                serde_json::map::Entry::Occupied(taken) => {
                    *self.duplicate.borrow_mut() = Some(Problem::Duplicate {
                        key: taken.key().clone(),
                        parent: self.parent.map(str::to_owned),
                    });
                    return Err(A::Error::custom("duplicate key"));
                }
            };
            let value = map.next_value_seed(Strict {
                duplicate: self.duplicate,
                parent: Some(slot.key()),
            })?;
            slot.insert(value);
        }
        Ok(Value::Object(object))
    }
}

/// The first duplicate key a typed reader found, shared by its visitors: a visitor that finds
/// one stores it here and stops the reader, so that the caller can tell a duplicate from the
/// reader's own errors ([`typed`]).
pub type Duplicates = RefCell<Option<Problem>>;

/// Runs a typed reader `seed` over `bytes`, as [`parse`] runs its tree builder: the whole
/// text must be one value. `duplicate` is the slot the seed's visitors were given.
///
/// # Errors
/// [`Problem::Duplicate`] when a visitor stored one, else [`Problem::Invalid`] for the
/// reader's error (a seed that stops the reader for its own reasons stores that reason
/// elsewhere and gets `Invalid` back here).
pub fn typed<'de, T: DeserializeSeed<'de>>(
    bytes: &'de [u8],
    duplicate: &Duplicates,
    seed: T,
) -> Result<T::Value, Problem> {
    // Text that is UTF-8 throughout (every real header) is checked in one pass, not string by
    // string as the reader goes; other bytes take the byte reader, which refuses them where
    // it meets them, after whatever came before.
    let read = match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut reader = serde_json::Deserializer::from_str(text);
            seed.deserialize(&mut reader)
                .and_then(|value| reader.end().map(|()| value))
        }
        Err(_) => {
            let mut reader = serde_json::Deserializer::from_slice(bytes);
            seed.deserialize(&mut reader)
                .and_then(|value| reader.end().map(|()| value))
        }
    };
    match (read, duplicate.take()) {
        (_, Some(problem)) => Err(problem),
        (Ok(value), None) => Ok(value),
        (Err(e), None) => Err(Problem::Invalid(e)),
    }
}

/// The first of `items`' keys (in their order) equal to one before it, or `None`.
///
/// Keys in increasing order (the common case: writers sort them) hold no repeat, which one
/// comparison of neighbours shows. Otherwise the 64-bit hashes are sorted (the standard
/// library's keyed SipHash, so a crafted file cannot make them collide), which reads memory
/// in order where a hash set of 10⁶ names misses the cache on every insert; only when two
/// hashes are equal is the set built, to compare the keys as text and find the first one that
/// repeats.
pub fn first_repeated<'k, T>(items: &'k [T], key: impl Fn(&'k T) -> &'k str) -> Option<&'k str> {
    use std::hash::BuildHasher;
    if items.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
        return None;
    }
    let hasher = std::collections::hash_map::RandomState::new();
    let mut hashes: Vec<(u64, u32)> = items
        .iter()
        .zip(0u32..)
        .map(|(k, i)| (hasher.hash_one(key(k)), i))
        .collect();
    hashes.sort_unstable();
    if !hashes.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().map(key).find(|k| !seen.insert(*k))
}

/// Records that `key` is listed twice in the object under `parent` and returns the error that
/// stops the reader.
pub fn duplicate<E: serde::de::Error>(slot: &Duplicates, key: &str, parent: Option<&str>) -> E {
    *slot.borrow_mut() = Some(Problem::Duplicate {
        key: key.to_owned(),
        parent: parent.map(str::to_owned),
    });
    E::custom("duplicate key")
}

/// What kind of JSON value [`Skip`] walked over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool,
    /// A number of any kind.
    Number,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

/// Walks over one value of any kind without keeping it, checking every object's keys as
/// [`parse`] does; says what kind of value it was.
#[derive(Clone, Copy)]
pub struct Skip<'a> {
    /// Where a duplicate is recorded.
    pub duplicate: &'a Duplicates,
    /// The key of the object holding the value, when nested.
    pub parent: Option<&'a str>,
}

impl<'de> DeserializeSeed<'de> for Skip<'_> {
    type Value = Kind;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Kind, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip<'_> {
    type Value = Kind;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Kind, E> {
        Ok(Kind::Bool)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Kind, E> {
        Ok(Kind::Number)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Kind, E> {
        Ok(Kind::Number)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Kind, E> {
        Ok(Kind::Number)
    }
    fn visit_str<E>(self, _: &str) -> Result<Kind, E> {
        Ok(Kind::String)
    }
    fn visit_unit<E>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_none<E>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Kind, A::Error> {
        while seq.next_element_seed(self)?.is_some() {}
        Ok(Kind::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Kind, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key_seed(Key)? {
            if !seen.insert(key.clone()) {
                return Err(duplicate(self.duplicate, &key, self.parent));
            }
            map.next_value_seed(Skip {
                duplicate: self.duplicate,
                parent: Some(&key),
            })?;
        }
        Ok(Kind::Object)
    }
}

/// Reads an object key (or any string) borrowed from the input when it holds no escape.
#[derive(Clone, Copy)]
pub struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = std::borrow::Cow<'de, str>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = std::borrow::Cow<'de, str>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Borrowed(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(std::borrow::Cow::Owned(v))
    }
}

/// Implements the scalar visitor methods (boolean, integers, float, null) of a seed that
/// reads one JSON type, each answering `$wrong`; the string, list and object methods stay the
/// seed's own (a list or object is walked with [`Skip`] so duplicate keys are still refused).
macro_rules! others_are {
    ($wrong:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($wrong)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok($wrong)
        }
    };
}
pub(super) use others_are;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn duplicate(text: &str) -> (String, Option<String>) {
        match parse(text.as_bytes()) {
            Err(Problem::Duplicate { key, parent }) => (key, parent),
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth() {
        assert_eq!(duplicate(r#"{"a":1,"b":2,"a":3}"#), ("a".into(), None));
        assert_eq!(
            duplicate(r#"{"text_config":{"x":1,"x":1}}"#),
            ("x".into(), Some("text_config".into()))
        );
        assert_eq!(
            duplicate(r#"{"l":[{"k":[]},{"k":1,"k":2}]}"#),
            ("k".into(), Some("l".into()))
        );
        let problem = parse(br#"{"model_type":"foo","model_type":"llama"}"#).unwrap_err();
        assert_eq!(
            problem.message("config.json"),
            "config.json: key \"model_type\" is listed twice (JSON readers differ on which one \
             counts)"
        );
        // The same key in two objects is no duplicate.
        assert!(parse(br#"{"a":{"k":1},"b":{"k":1}}"#).is_ok());
    }

    #[test]
    fn invalid_json_is_the_readers_own_error() {
        for text in ["", "{", "{\"a\":1} x", "[1,]", "NaN"] {
            assert!(
                matches!(parse(text.as_bytes()), Err(Problem::Invalid(_))),
                "{text}"
            );
        }
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(parse(deep.as_bytes()), Err(Problem::Invalid(_))));
        assert_eq!(strip_bom(b"\xef\xbb\xbf{}"), b"{}");
        assert_eq!(strip_bom(b"{}"), b"{}");
    }

    proptest! {
        // Without duplicates, the value is exactly what serde_json reads.
        #[test]
        fn same_value_as_serde_json(value in json_value()) {
            let text = serde_json::to_string(&value).unwrap();
            let strict = parse(text.as_bytes()).unwrap();
            let plain: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(strict, plain);
        }

        // Whatever the bytes: a value, an error, never a panic.
        #[test]
        fn any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&bytes);
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            (-1e300f64..1e300).prop_map(Value::from),
            "[a-z\u{202e}\"\\\\]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
