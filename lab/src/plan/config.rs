//! The strict reader of `config.json` fields: whole numbers, booleans and the configuration
//! class's defaults, each failure one line naming the field. What each family reads, and its
//! defaults, is in its own file under [`super::family`].

use crate::{Error, Result};
use serde_json::{Map, Value};

/// Largest `config.json` read, in bytes (16 MiB; real ones are a few KB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Most decoder (or vision encoder) layers a config may state: far above any real model, low
/// enough that listing every layer's tensors stays instant.
pub const MAX_LAYERS: u64 = 100_000;

/// The fields of one JSON object of a config (the top level, or a nested `text_config`).
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    /// Names the object in messages: the `model_type`, or `gemma3 vision_config`.
    label: &'a str,
    /// The configuration class's defaults for fields a config may leave out.
    defaults: &'a [(&'a str, u64)],
}

impl<'a> Fields<'a> {
    /// The fields of `map`, named `label` in messages, without class defaults.
    pub fn new(map: &'a Map<String, Value>, label: &'a str) -> Self {
        Fields {
            map,
            label,
            defaults: &[],
        }
    }

    /// The same fields with these class defaults for absent keys.
    pub fn with_defaults(self, defaults: &'a [(&'a str, u64)]) -> Self {
        Fields { defaults, ..self }
    }

    /// The raw value of `key`, when present.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// A whole number from 1 to 2^40, required.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when it is absent, null or not such a number.
    pub fn required(&self, key: &str) -> Result<u64> {
        self.optional(key)?.ok_or_else(|| {
            Error::usage(format!(
                "config.json (model_type {}) has no \"{key}\": it is needed to plan memory",
                self.label
            ))
        })
    }

    /// A whole number from 1 to 2^40 when present and not null, else the class default (0 is
    /// accepted for `first_k_*` and `n_shared_*` counts).
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when it is present and not such a number.
    pub fn optional(&self, key: &str) -> Result<Option<u64>> {
        match self.map.get(key) {
            // Absent: the class default; an explicit null stays "not set".
            None => Ok(self
                .defaults
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| *v)),
            Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (1..=1 << 40).contains(&v) => Ok(Some(v)),
                Some(0) if key.starts_with("first_k") || key.starts_with("n_shared") => Ok(Some(0)),
                _ => Err(self.bad(key, &n.to_string())),
            },
            Some(other) => Err(self.bad(key, &other.to_string())),
        }
    }

    /// `true` or `false` when present (`None` when absent). The configuration classes type
    /// these fields `bool` and refuse null, and so does this reader.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when it is anything else, null included.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>> {
        match self.map.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(Error::usage(format!(
                "config.json: \"{key}\" must be true or false, found {}",
                crate::text::excerpt(&other.to_string())
            ))),
        }
    }

    /// One field a configuration class knows under several names (its `attribute_map`:
    /// `num_experts` for `num_local_experts`...): the value of whichever is present, the
    /// class default of `names[0]` when none is, required.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when one present is null or not a whole number, when
    /// none is present and the class has no default, or naming both when two present
    /// disagree (the class would keep one of them, which a config stating two counts cannot
    /// be assumed to mean).
    pub fn required_any(&self, names: &[&str]) -> Result<u64> {
        let mut found: Option<(&str, u64)> = None;
        for name in names.iter().filter(|n| self.map.contains_key(**n)) {
            let value = self.required(name)?;
            match found {
                Some((first, v)) if v != value => {
                    return Err(Error::usage(format!(
                        "config.json: {first} {v} and {name} {value} disagree (the configuration class reads them as one field)"
                    )))
                }
                _ => found = Some((name, value)),
            }
        }
        match found {
            Some((_, v)) => Ok(v),
            None => self.required(names.first().copied().unwrap_or_default()),
        }
    }

    /// A list of layer indices, each below `layers`, when present and not null.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when it is not a list of whole numbers below
    /// `layers`.
    pub fn layer_indices(&self, key: &str, layers: u64) -> Result<Option<Vec<u64>>> {
        let bad = |found: &Value| {
            Error::usage(format!(
                "config.json: \"{key}\" must be a list of layer indices from 0 to {}, found {}",
                layers.saturating_sub(1),
                crate::text::excerpt(&found.to_string())
            ))
        };
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_u64().filter(|i| *i < layers).ok_or_else(|| bad(v)))
                .collect::<Result<Vec<u64>>>()
                .map(Some),
            Some(other) => Err(bad(other)),
        }
    }

    /// A string when present and not null.
    ///
    /// # Errors
    /// [`Error::Usage`] naming the field when it is anything else.
    pub fn string(&self, key: &str) -> Result<Option<String>> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(Error::usage(format!(
                "config.json: \"{key}\" must be a string, found {}",
                crate::text::excerpt(&other.to_string())
            ))),
        }
    }

    /// The name these fields go by in messages.
    pub fn label(&self) -> &'a str {
        self.label
    }

    fn bad(&self, key: &str, found: &str) -> Error {
        Error::usage(format!(
            "config.json: \"{key}\" must be a whole number from 1 to 2^40, found {}",
            crate::text::excerpt(found)
        ))
    }
}
