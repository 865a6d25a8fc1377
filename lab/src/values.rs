//! The one grammar of command-line values: flag text becomes a typed value here, and nowhere
//! else. Every command that takes a kind of value (a count, a package duration, a GPU, an
//! element type, a reserve in GiB) accepts and refuses exactly the same spellings.
//!
//! The functions know nothing of flag names: `lab` hands them to clap as value parsers, and
//! clap adds the flag to the message (`invalid value ' 3' for '--lots <N>': ...`), so the
//! library behind the flags only ever sees typed values.
//!
//! The rule for whole numbers is strict and the same everywhere: plain ASCII digits `0`-`9`,
//! at least one, nothing else — no sign (not even `+`), no space, no decimal point, exponent
//! or separator. Leading zeros carry no value and are accepted (`007` is 7), except in a
//! device index, which is written the way libtorch prints it.

use crate::catalog::{durations_list, DURATIONS};
use crate::document::Dtype;
use crate::estimate::{RESERVE_MAX_FRACTION_DIGITS, RESERVE_MAX_INTEGER_DIGITS};
use crate::fleet::Devices;
use rust_decimal::Decimal;

/// The message of a refused value: one line, without the flag name (clap adds it).
pub type Refusal = String;

/// A whole number `min..=max` written with ASCII digits only (see the module documentation).
///
/// # Errors
/// A [`Refusal`] giving the accepted range, with a hint when the text looks like a decimal,
/// an exponent or a number with separators.
pub fn whole(text: &str, min: u64, max: u64) -> Result<u64, Refusal> {
    let range = if max == u64::MAX {
        format!("of at least {min}")
    } else {
        format!("from {min} to {max}")
    };
    let digits_only = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    if digits_only {
        // An overlong number is simply too large; leading zeros are harmless.
        return match text.parse::<u64>() {
            Ok(value) if (min..=max).contains(&value) => Ok(value),
            Ok(value) if value < min => Err(format!("must be a whole number {range}")),
            // Too large: now the upper bound is worth stating.
            _ => Err(format!("must be a whole number from {min} to {max}")),
        };
    }
    let hint = if text.starts_with(['-', '+']) {
        " (no sign)"
    } else if text.contains(char::is_whitespace) {
        " (no spaces)"
    } else if text.contains(['e', 'E', '.', ',', '_']) {
        " (write all the digits: no decimal point, exponent or separator)"
    } else {
        ""
    };
    Err(format!(
        "must be a whole number {range}, written with the digits 0-9 only{hint}"
    ))
}

/// A whole number of at least 1 (lots, GPUs, accepted results, batch, context, width,
/// parameters, repetitions of a sweep bound...).
///
/// # Errors
/// As [`whole`].
pub fn positive(text: &str) -> Result<u64, Refusal> {
    whole(text, 1, u64::MAX)
}

/// A whole number of at least 0 (e.g. accepted results of a run that produced none).
///
/// # Errors
/// As [`whole`].
pub fn count(text: &str) -> Result<u64, Refusal> {
    whole(text, 0, u64::MAX)
}

/// A whole number from 1 to `u32::MAX` (e.g. a storage width in bits).
///
/// # Errors
/// As [`whole`].
pub fn positive_u32(text: &str) -> Result<u32, Refusal> {
    whole(text, 1, u64::from(u32::MAX)).map(|v| v as u32)
}

/// A pass count from 0 to `u32::MAX` (warm-up passes).
///
/// # Errors
/// As [`whole`].
pub fn passes(text: &str) -> Result<u64, Refusal> {
    whole(text, 0, u64::from(u32::MAX))
}

/// Most measured repetitions: one document row each, about 540 bytes at the longest, so a
/// document of this many stays under [`crate::document::MAX_DOCUMENT_BYTES`] and every
/// measurement `lab measure` writes can be read back by `lab report` and `lab record`
/// (`mesure_memoire.py` has the same bound).
pub const MAX_REPETITIONS: u64 = 100_000;

/// A pass count from 1 to [`MAX_REPETITIONS`] (measured repetitions).
///
/// # Errors
/// As [`whole`].
pub fn repetitions(text: &str) -> Result<u64, Refusal> {
    whole(text, 1, MAX_REPETITIONS)
}

