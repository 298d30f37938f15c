//! What a method of a cargo feature that is off asks of its caller, so that calling it says
//! which feature to turn on (rustc's own note covers paths, not methods): `Response::json` and
//! `Request::json` exist without the `json` feature, bounded by [`NeedsJsonFeature`], which
//! nothing implements.

mod sealed {
    /// Keeps [`NeedsJsonFeature`](super::NeedsJsonFeature) without implementations.
    pub trait Sealed {}
}

/// Implemented by no type: the bound of `Response::json` and `Request::json` in a build of
/// ark-http without its `json` feature, so that a call fails to compile with this message.
#[diagnostic::on_unimplemented(
    message = "JSON bodies need ark-http's cargo feature `json`, which is off in this build",
    label = "`json` is only usable with the `json` feature",
    note = "turn it on in Cargo.toml: ark-http = {{ version = \"0.1\", features = [\"json\"] }}"
)]
pub trait NeedsJsonFeature: sealed::Sealed {}
