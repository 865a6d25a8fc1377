//! `model.safetensors.index.json` read in one pass: its `weight_map` (tensor name -> shard
//! file) straight into a list, every other key walked over, with the strict reader's rule
//! that no object at any depth holds a key twice ([`super::json`]).

use super::json::{self, others_are, Duplicates, Key, Skip};
use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// `weight_map` as read: each tensor with its shard file, or `None` when the value is not a
/// string, in file order.
pub type Entries<'a> = Vec<(Cow<'a, str>, Option<Cow<'a, str>>)>;

/// Reads the `weight_map` of an index: `Ok(None)` when the index has none, or when it (or
/// the whole file) is not an object.
///
/// # Errors
/// [`json::Problem`] for text that is not JSON or an object holding a key twice.
pub fn parse(bytes: &[u8]) -> Result<Option<Entries<'_>>, json::Problem> {
    let duplicate = Duplicates::default();
    let mut entries = Vec::new();
    let read = json::typed(
        bytes,
        &duplicate,
        Top {
            duplicate: &duplicate,
            entries: &mut entries,
        },
    );
    // A tensor named twice before the point where the reader stopped (or anywhere, when it
    // did not) came first, so it is the answer, as the tree reader found it.
    if let Some(tensor) = json::first_repeated(&entries, |(name, _)| name.as_ref()) {
        return Err(json::Problem::Duplicate {
            key: tensor.to_string(),
            parent: Some("weight_map".to_string()),
        });
    }
    Ok(read?.then_some(entries))
}

/// The index object; its answer is whether it has a `weight_map` object, whose entries go to
/// `entries`.
struct Top<'d, 'e, 'de> {
    duplicate: &'d Duplicates,
    entries: &'e mut Entries<'de>,
}

impl<'de> DeserializeSeed<'de> for Top<'_, '_, 'de> {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Top<'_, '_, 'de> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an index object")
    }
    others_are!(false);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip {
            duplicate: self.duplicate,
            parent: None,
        }
        .visit_seq(seq)
        .map(|_| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        let mut found = false;
        while let Some(key) = map.next_key_seed(Key)? {
            if !seen.insert(key.clone()) {
                return Err(json::duplicate(self.duplicate, &key, None));
            }
            if key == "weight_map" {
                found = map.next_value_seed(Map {
                    duplicate: self.duplicate,
                    entries: &mut *self.entries,
                })?;
            } else {
                map.next_value_seed(Skip {
                    duplicate: self.duplicate,
                    parent: Some(&key),
                })?;
            }
        }
        Ok(found)
    }
}

/// The `weight_map` value: whether it is an object, whose entries go to `entries` in file
/// order (a repeated name is found by [`parse`] once the reader stops).
struct Map<'d, 'e, 'de> {
    duplicate: &'d Duplicates,
    entries: &'e mut Entries<'de>,
}

impl<'de> DeserializeSeed<'de> for Map<'_, '_, 'de> {
    type Value = bool;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Map<'_, '_, 'de> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    others_are!(false);
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Skip {
            duplicate: self.duplicate,
            parent: Some("weight_map"),
        }
        .visit_seq(seq)
        .map(|_| false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        if let Some(n) = map.size_hint() {
            self.entries.reserve(n);
        }
        while let Some(tensor) = map.next_key_seed(Key)? {
            // Listed before its value is read: a repeat found after the reader stops inside
            // that value is still the first problem.
            self.entries.push((tensor, None));
            let last = self.entries.len() - 1;
            let file = map.next_value_seed(File(Skip {
                duplicate: self.duplicate,
                parent: Some(&self.entries[last].0),
            }))?;
            self.entries[last].1 = file;
        }
        Ok(true)
    }
}

/// A shard file name (a string), or any other value walked over (`None`).
struct File<'a>(Skip<'a>);

