//! Bad input refused alike: the same exit code and one stderr line on both sides, for bad
//! price and estimate flags, integers of any length, hyphen and missing values, device
//! spellings, the repetitions bound and oversized measurements.

use crate::support::*;

#[test]
fn bad_price_inputs_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let semicolons = dir.path().join("semicolons.csv");
    let text = std::fs::read_to_string(catalog()).unwrap();
    std::fs::write(&semicolons, text.replace(',', ";")).unwrap();
    let decimal_price = dir.path().join("decimal.csv");
    std::fs::write(&decimal_price, text.replace(",2520\n", ",25.20\n")).unwrap();
    let duplicate = dir.path().join("duplicate.csv");
    std::fs::write(&duplicate, format!("{text}t4,NVIDIA T4 16 GB,1,3,2520\n")).unwrap();
    let missing = dir
        .path()
        .join("missing.csv")
        .to_string_lossy()
        .into_owned();
    let malformed = malformed_catalogs(dir.path());
    let files: Vec<String> = [&semicolons, &decimal_price, &duplicate]
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let base = ["--gpu", "b200", "--days", "7", "--lots", "2"];
    let mut cases: Vec<Vec<String>> = vec![
        strings(&["--gpu", "x100", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "B200", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "", "--days", "7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "5", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7.0", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "+7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "-7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7"]),
        strings(&["--days", "7", "--lots", "1"]),
        strings(&["--gpu", "b200", "--lots", "1"]),
        strings(&["--gpu", "b200", "--days", "7", "--lots", "1", "--lots", "2"]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "7",
            "--lots",
            "1",
            "--currency",
            "EUR",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "9223372036854775807",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "18446744073709551615",
        ]),
        strings(&[
            "--gpu",
            "b200",
            "--days",
            "30",
            "--lots",
            "18446744073709551616",
        ]),
    ];
    for lots in ["0", "-1", "1.5", "1e3", "1,000", "1_000", " 1", "+1", ""] {
        cases.push(strings(&["--gpu", "b200", "--days", "7", "--lots", lots]));
    }
    for accepted in ["0", "-3", "2.5", "1e2", "", "many", "+1"] {
        let mut args = strings(&base);
        args.extend(strings(&["--accepted-results", accepted]));
        cases.push(args);
    }
    for file in files.iter().chain(std::iter::once(&missing)) {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        cases.push(args);
    }
    // Not a regular file, too large, empty path (all bad input, 2), malformed catalogs.
    let folder = dir.path().to_string_lossy().into_owned();
    for file in ["/dev/zero", folder.as_str(), ""]
        .into_iter()
        .chain(malformed.iter().map(String::as_str))
    {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        cases.push(args);
    }
    // Abbreviated flags are refused on both sides (argparse would accept them by default).
    cases.push(strings(&["--gpu", "b200", "--day", "7", "--lots", "1"]));
    cases.push(strings(&["--gpu", "b200", "--days", "7", "--lot", "1"]));
    cases.push(strings(&[
        "--gpu", "b200", "--days", "7", "--lots", "1", "--acc", "5",
    ]));
    cases.push(strings(&[
        "--gpu", "b200", "--days", "7", "--lots", "1", "--js",
    ]));
    let refusals: Vec<Refusal> = cases
        .iter()
        .map(|args| {
            let (lab, python) = price_args(args);
            (lab, "calcul_forfaits.py", python)
        })
        .collect();
    let outcomes = assert_same_refusals(&refusals);
    // The unreadable file is a runtime failure (1), the malformed ones bad input (2).
    let python_code = |file: &str| {
        let mut args = strings(&base);
        args.extend(strings(&["--tariffs", file]));
        let at = refusals.iter().position(|(_, _, p)| *p == args).unwrap();
        outcomes[at].1.code
    };
    assert_eq!(python_code(&missing), 1);
    for file in ["/dev/zero", folder.as_str(), ""]
        .into_iter()
        .chain(malformed.iter().map(String::as_str))
    {
        assert_eq!(python_code(file), 2, "{file}");
    }
}

