//! The JSON API example through `HttpAgent`: create, list, fetch and delete to-dos; a bad id,
//! a bad body and a body without a JSON content type are refused with 400, 400 and 415.

#[path = "../examples/json_api.rs"]
mod json_api;

use ark_http::{HttpAgent, HttpRequest, HttpResponse, Origin};
use json_api::{Todo, serve};

fn send(agent: &HttpAgent, origin: &Origin, request: HttpRequest) -> HttpResponse {
    agent.send(origin, request).wait().unwrap()
}

fn json(method: &str, target: &str, body: &str) -> HttpRequest {
    HttpRequest::new(method, target)
        .header("content-type", "application/json")
        .body(body)
}

#[test]
fn the_api_creates_lists_fetches_deletes_and_refuses_bad_input() {
    let server = serve("127.0.0.1:0").unwrap();
    let origin = Origin::http(server.local_addr());
    let agent = HttpAgent::builder().build().unwrap();
    for title in ["write the note", "run CI"] {
        let created = send(
            &agent,
            &origin,
            json("POST", "/todos", &format!(r#"{{"title":"{title}"}}"#)),
        );
        assert_eq!(created.status, 201);
        assert_eq!(
            created.header("content-type"),
            Some(&b"application/json"[..])
        );
    }
    let list: Vec<Todo> =
        serde_json::from_slice(&send(&agent, &origin, HttpRequest::get("/todos")).body).unwrap();
    assert_eq!(list.iter().map(|t| t.id).collect::<Vec<_>>(), [1, 2]);
    let two: Todo =
        serde_json::from_slice(&send(&agent, &origin, HttpRequest::get("/todos/2")).body).unwrap();
    assert_eq!((two.title.as_str(), two.done), ("run CI", false));
    assert_eq!(
        send(&agent, &origin, HttpRequest::new("DELETE", "/todos/1")).status,
        204
    );
    assert_eq!(
        send(&agent, &origin, HttpRequest::get("/todos/1")).status,
        404
    );

    let bad_id = send(&agent, &origin, HttpRequest::get("/todos/first"));
    assert_eq!(bad_id.status, 400);
    assert!(String::from_utf8_lossy(&bad_id.body).contains("\"first\""));
    let bad_body = send(&agent, &origin, json("POST", "/todos", r#"{"name":"x"}"#));
    assert_eq!(bad_body.status, 400);
    assert!(String::from_utf8_lossy(&bad_body.body).contains("missing field `title`"));
    let not_json = send(
        &agent,
        &origin,
        HttpRequest::post("/todos", r#"{"title":"x"}"#),
    );
    assert_eq!(not_json.status, 415);
    agent.stop().wait().unwrap();
    server.stop().wait().unwrap();
}
