//! The value grids: `lab price` and `lab estimate` against the twins over every catalog row
//! and the estimate grid, and the boundary values of both.

use crate::support::*;

#[test]
fn price_agrees_over_the_whole_catalog() {
    let grid = price_grid();
    assert_eq!(grid.len(), 45 * 4 * 5);
    compare_grid("price", "calcul_forfaits.py", &grid);
}

#[test]
fn estimate_agrees_over_the_grid() {
    let grid = estimate_grid();
    assert_eq!(grid.len(), 5 * 64 * 3);
    compare_grid("estimate", "mesure_memoire.py", &grid);
}

#[test]
fn boundary_values_agree() {
    // Largest weights that fit in 64 bits, long reserves, exact half-micro ties.
    let estimates = [
        ["18446744073709551615", "8", "0"],
        ["8388608", "8", "0.0000004"],
        ["8388608", "8", "0.000001"],
        ["8388608", "8", "0.000000000001"],
        ["1500", "8", "123456789012345"],
        ["1", "4294967295", "0.123456789012"],
        // The largest reserves accepted: 15 digits before the point, 12 after.
        ["7000000000", "16", "123456789012345.123456789012"],
        ["18446744073709551615", "8", "999999999999999.999999999999"],
        [
            "1",
            "1",
            "000000000000000000000000000000000123456789012345.000000000000",
        ],
        ["3", "8", "0.000000000000"],
    ];
    let mut grid = Vec::new();
    for [p, b, r] in estimates {
        let args = strings(&[
            "estimate",
            "--parameters",
            p,
            "--bits",
            b,
            "--reserve-gib",
            r,
            "--json",
        ]);
        grid.push((args.clone(), args));
    }
    compare_grid("estimate boundary", "mesure_memoire.py", &grid);
    let mut grid = Vec::new();
    for (gpu, days, lots, accepted) in [
        ("b200", "7", "1", "2560000"),
        ("b200", "7", "1", "7680000"),
        ("t4", "3", "3660068268593165", "3"),
        ("t4", "3", "1", "18446744073709551615"),
    ] {
        let args = strings(&[
            "--gpu",
            gpu,
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
        let mut lab = strings(&["price"]);
        lab.extend(args.iter().cloned());
        grid.push((lab, args));
    }
    compare_grid("price boundary", "calcul_forfaits.py", &grid);
}

// ---------------------------------------------------------------------------------------
// Input classes where the twins once disagreed (docs/PROTOCOL.md §5 and §4): integers too long
// for Python's int conversion, byte-order marks and other encodings, control and format
// characters, device spellings. Each class has several inputs; both sides must give the same
// exit code and, where `lab`'s wording is the reference, the same message.