#[test]
fn bad_estimate_inputs_are_refused_alike() {
    let ok = ["--parameters", "7000000000", "--bits", "16"];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for parameters in [
        "0",
        "-1",
        "7e9",
        "1.5",
        "+5",
        "7_000",
        "",
        "18446744073709551616",
        "18446744073709551615",
    ] {
        cases.push(strings(&["--parameters", parameters, "--bits", "16"]));
    }
    for bits in ["0", "-8", "8.5", "4294967296", ""] {
        cases.push(strings(&["--parameters", "7000000000", "--bits", bits]));
    }
    for reserve in [
        "-1",
        "-0.5",
        "nan",
        "NaN",
        "inf",
        "Infinity",
        "1e3",
        ".5",
        "1.",
        "+4",
        "4 GiB",
        "1,5",
        "",
        "1234567890123456",
        "0.1234567890123456789",
        // One digit past the limit (15 before the point, 12 after) on either side, and the
        // old documented limit (15 + 18), which lab could not hold.
        "1234567890123456.5",
        "0.1234567890123",
        "123456789012345.1234567890123",
        "123456789012345.123456789012345678",
    ] {
        let mut args = strings(&ok);
        args.extend(strings(&["--reserve-gib", reserve]));
        cases.push(args);
    }
    cases.push(strings(&["--parameters", "7000000000"]));
    cases.push(strings(&["--bits", "16"]));
    cases.push(strings(&[
        "--parameters",
        "7000000000",
        "--bits",
        "16",
        "--bits",
        "8",
    ]));
    cases.push(strings(&[
        "--parameters",
        "7000000000",
        "--bits",
        "16",
        "--gpu",
    ]));
    // Abbreviated flags are refused on both sides.
    cases.push(strings(&["--param", "7000000000", "--bits", "16"]));
    cases.push(strings(&["--parameters", "7000000000", "--bit", "16"]));
    cases.push(strings(&[
        "--parameters",
        "7",
        "--bits",
        "16",
        "--reserve",
        "4",
    ]));
    cases.push(strings(&["--parameters", "7", "--bits", "16", "--js"]));
    let refusals: Vec<Refusal> = cases
        .iter()
        .map(|args| {
            let mut full = strings(&["estimate"]);
            full.extend(args.iter().cloned());
            (full.clone(), "mesure_memoire.py", full)
        })
        .collect();
    assert_same_refusals(&refusals);
}

