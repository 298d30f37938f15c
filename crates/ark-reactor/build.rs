//! Sets `cfg(ark_portable)` (the portable IO path, what macOS, Windows and the BSDs run) when
//! the environment variable `ARK_PORTABLE` is `1`, as `RUSTFLAGS="--cfg ark_portable"` does,
//! but for ark-reactor and ark-udp alone: the other crates' flags stay as they are, so a build
//! of the portable path shares every dependency with the ordinary build (CI's portable stage).

fn main() {
    println!("cargo::rerun-if-env-changed=ARK_PORTABLE");
    if std::env::var("ARK_PORTABLE").as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=ark_portable");
    }
}
