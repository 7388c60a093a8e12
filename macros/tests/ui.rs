//! Compile-fail tests: each misuse of `#[bulkhead]` gives the error its `.stderr` file shows,
//! pointing at the offending token. Regenerate with `TRYBUILD=overwrite cargo test -p
//! bulkhead-macros --test ui` after a deliberate change, and read the diff.

#[test]
fn misuse_is_a_clear_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
