//! Compile-fail and pass cases of `pipeline!` (trybuild), grouped by mistake:
//! `tests/ui/<category>/<mistake>.rs` with the expected `.stderr` beside it. The snapshots
//! belong to the pinned toolchain (rust-toolchain.toml); regenerate with
//! `TRYBUILD=overwrite cargo test --test ui` and read every changed `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    let mut categories: Vec<_> = std::fs::read_dir("tests/ui")
        .expect("tests/ui")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir() && e.file_name() != "pass")
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    categories.sort();
    for category in categories {
        cases.compile_fail(format!("tests/ui/{category}/*.rs"));
    }
}