/// A random seed from 0 to `i64::MAX` (libtorch seeds are signed 64-bit).
///
/// # Errors
/// As [`whole`].
pub fn seed(text: &str) -> Result<u64, Refusal> {
    whole(text, 0, i64::MAX as u64)
}

/// Largest value a sweep may reach in its varied dimension (2^40).
pub const SWEEP_MAX: u64 = 1 << 40;

/// A sweep bound or resolution, from 1 to [`SWEEP_MAX`].
///
/// # Errors
/// As [`whole`].
pub fn sweep_value(text: &str) -> Result<u64, Refusal> {
    whole(text, 1, SWEEP_MAX)
}

/// A package duration in days: one of the catalog's durations (3, 7, 30), spelt as a whole
/// number. Packages are not pro-rated, so any other duration is refused.
///
/// # Errors
/// A [`Refusal`] listing the valid durations.
pub fn days(text: &str) -> Result<u32, Refusal> {
    whole(text, 1, u64::from(u32::MAX))
        .ok()
        .map(|d| d as u32)
        .filter(|d| DURATIONS.contains(d))
        .ok_or_else(|| {
            format!(
                "must be one of {} (packages are not pro-rated)",
                durations_list()
            )
        })
}

/// Largest device index: libtorch's and Python's device indices are signed 32-bit at most,
/// so 2147483647 (`i32::MAX`). The Python kit applies the same rule.
pub const DEVICE_INDEX_MAX: u32 = i32::MAX as u32;

/// A GPU, `cuda:N`: the only device the measurement accepts (ROCm builds of PyTorch name their
/// GPUs `cuda:N` too). Displayed as `cuda:N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Device {
    /// The GPU index N.
    pub index: u32,
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cuda:{}", self.index)
    }
}

/// A device, `cuda:N` with N written as libtorch prints it: `0`, or a digit 1-9 followed by
/// digits, at most [`DEVICE_INDEX_MAX`] (no leading zero, sign, space or capital). `cpu`,
/// `mps`, a bare `cuda` and anything else are refused with one line saying what to write:
/// the measurement never falls back to the CPU.
///
/// # Errors
/// A [`Refusal`] naming the problem and the spelling to use.
pub fn device(text: &str) -> Result<Device, Refusal> {
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
        return match index.parse::<u32>() {
            Ok(index) if index <= DEVICE_INDEX_MAX => Ok(Device { index }),
            _ => Err(format!(
                "the GPU index is too large: write cuda:N with N at most {DEVICE_INDEX_MAX}"
            )),
        };
    }
    Err(match text {
        "cuda" => "name the GPU index explicitly, e.g. cuda:0 (a bare 'cuda' is refused)".into(),
        "cpu" => "'cpu' is not a GPU: lab measures a GPU and never falls back to the CPU; \
                  write cuda:N"
            .into(),
        t if t == "mps" || t.starts_with("mps:") => "Apple Metal is not supported: the \
             measurement needs a CUDA or ROCm GPU named cuda:N"
            .into(),
        _ => "write cuda:N, e.g. cuda:0 (ROCm GPUs are cuda:N too)".into(),
    })
}

/// The GPUs a measurement or a diagnostic names: one `cuda:N` ([`device`]), `all`, or a
/// list `cuda:0,cuda:1` (commas only, no spaces, no empty entry, each GPU once).
///
/// # Errors
/// A [`Refusal`] naming the entry that is wrong.
pub fn devices(text: &str) -> Result<Devices, Refusal> {
    if text == "all" {
        return Ok(Devices::All);
    }
    if !text.contains(',') {
        return device(text).map(|d| Devices::One(d.index));
    }
    let mut indices = Vec::new();
    for part in text.split(',') {
        if part.is_empty() {
            return Err("has an empty entry: write cuda:0,cuda:1 (or all)".into());
        }
        let index = device(part)
            .map_err(|refusal| format!("entry '{}': {refusal}", crate::text::ascii(part)))?
            .index;
        if indices.contains(&index) {
            return Err(format!(
                "names cuda:{index} twice: list each GPU once (or write all)"
            ));
        }
        indices.push(index);
    }
    Ok(Devices::List(indices))
}

