//! A JSON API on ark-http with its extractors: a to-do list kept in memory.
//! `GET /todos`, `POST /todos` (a JSON body), `GET /todos/:id` and `DELETE /todos/:id` (a typed
//! id); a bad id or body is answered 400 (415 without a JSON content type) with the reason.
//!
//! Run: `cargo run --release -p ark-http --features json --example json_api -- 127.0.0.1:8080`

use std::sync::{Arc, Mutex};

use ark_http::{HttpServer, HttpServerHandle, Router};
use serde::{Deserialize, Serialize};

/// A to-do as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Todo {
    /// Its id.
    pub id: u64,
    /// What to do.
    pub title: String,
    /// Done or not.
    pub done: bool,
}

/// What `POST /todos` takes.
#[derive(Deserialize)]
struct NewTodo {
    title: String,
}

type Todos = Arc<Mutex<Vec<Todo>>>;

/// The API's routes over `todos`.
pub fn router(todos: Todos) -> Router {
    let (list, add, one, remove) = (todos.clone(), todos.clone(), todos.clone(), todos);
    Router::new()
        .get("/todos", move |_, res| {
            res.json(&*list.lock().unwrap());
        })
        .post("/todos", move |req, res| match req.json::<NewTodo>() {
            Ok(new) => {
                let mut todos = add.lock().unwrap();
                let id = todos.last().map_or(1, |t| t.id + 1);
                todos.push(Todo {
                    id,
                    title: new.title,
                    done: false,
                });
                res.status(201).json(todos.last().unwrap());
            }
            Err(e) => {
                res.reject(&e);
            }
        })
        .get("/todos/:id", move |req, res| {
            match req.param_as::<u64>("id") {
                Ok(id) => match one.lock().unwrap().iter().find(|t| t.id == id) {
                    Some(todo) => res.json(todo),
                    None => res.status(404),
                },
                Err(e) => res.reject(&e),
            };
        })
        .delete("/todos/:id", move |req, res| {
            match req.param_as::<u64>("id") {
                Ok(id) => {
                    remove.lock().unwrap().retain(|t| t.id != id);
                    res.status(204);
                }
                Err(e) => {
                    res.reject(&e);
                }
            }
        })
}

/// Serves the API on `addr`.
pub fn serve(addr: &str) -> std::io::Result<HttpServerHandle> {
    HttpServer::builder()
        .bind(addr)
        .start(router(Todos::default()))
}

#[allow(dead_code)] // the test uses `serve`
fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let server = serve(&addr)?;
    println!(
        "to-do API on http://{}; Enter stops it",
        server.local_addr()
    );
    std::io::stdin().read_line(&mut String::new())?;
    server.stop().wait()
}
