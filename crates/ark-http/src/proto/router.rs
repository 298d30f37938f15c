//! The router: routes by method and path pattern (static segments, `:param`, a trailing
//! `*wildcard`), 404 and 405 with `Allow`, middleware before and after the handler.

use crate::proto::head::Request;
use crate::response::Response;

/// Most parameters a pattern may capture.
pub const MAX_PARAMS: usize = 8;

type Handler = dyn Fn(&Request<'_>, &mut Response) + Send + Sync;
type Before = dyn Fn(&Request<'_>, &mut Response) -> bool + Send + Sync;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Static(String),
    Param(String),
    Wildcard(String),
}

struct Route {
    method: String,
    segments: Vec<Segment>,
    handler: Box<Handler>,
}

/// Routes requests to handlers. Build it once, share it between connections.
///
/// ```
/// use ark_http::{Response, Router};
///
/// let router = Router::new()
///     .get("/", |_, res| { res.body("home"); })
///     .get("/users/:id", |req, res| { res.body(req.param("id").unwrap_or("")); })
///     .post("/files/*path", |req, res| { res.status(201).body(req.param("path").unwrap_or("")); });
/// assert_eq!(router.routes(), 3);
/// ```
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
    before: Vec<Box<Before>>,
    after: Vec<Box<Handler>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.routes.len())
            .field("before", &self.before.len())
            .field("after", &self.after.len())
            .finish()
    }
}

fn parse_pattern(pattern: &str) -> Vec<Segment> {
    pattern
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            if let Some(name) = s.strip_prefix(':') {
                Segment::Param(name.to_string())
            } else if let Some(name) = s.strip_prefix('*') {
                Segment::Wildcard(name.to_string())
            } else {
                Segment::Static(s.to_string())
            }
        })
        .collect()
}

impl Router {
    /// No routes: every request is answered 404.
    pub fn new() -> Self {
        Router::default()
    }

    /// Routes `method` requests whose path matches `pattern` to `handler`. Segments are
    /// matched whole: `/users/:id` captures one segment as `id`, a final `/*rest` captures
    /// the rest of the path (possibly empty). Routes are tried in the order added. A `GET`
    /// route also answers `HEAD` (without the body).
    pub fn route(
        mut self,
        method: &str,
        pattern: &str,
        handler: impl Fn(&Request<'_>, &mut Response) + Send + Sync + 'static,
    ) -> Self {
        self.routes.push(Route {
            method: method.to_ascii_uppercase(),
            segments: parse_pattern(pattern),
            handler: Box::new(handler),
        });
        self
    }

    /// A `GET` route.
    pub fn get(
        self,
        pattern: &str,
        handler: impl Fn(&Request<'_>, &mut Response) + Send + Sync + 'static,
    ) -> Self {
        self.route("GET", pattern, handler)
    }

    /// A `POST` route.
    pub fn post(
        self,
        pattern: &str,
        handler: impl Fn(&Request<'_>, &mut Response) + Send + Sync + 'static,
    ) -> Self {
        self.route("POST", pattern, handler)
    }

    /// Middleware run before routing, in the order added: returning `false` means it
    /// answered (the response as it left it) and nothing after it runs but the `after` ones.
    pub fn before(
        mut self,
        middleware: impl Fn(&Request<'_>, &mut Response) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.before.push(Box::new(middleware));
        self
    }

    /// Middleware run after the handler (or a 404/405, or a `before` that answered), in the
    /// order added: to add headers, log, ...
    pub fn after(
        mut self,
        middleware: impl Fn(&Request<'_>, &mut Response) + Send + Sync + 'static,
    ) -> Self {
        self.after.push(Box::new(middleware));
        self
    }

    /// How many routes there are.
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// Answers `request` into `response`.
    pub fn handle(&self, request: Request<'_>, response: &mut Response) {
        if self.before.iter().all(|m| m(&request, response)) {
            self.dispatch(request, response);
        } else {
            self.finish(&request, response);
        }
    }

    fn dispatch(&self, request: Request<'_>, response: &mut Response) {
        let path = request.path();
        let mut params = [("", ""); MAX_PARAMS];
        let method = request.method();
        let mut allowed = false;
        for route in &self.routes {
            let Some(count) = matches(&route.segments, path, &mut params) else {
                continue;
            };
            allowed = true;
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                let request = request.with_params(&params[..count]);
                (route.handler)(&request, response);
                self.finish(&request, response);
                return;
            }
        }
        if allowed {
            let mut allow: Vec<&str> = Vec::new();
            for route in &self.routes {
                if matches(&route.segments, path, &mut params).is_some()
                    && !allow.contains(&route.method.as_str())
                {
                    allow.push(&route.method);
                }
            }
            response.status(405).header("allow", allow.join(", "));
        } else {
            response.status(404);
        }
        self.finish(&request, response);
    }

    fn finish(&self, request: &Request<'_>, response: &mut Response) {
        for middleware in &self.after {
            middleware(request, response);
        }
    }
}

/// Whether `path` matches `segments`; the captures go into `params`, their count returned.
fn matches<'p>(
    segments: &'p [Segment],
    path: &'p str,
    params: &mut [(&'p str, &'p str); MAX_PARAMS],
) -> Option<usize> {
    let mut rest = path.trim_start_matches('/');
    let mut count = 0;
    for (i, segment) in segments.iter().enumerate() {
        if let Segment::Wildcard(name) = segment {
            if i + 1 != segments.len() || count == MAX_PARAMS {
                return None;
            }
            params[count] = (name, rest);
            return Some(count + 1);
        }
        if rest.is_empty() {
            return None;
        }
        let (part, tail) = rest.split_once('/').unwrap_or((rest, ""));
        match segment {
            Segment::Static(s) if s == part => {}
            Segment::Param(name) if count < MAX_PARAMS => {
                params[count] = (name, part);
                count += 1;
            }
            _ => return None,
        }
        rest = tail;
    }
    rest.is_empty().then_some(count)
}