#[test]
fn integers_of_any_length_are_refused_alike() {
    // Python refuses to convert more than 4300 digits (a traceback); lab says "too large".
    let nines = "9".repeat(4400);
    let one_then_zeros = format!("1{}", "0".repeat(5000));
    let huge = [
        nines.as_str(),
        one_then_zeros.as_str(),
        "18446744073709551616",
    ];
    let mut cases: Vec<Vec<String>> = Vec::new();
    for value in huge {
        cases.push(strings(&["--gpu", "t4", "--days", "3", "--lots", value]));
        cases.push(strings(&["--gpu", "t4", "--days", value, "--lots", "1"]));
        cases.push(strings(&[
            "--gpu",
            "t4",
            "--days",
            "3",
            "--lots",
            "1",
            "--accepted-results",
            value,
        ]));
    }
    let refusals: Vec<Refusal> = cases
        .iter()
        .map(|args| {
            let (lab, python) = price_args(args);
            (lab, "calcul_forfaits.py", python)
        })
        .collect();
    assert_same_messages(&refusals);
    // Leading zeros are harmless on both sides, however many.
    let zeros_then_one = format!("{}1", "0".repeat(5000));
    let zeros_then_seven = format!("{}7", "0".repeat(5000));
    let mut grid = Vec::new();
    for (days, lots, accepted) in [
        ("3", zeros_then_one.as_str(), "3"),
        (zeros_then_seven.as_str(), "2", zeros_then_one.as_str()),
    ] {
        let args = strings(&[
            "--gpu",
            "t4",
            "--days",
            days,
            "--lots",
            lots,
            "--accepted-results",
            accepted,
            "--tariffs",
            &catalog(),
            "--json",
        ]);
        grid.push(price_args(&args));
    }
    compare_grid("long leading zeros", "calcul_forfaits.py", &grid);
    // The same in estimate's integer flags.
    let mut refusals: Vec<Refusal> = Vec::new();
    for value in huge {
        for args in [
            strings(&["estimate", "--parameters", value, "--bits", "16"]),
            strings(&["estimate", "--parameters", "7", "--bits", value]),
            strings(&[
                "estimate",
                "--parameters",
                "7",
                "--bits",
                "16",
                "--reserve-gib",
                value,
            ]),
        ] {
            refusals.push((args.clone(), "mesure_memoire.py", args));
        }
    }
    // And in measure's (refused before any GPU is looked for).
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    let mut flags = Vec::new();
    for value in huge {
        for flag in [
            "--batch",
            "--context",
            "--width",
            "--warmup",
            "--repeats",
            "--seed",
        ] {
            let mut args = strings(&[
                "measure",
                "--device",
                "cuda:0",
                "--batch",
                "1",
                "--context",
                "1",
                "--width",
                "1",
                "--output",
                &output,
            ]);
            match args.iter().position(|a| a == flag) {
                Some(at) => args[at + 1] = value.to_string(),
                None => args.extend(strings(&[flag, value])),
            }
            flags.push((refusals.len(), flag));
            refusals.push((args.clone(), "mesure_memoire.py", args));
        }
    }
    let outcomes = assert_same_messages(&refusals);
    for (at, flag) in flags {
        let lab = &outcomes[at];
        assert!(
            message(lab).contains(&format!("for '{flag} <")),
            "{flag}: {}",
            lab.stderr
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn device_spellings_are_judged_alike() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    let long = format!("cuda:{}", "9".repeat(4400));
    let zeros = format!("cuda:{}7", "0".repeat(4400));
    let refused = [
        "cuda:01",
        "cuda:00",
        "cuda:007",
        zeros.as_str(),
        "cuda:0 ",
        " cuda:0",
        "cuda: 0",
        "cuda:0\n",
        "cuda:+1",
        "cuda:-1",
        "CUDA:0",
        "Cuda:0",
        "cuda:\u{663}",
        "cuda:0\u{200b}",
        "cuda:x",
        "cuda:",
        "cuda",
        "mps:0",
        "gpu0",
        "",
        "cuda:2147483648",
        "cuda:99999999999",
        long.as_str(),
    ];
    let mut refusals: Vec<Refusal> = Vec::new();
    for device in refused {
        let args = strings(&[
            "measure",
            "--device",
            device,
            "--batch",
            "1",
            "--context",
            "1",
            "--width",
            "1",
            "--output",
            &output,
        ]);
        refusals.push((args.clone(), "mesure_memoire.py", args));
    }
    assert_same_messages(&refusals);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // The environment diagnostic echoes the device as typed on both sides, valid or not.
    for device in refused
        .iter()
        .copied()
        .chain(["cuda:0", "cuda:10", "cuda:2147483647"])
    {
        let args = strings(&["environment", "--device", device, "--json"]);
        let lab = Command::new(env!("CARGO_BIN_EXE_lab"))
            .args(&args)
            .output()
            .unwrap();
        let python = run_python_process("mesure_memoire.py", &args);
        assert_eq!(lab.status.code(), Some(0), "{device:?}");
        assert_eq!(python.code, 0, "{device:?}: {}", python.stderr);
        let lab: Value = serde_json::from_slice(&lab.stdout).unwrap();
        let python: Value = serde_json::from_str(&python.stdout).unwrap();
        assert_eq!(lab["device"], Value::from(device), "{device:?}");
        assert_eq!(python["device"], Value::from(device), "{device:?}");
        assert_eq!(lab["device_available"], Value::Bool(false));
        assert_eq!(python["device_available"], Value::Bool(false));
    }
}

/// `--repeats` stops at 100000 in both twins (a longer run would write a document that
/// `lab report` cannot read), with the same words.
#[test]
fn the_repetitions_bound_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    let args = strings(&[
        "measure",
        "--device",
        "cuda:0",
        "--batch",
        "1",
        "--context",
        "1",
        "--width",
        "1",
        "--repeats",
        "100001",
        "--output",
        &output,
    ]);
    let lab = assert_same_message(&args, "mesure_memoire.py", &args);
    assert!(
        message(&lab).contains("'--repeats <REPEATS>': must be a whole number from 1 to 100000"),
        "{}",
        lab.stderr
    );
}

/// A flag whose value starts with '-' (even `--`), or that has no value at all, is judged
/// alike by the twins: every flag takes the next argument as its value (PROTOCOL §8), a flag
/// at the end is refused as missing its value, and a bare `--` ends the options.
#[test]
fn hyphen_and_missing_values_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("m.json").to_string_lossy().into_owned();
    // (lab subcommand, script, valid flag/value pairs)
    type Command<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>);
    // lab's arguments start with the command; calcul_forfaits.py has no command word.
    let with_command = |sub: &str, args: &[String]| [vec![sub.to_string()], args.to_vec()].concat();
    let for_script = |sub: &str, args: &[String]| {
        if sub == "price" {
            args.to_vec()
        } else {
            with_command(sub, args)
        }
    };
    let commands: [Command; 4] = [
        (
            "environment",
            "mesure_memoire.py",
            vec![("--device", "cuda:0")],
        ),
        (
            "estimate",
            "mesure_memoire.py",
            vec![
                ("--parameters", "7"),
                ("--bits", "16"),
                ("--reserve-gib", "1"),
            ],
        ),
        (
            "price",
            "calcul_forfaits.py",
            vec![
                ("--gpu", "h200"),
                ("--days", "7"),
                ("--lots", "1"),
                ("--accepted-results", "3"),
            ],
        ),
        (
            "measure",
            "mesure_memoire.py",
            vec![
                ("--device", "cuda:0"),
                ("--batch", "1"),
                ("--context", "1"),
                ("--width", "1"),
                ("--dtype", "float32"),
                ("--warmup", "1"),
                ("--repeats", "2"),
                ("--seed", "0"),
                ("--output", output.as_str()),
            ],
        ),
    ];
    let mut refusals: Vec<Refusal> = Vec::new();
    for (sub, script, pairs) in &commands {
        for (at, (flag, _)) in pairs.iter().enumerate() {
            // "-x" is a fine file name: for --output both twins go on (to a GPU check); and
            // `environment` describes any device, reporting what is missing.
            let values: &[Option<&str>] = if *flag == "--output" || *sub == "environment" {
                &[None]
            } else {
                &[Some("-x"), Some("-inf"), Some("--"), None]
            };
            for value in values.iter().copied() {
                // The flag under test goes last, so that "no value" is the end of the line.
                let mut args: Vec<String> = Vec::new();
                for (i, (f, v)) in pairs.iter().enumerate() {
                    if i != at {
                        args.extend([f.to_string(), v.to_string()]);
                    }
                }
                args.push(flag.to_string());
                if let Some(v) = value {
                    args.push(v.to_string());
                }
                refusals.push((with_command(sub, &args), *script, for_script(sub, &args)));
            }
        }
        // A bare "--" ends the options: nothing may follow it.
        let mut args: Vec<String> = pairs
            .iter()
            .flat_map(|(f, v)| [f.to_string(), v.to_string()])
            .collect();
        args.extend(strings(&["--", "stray"]));
        refusals.push((with_command(sub, &args), *script, for_script(sub, &args)));
    }
    // An output path that is empty or names a folder is refused before anything runs.
    let folder = dir.path().join("m.json/").to_string_lossy().into_owned();
    for output in ["", folder.as_str()] {
        let args = strings(&[
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            "1",
            "--context",
            "1",
            "--width",
            "1",
            "--output",
            output,
        ]);
        refusals.push((args.clone(), "mesure_memoire.py", args));
    }
    assert_same_messages(&refusals);
}

