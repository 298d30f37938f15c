// Without ark-http's `json` feature, `Response::json` does not compile, and says which feature
// to turn on.
#[derive(serde::Serialize)]
struct Hello {
    name: String,
}

fn main() {
    let router = ark_http::Router::new().get("/hello", |_, res| {
        res.json(&Hello { name: "ark".into() });
    });
    drop(router);
}
