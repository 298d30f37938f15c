//! Features that explain themselves: built without its `json` feature, a call of
//! `Response::json` fails to compile with a message naming the feature (pinned in
//! `tests/ui/json_without_feature.stderr`, trybuild). Runs in the builds without the feature
//! (scripts/test.sh runs it so).

#[cfg(not(feature = "json"))]
#[test]
fn json_without_its_feature_names_the_feature() {
    trybuild::TestCases::new().compile_fail("tests/ui/json_without_feature.rs");
}
