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
//! device index, which is written the way libtorch prints it: the device grammar lives with its
//! type in [`crate::device`], and [`devices`] hands it to clap.

use crate::catalog::{durations_list, DURATIONS};
use crate::device::Devices;
use crate::document::Dtype;
use crate::estimate::{RESERVE_MAX_FRACTION_DIGITS, RESERVE_MAX_INTEGER_DIGITS};
use rust_decimal::Decimal;

/// The message of a refused value: one line, without the flag name (clap adds it).
pub use crate::device::Refusal;

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

/// The GPUs a measurement or a diagnostic names: one `cuda:N`, `all`, or a list
/// `cuda:0,cuda:1` ([`Devices::parse`]).
///
/// # Errors
/// A [`Refusal`] naming the entry that is wrong.
pub fn devices(text: &str) -> Result<Devices, Refusal> {
    Devices::parse(text)
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
        }

        #[test]
        fn anything_but_digits_is_refused(prefix in "[0-9]{0,5}", odd in "[^0-9]", suffix in "[0-9]{0,5}") {
            let text = format!("{prefix}{odd}{suffix}");
            prop_assert!(count(&text).is_err(), "{:?}", text);
            prop_assert!(days(&text).is_err(), "{:?}", text);
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
    fn device_flags_follow_the_device_grammar() {
        // The grammar itself is tested in crate::device.
        assert!(devices("cuda:07").unwrap_err().contains("leading zero"));
        assert_eq!(devices("all"), Ok(Devices::All));
        assert!(devices("cuda:0,cuda:0").unwrap_err().contains("twice"));
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
