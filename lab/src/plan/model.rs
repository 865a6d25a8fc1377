//! The model folder (or lone `config.json`) read once: the config parsed once into its
//! [`Architecture`], the safetensors headers summed, and where each came from. The rest of
//! the plan takes this [`Model`].

use super::family::{self, Architecture};
use super::{config, json, quantization, safetensors};
use crate::{Error, Result};
use std::path::{Path, PathBuf};

/// A model as `lab plan` read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Model {
    /// The `--model` path as given (a folder or its `config.json`).
    pub path: PathBuf,
    /// The `config.json` read.
    pub config_path: PathBuf,
    /// The folder whose safetensors were looked for; `None` when a `config.json` was given.
    pub folder: Option<PathBuf>,
    /// The `config.json` text as read (its SHA-256 is the measurement's config digest).
    pub config_text: String,
    /// The `config.json` parsed (strictly: no key given twice), for the fields a forward needs
    /// beyond the architecture (`lab measure --model`'s [`crate::decoder`]).
    pub config: serde_json::Value,
    /// The architecture the config describes.
    pub architecture: Architecture,
    /// The safetensors headers' summary, when the folder holds safetensors.
    pub headers: Option<safetensors::Summary>,
}

/// Reads the model at `path`: its config and, in a folder, its safetensors headers.
///
/// # Errors
/// [`Error::Usage`] for a folder without `config.json`, a model file that is not a regular
/// file, an unknown architecture, a key given twice, malformed headers or index, headers of
/// a pre-quantized checkpoint too small for its config ([`quantization::check_complete`]);
/// [`Error::Runtime`] for a path that is missing or cannot be read (a dangling symbolic link
/// included), as for every file `lab` reads (`docs/PROTOCOL.md §8`).
pub fn read(path: &Path) -> Result<Model> {
    match read_any(path)? {
        Reading::Known(model) => Ok(*model),
        // Refused as any unknown model_type: this reader's callers need the layout.
        Reading::Unknown(u) => Err(Error::usage(u.refusal)),
    }
}

/// A folder read by [`read_any`]: a family the tables know, or a `model_type` they do not
/// know whose folder holds safetensors headers ([`super::unknown`] plans it from them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// A known family.
    Known(Box<Model>),
    /// An unknown `model_type` with headers.
    Unknown(super::unknown::Unknown),
}

/// [`read`], except that an unknown `model_type` whose folder holds safetensors headers is
/// returned as [`Reading::Unknown`] instead of refused (without headers it is refused as by
/// [`read`]).
///
/// # Errors
/// As [`read`].
pub fn read_any(path: &Path) -> Result<Reading> {
    let shown = crate::text::one_line(&path.display().to_string());
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::runtime(format!(
            "cannot read --model {shown}: {e}; give a model folder or its config.json"
        ))
    })?;
    let (config_path, folder) = if meta.is_dir() {
        (path.join("config.json"), Some(path.to_path_buf()))
    } else {
        (path.to_path_buf(), None)
    };
    // A config.json that is there but not a file (a folder, a FIFO, a dangling link) is
    // reported as such by the read, not as missing.
    if folder.is_some() && !safetensors::present(&config_path)? {
        return Err(Error::usage(format!(
            "--model {shown}: the folder has no config.json (a Hugging Face model folder holds one)"
        )));
    }
    let config_shown = crate::text::one_line(&config_path.display().to_string());
    let text = crate::input::model_text(&config_path, config::MAX_CONFIG_BYTES, "model config")?;
    // The strict reader refuses a key given twice (a plain reader keeps the last one).
    let value = match json::parse(json::strip_bom(text.as_bytes())) {
        Ok(value) => value,
        Err(json::Problem::Invalid(e)) => {
            return Err(Error::usage(format!(
                "{config_shown} is not valid JSON: {e}"
            )))
        }
        Err(duplicate) => return Err(Error::usage(duplicate.message(&config_shown))),
    };
    let unknown_type = match value.get("model_type") {
        Some(serde_json::Value::String(t)) => family::Family::from_model_type(t).is_none(),
        _ => false,
    };
    let architecture = match family::read(&value) {
        Ok(a) => a,
        Err(e) => {
            let refusal = config_error(&config_shown, &e);
            let headers = match (&folder, unknown_type) {
                (Some(folder), true) => safetensors::read_folder(folder)?,
                _ => None,
            };
            return match headers {
                Some(h) => Ok(Reading::Unknown(super::unknown::Unknown::new(
                    &value,
                    h,
                    refusal.to_string(),
                ))),
                None => Err(refusal),
            };
        }
    };
    let headers = match &folder {
        Some(folder) => safetensors::read_folder(folder)?,
        None => None,
    };
    // A pre-quantized checkpoint's headers are not a parameter count, but they must hold at
    // least what its format packs the config's parameters into (plan::quantization).
    if let (Some(s), Some(q)) = (&headers, quantization::scheme(&value)) {
        if let Some(counts) = architecture.parameter_counts().narrow() {
            quantization::check_complete(&q, &counts, s)?;
        }
    }
    Ok(Reading::Known(Box::new(Model {
        path: path.to_path_buf(),
        config_path,
        folder,
        config_text: text,
        config: value,
        architecture,
        headers,
    })))
}

/// A [`family::read`] error with the config file's path named once: its messages start with
/// `config.json` (replaced by the path) or with the problem (the path put before it).
fn config_error(config_shown: &str, error: &Error) -> Error {
    let message = error.to_string();
    let message = match message
        .strip_prefix("config.json")
        .filter(|rest| rest.starts_with([':', ' ']))
    {
        Some(rest) => format!("{config_shown}{rest}"),
        None => format!("{config_shown}: {message}"),
    };
    match error {
        Error::Usage(_) => Error::usage(message),
        Error::Runtime(_) | Error::OutOfMemory(_) => Error::runtime(message),
    }
}