/// Sizes that no tensor can have are refused before the output folder is looked at, by both
/// twins, at the same boundaries (the widest activation, the weight matrix, and the FLOPs of
/// one forward within 64 bits).
#[test]
fn oversized_measurements_are_refused_alike_and_first() {
    let missing = "/nonexistent-folder-of-lab-tests/m.json";
    let max = i64::MAX as u64 / 8;
    let cases = [
        (1u64, 1u64, 1u64 << 29),    // weights 2^60: the largest accepted matrix
        (1, 1, (1 << 29) + 1),       // one more: the matrix is too large
        (1 << 20, 1 << 20, 1 << 18), // activation 2^60 exactly
        (1 << 20, 1 << 20, (1 << 18) + 1),
        (1 << 40, 1, 1 << 15), // activation fits, FLOPs per forward do not
        (max, 1, 1),
        (u64::MAX, 1, 1),
        (100_000_000, 100_000_000, 100_000),
    ];
    let mut refusals: Vec<Refusal> = Vec::new();
    for (batch, context, width) in cases {
        let args = strings(&[
            "measure",
            "--device",
            "cuda:0",
            "--batch",
            &batch.to_string(),
            "--context",
            &context.to_string(),
            "--width",
            &width.to_string(),
            "--output",
            missing,
        ]);
        refusals.push((args.clone(), "mesure_memoire.py", args));
    }
    assert_same_messages(&refusals);
}
