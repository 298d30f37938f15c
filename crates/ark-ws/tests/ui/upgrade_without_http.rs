// Without ark-ws's `http` feature, `ark_ws::upgrade` does not exist, and the compiler says
// which feature gates it (no private module of that name hides the note).
fn main() {
    let _ = ark_ws::upgrade;
}
