//! Features that explain themselves: built without its `http` feature, `ark_ws::upgrade`
//! fails to compile with rustc's note naming the feature (pinned in
//! `tests/ui/upgrade_without_http.stderr`, trybuild). Runs in the builds without the feature
//! (scripts/test.sh runs it so).

#[cfg(not(feature = "http"))]
#[test]
fn upgrade_without_its_feature_names_the_feature() {
    trybuild::TestCases::new().compile_fail("tests/ui/upgrade_without_http.rs");
}