/// A number of CUDA-graph replays, from 1 to [`crate::document::graph::MAX_REPLAYS`].
///
/// # Errors
/// As [`whole`].
pub fn graph_replays(text: &str) -> Result<u64, Refusal> {
    whole(text, 1, crate::document::graph::MAX_REPLAYS)
}

/// An element type: `float32`, `float16` or `bfloat16`, exactly.
///
/// # Errors
/// A [`Refusal`] listing the three names.
pub fn dtype(text: &str) -> Result<Dtype, Refusal> {
    [Dtype::Float32, Dtype::Float16, Dtype::Bfloat16]
        .into_iter()
        .find(|d| d.name() == text)
        .ok_or_else(|| "must be one of float32, float16, bfloat16".to_owned())
}

/// A reserve in GiB, an assumption the user chooses: a plain decimal number (`4`, `0.5`),
/// digits with at most one point between them, no sign, exponent, space or separator, at
/// most [`RESERVE_MAX_INTEGER_DIGITS`] digits before the point (leading zeros aside) and
/// [`RESERVE_MAX_FRACTION_DIGITS`] after. Exact (no float).
///
/// # Errors
/// A [`Refusal`] saying which rule the text breaks.
pub fn reserve_gib(text: &str) -> Result<Decimal, Refusal> {
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if ["nan", "inf", "infinity"].contains(&unsigned) {
        return Err("must be a finite number of GiB".into());
    }
    if text.starts_with('-') {
        return Err("must not be negative (use 0 for no reserve)".into());
    }
    let (integer, fraction) = match text.split_once('.') {
        Some((integer, fraction)) => (integer, Some(fraction)),
        None => (text, None),
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(integer) || !fraction.is_none_or(digits) {
        return Err("must be a plain decimal number of GiB such as 4 or 0.5".into());
    }
    let significant = integer.trim_start_matches('0');
    if significant.len() > RESERVE_MAX_INTEGER_DIGITS
        || fraction.is_some_and(|f| f.len() > RESERVE_MAX_FRACTION_DIGITS)
    {
        return Err(format!(
            "accepts at most {RESERVE_MAX_INTEGER_DIGITS} digits before the point and \
             {RESERVE_MAX_FRACTION_DIGITS} after"
        ));
    }
    // Leading zeros carry no value; dropping them keeps the text within Decimal's 28 digits.
    let integer = if significant.is_empty() {
        "0"
    } else {
        significant
    };
    let exact = match fraction {
        Some(fraction) => format!("{integer}.{fraction}"),
        None => integer.to_owned(),
    };
    Decimal::from_str_exact(&exact).map_err(|_| "is not a decimal number".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_number_round_trips(n in any::<u64>(), zeros in 0usize..30) {
            let text = format!("{}{n}", "0".repeat(zeros));
            prop_assert_eq!(count(&text), Ok(n));
            prop_assert_eq!(device(&format!("cuda:{n}")).is_ok(), n <= u64::from(DEVICE_INDEX_MAX));
        }

        #[test]
        fn anything_but_digits_is_refused(prefix in "[0-9]{0,5}", odd in "[^0-9]", suffix in "[0-9]{0,5}") {
            let text = format!("{prefix}{odd}{suffix}");
            prop_assert!(count(&text).is_err(), "{:?}", text);
            prop_assert!(days(&text).is_err(), "{:?}", text);
            prop_assert!(device(&format!("cuda:{text}")).is_err(), "{:?}", text);
        }
    }

    #[test]
    fn whole_numbers_are_plain_digits() {
        assert_eq!(positive("3"), Ok(3));
        assert_eq!(positive("007"), Ok(7));
        assert_eq!(positive("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(count("0"), Ok(0));
        for bad in [
            "",
            "0",
            "+3",
            "-3",
            " 3",
            "3 ",
            "3\n",
            "1.5",
            "7e9",
            "1_000",
            "1,000",
            "٣",
            "３",
            "0x10",
            "18446744073709551616",
            "99999999999999999999999",
        ] {
            assert!(positive(bad).is_err(), "{bad:?}");
        }
        assert!(positive("+3").unwrap_err().contains("no sign"));
        assert!(positive(" 3").unwrap_err().contains("no spaces"));
        assert!(positive("7e9")
            .unwrap_err()
            .contains("write all the digits"));
        assert_eq!(passes("4294967295"), Ok(u64::from(u32::MAX)));
        assert!(passes("4294967296").is_err());
        assert_eq!(seed("9223372036854775807"), Ok(i64::MAX as u64));
        assert!(seed("9223372036854775808").is_err());
        assert_eq!(sweep_value("1099511627776"), Ok(SWEEP_MAX));
        assert!(sweep_value("1099511627777").is_err());
    }

    #[test]
    fn days_are_the_catalog_durations() {
        assert_eq!(days("3"), Ok(3));
        assert_eq!(days("07"), Ok(7));
        assert_eq!(days("30"), Ok(30));
        for bad in ["5", "0", "+7", " 7", "7.0", "-7", "", "4294967303"] {
            let refusal = days(bad).unwrap_err();
            assert!(refusal.contains("3, 7, 30"), "{bad:?}: {refusal}");
        }
    }

    #[test]
    fn devices_are_cuda_with_a_plain_index() {
        assert_eq!(device("cuda:0"), Ok(Device { index: 0 }));
        assert_eq!(device("cuda:7").map(|d| d.to_string()), Ok("cuda:7".into()));
        assert_eq!(device("cuda:123456789").map(|d| d.index), Ok(123_456_789));
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
            let refusal = device(bad).unwrap_err();
            assert!(!refusal.contains('\n'), "{bad:?}");
        }
        assert!(device("cpu").unwrap_err().contains("never falls back"));
        assert!(device("cuda").unwrap_err().contains("explicitly"));
        assert!(device("mps:0").unwrap_err().contains("Metal"));
        assert!(device("cuda:007").unwrap_err().contains("write cuda:7"));
        assert!(device("cuda:00").unwrap_err().contains("write cuda:0"));
        assert!(device("cuda:2147483648")
            .unwrap_err()
            .contains("at most 2147483647"));
    }

    #[test]
    fn device_lists() {
        assert_eq!(devices("all"), Ok(Devices::All));
        assert_eq!(devices("cuda:1"), Ok(Devices::One(1)));
        assert_eq!(devices("cuda:1,cuda:0"), Ok(Devices::List(vec![1, 0])));
        for (bad, needle) in [
            ("cuda:0,cuda:0", "twice"),
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
            let refusal = devices(bad).unwrap_err();
            assert!(refusal.contains(needle), "{bad:?}: {refusal}");
        }
    }

    #[test]
    fn dtypes_are_spelt_exactly() {
        assert_eq!(dtype("bfloat16"), Ok(Dtype::Bfloat16));
        for bad in ["float64", " float32", "Float32", "fp16", ""] {
            assert!(dtype(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_reserve_is_an_exact_plain_decimal() {
        let d = |s: &str| Decimal::from_str_exact(s).unwrap();
        assert_eq!(reserve_gib("4"), Ok(d("4")));
        assert_eq!(reserve_gib("0.25"), Ok(d("0.25")));
        assert_eq!(reserve_gib("0"), Ok(Decimal::ZERO));
        assert_eq!(
            reserve_gib("999999999999999.999999999999"),
            Ok(d("999999999999999.999999999999"))
        );
        assert_eq!(
            reserve_gib("000000000000000000000000000000123.5"),
            Ok(d("123.5"))
        );
        for bad in [
            "-1",
            "-0.5",
            "nan",
            "NaN",
            "inf",
            "-inf",
            "Infinity",
            "abc",
            "",
            "1e3",
            "1.",
            ".5",
            "+4",
            "1_0",
            " 4",
            "4 GiB",
            "1,5",
            "1234567890123456",
            "0.1234567890123",
        ] {
            assert!(reserve_gib(bad).is_err(), "{bad:?}");
        }
        assert!(reserve_gib("-1").unwrap_err().contains("negative"));
        assert!(reserve_gib("inf").unwrap_err().contains("finite"));
        // One digit more on either side is refused with the limit, not a parse error.
        for over in [
            "123456789012345.123456789012345678",
            "123456789012345.1234567890123",
            "1234567890123456.5",
        ] {
            let refusal = reserve_gib(over).unwrap_err();
            assert!(
                refusal.contains("at most 15 digits before the point and 12 after"),
                "{refusal}"
            );
        }
        assert!(reserve_gib("123456789012345").is_ok());
        assert!(reserve_gib("0.123456789012").is_ok());
    }
}