impl<'de> DeserializeSeed<'de> for File<'_> {
    type Value = Option<Cow<'de, str>>;
    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Self::Value, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for File<'_> {
    type Value = Option<Cow<'de, str>>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a file name")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(Cow::Owned(v.to_owned())))
    }
    others_are!(None);
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(map).map(|_| None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    /// A reader's answer: the entries with owned names, or the problem in words.
    type Answer = Result<Option<Vec<(String, Option<String>)>>, String>;

    /// What the tree reader made of the same text: the entries of `weight_map` when it is an
    /// object, file names as strings.
    fn tree(bytes: &[u8]) -> Answer {
        let value = json::parse(bytes).map_err(|e| e.describe())?;
        Ok(value.get("weight_map").and_then(Value::as_object).map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().map(str::to_owned)))
                .collect()
        }))
    }

    fn streamed(bytes: &[u8]) -> Answer {
        parse(bytes).map_err(|e| e.describe()).map(|o| {
            o.map(|v| {
                v.into_iter()
                    .map(|(k, f)| (k.into_owned(), f.map(Cow::into_owned)))
                    .collect()
            })
        })
    }

    #[test]
    fn weight_map_entries_in_file_order() {
        let text =
            br#"{"metadata":{"total_size":3},"weight_map":{"b":"x.safetensors","a\u0041":1}}"#;
        assert_eq!(
            streamed(text).unwrap(),
            Some(vec![
                ("b".into(), Some("x.safetensors".into())),
                ("aA".into(), None)
            ])
        );
        for none in [&br#"[]"#[..], br#"{}"#, br#"{"weight_map":[]}"#, br#"1"#] {
            assert_eq!(streamed(none).unwrap(), None);
        }
        let e = streamed(br#"{"weight_map":{"a":"x","a":"y"}}"#).unwrap_err();
        assert_eq!(e, "key \"a\" in \"weight_map\" is listed twice");
        let e = streamed(br#"{"metadata":{"k":{"z":1,"z":2}},"weight_map":{}}"#).unwrap_err();
        assert_eq!(e, "key \"z\" in \"k\" is listed twice");
    }

    /// A repeated tensor is the answer whenever it comes before the point where the reader
    /// stops: before a nested repeat inside its own value or a later one, a repeated top-level
    /// key, or text that is not JSON; after such a point it is never reached. Entries in any
    /// order (not only sorted) are checked.
    #[test]
    fn a_repeated_tensor_is_answered_where_the_tree_reader_meets_it() {
        let twice = "key \"b\" in \"weight_map\" is listed twice";
        for (text, want) in [
            (r#"{"weight_map":{"b":"x","a":"y","b":"z"}}"#, twice),
            (r#"{"weight_map":{"b":"x","b":{"k":1,"k":2}}}"#, twice),
            (
                r#"{"weight_map":{"b":"x","b":"y","c":{"k":1,"k":2}}}"#,
                twice,
            ),
            (r#"{"weight_map":{"b":"x","b":"y"},"m":1,"m":2}"#, twice),
            (r#"{"weight_map":{"b":"x","b":"y",}}"#, twice),
            (
                r#"{"weight_map":{"b":{"k":1,"k":2},"b":"y"}}"#,
                "key \"k\" in \"b\" is listed twice",
            ),
            (
                r#"{"m":1,"m":2,"weight_map":{"b":"x","b":"y"}}"#,
                "key \"m\" is listed twice",
            ),
        ] {
            assert_eq!(streamed(text.as_bytes()).unwrap_err(), want, "{text}");
            assert_eq!(tree(text.as_bytes()).unwrap_err(), want, "{text}");
        }
        let e = streamed(br#"{"weight_map":{"b":"x",}"#).unwrap_err();
        assert_eq!(Err(e), tree(br#"{"weight_map":{"b":"x",}"#));
    }

    proptest! {
        // Any small index-like text, mutated: the same entries, or the same refusal, as the
        // tree reader.
        #[test]
        fn same_answer_as_the_tree_reader(
            names in proptest::collection::vec("[ab]{1,2}", 0..5),
            cut in any::<prop::sample::Index>(),
            insert in prop::sample::select(b"{}[],:\"1 x\\".to_vec()),
        ) {
            let entries: Vec<String> = names.iter().map(|n| format!(r#""{n}":"{n}.safetensors""#)).collect();
            let text = format!(r#"{{"metadata":{{"total_size":1}},"weight_map":{{{}}}}}"#, entries.join(","));
            let mut bytes = text.into_bytes();
            let at = cut.index(bytes.len() + 1);
            prop_assert_eq!(streamed(&bytes), tree(&bytes));
            bytes.insert(at, insert);
            prop_assert_eq!(streamed(&bytes), tree(&bytes));
        }
    }
}
