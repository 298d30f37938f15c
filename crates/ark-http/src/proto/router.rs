//! The router: routes by method and path pattern (checked when added, see [`RouteError`]),
//! 404 and 405 with `Allow`, middleware before and after every answer, and a hook on the
//! requests the server refuses itself.

use crate::error::HttpError;
use crate::proto::head::Request;
use crate::proto::pattern::{MAX_PARAMS, Pattern, RouteError, is_token};
use crate::response::Response;

type Handler = dyn Fn(&Request<'_>, &mut Response) + Send + Sync;
type Before = dyn Fn(&Request<'_>, &mut Response) -> bool + Send + Sync;
type Refused = dyn Fn(&HttpError, &mut Response) + Send + Sync;

struct Route {
    method: String,
    pattern: Pattern,
    handler: Box<Handler>,
}

/// A handler's type as the router's methods take it.
macro_rules! handler {
    () => { impl Fn(&Request<'_>, &mut Response) + Send + Sync + 'static };
}

/// Routes requests to handlers. Build it once, share it between connections.
///
/// Patterns are checked when a route is added: a pattern that could never match as meant
/// (a wildcard not last, a missing `/`, a parameter named twice, a route added twice, a method
/// that is not a token) panics there with a message naming it, as axum does;
/// [`try_route`](Self::try_route) returns the [`RouteError`] instead. Captures are whole
/// segments, written `:id` or `{id}`, and a last `*rest` or `{*rest}`.
///
/// ```
/// use ark_http::{Response, Router};
///
/// let router = Router::new()
///     .get("/", |_, res| { res.body("home"); })
///     .get("/users/:id", |req, res| { res.body(req.param("id").unwrap_or("")); })
///     .put("/users/{id}", |_, res| { res.status(204); })
///     .post("/files/*path", |req, res| { res.status(201).body(req.param("path").unwrap_or("")); });
/// assert_eq!(router.routes(), 4);
/// assert!(Router::new().try_route("GET", "/a/*rest/b", |_, _| {}).is_err());
/// ```
#[derive(Default)]
pub struct Router {
    routes: Vec<Route>,
    before: Vec<Box<Before>>,
    after: Vec<Box<Handler>>,
    refused: Vec<Box<Refused>>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("routes", &self.routes.len())
            .field("before", &self.before.len())
            .field("after", &self.after.len())
            .field("refused", &self.refused.len())
            .finish()
    }
}

impl Router {
    /// No routes: every request is answered 404.
    pub fn new() -> Self {
        Router::default()
    }

    /// Routes `method` requests whose path matches `pattern` to `handler`. Segments are
    /// matched whole: `/users/:id` (or `/users/{id}`) captures one segment as `id`, a final
    /// `/*rest` (or `/{*rest}`) the rest of the path (possibly empty). Routes are tried in the
    /// order added (add `/users/me` before `/users/:id`). A `GET` route also answers `HEAD`
    /// (without the body).
    ///
    /// # Panics
    /// When the route is refused ([`RouteError`]; [`try_route`](Self::try_route) returns it).
    pub fn route(self, method: &str, pattern: &str, handler: handler!()) -> Self {
        self.try_route(method, pattern, handler)
            .unwrap_or_else(|e| panic!("ark-http Router: {e}"))
    }

    /// As [`route`](Self::route), returning why a route is refused instead of panicking.
    ///
    /// # Errors
    /// The [`RouteError`] that names what is wrong with the method or the pattern.
    pub fn try_route(
        mut self,
        method: &str,
        pattern: &str,
        handler: handler!(),
    ) -> Result<Self, RouteError> {
        if !is_token(method) {
            return Err(RouteError::BadMethod {
                method: method.into(),
            });
        }
        let method = method.to_ascii_uppercase();
        let parsed = Pattern::parse(pattern)?;
        if self
            .routes
            .iter()
            .any(|r| r.method == method && r.pattern.same_shape(&parsed))
        {
            return Err(RouteError::Duplicate {
                method,
                pattern: pattern.into(),
            });
        }
        self.routes.push(Route {
            method,
            pattern: parsed,
            handler: Box::new(handler),
        });
        Ok(self)
    }

    /// A `GET` route (it answers `HEAD` too).
    pub fn get(self, pattern: &str, handler: handler!()) -> Self {
        self.route("GET", pattern, handler)
    }

    /// A `POST` route.
    pub fn post(self, pattern: &str, handler: handler!()) -> Self {
        self.route("POST", pattern, handler)
    }

    /// A `PUT` route.
    pub fn put(self, pattern: &str, handler: handler!()) -> Self {
        self.route("PUT", pattern, handler)
    }

    /// A `DELETE` route.
    pub fn delete(self, pattern: &str, handler: handler!()) -> Self {
        self.route("DELETE", pattern, handler)
    }

    /// A `PATCH` route.
    pub fn patch(self, pattern: &str, handler: handler!()) -> Self {
        self.route("PATCH", pattern, handler)
    }

    /// A `HEAD` route of its own (otherwise a `GET` route answers `HEAD`).
    pub fn head(self, pattern: &str, handler: handler!()) -> Self {
        self.route("HEAD", pattern, handler)
    }

    /// An `OPTIONS` route.
    pub fn options(self, pattern: &str, handler: handler!()) -> Self {
        self.route("OPTIONS", pattern, handler)
    }

    /// Middleware run before routing, in the order added: returning `false` means it
    /// answered (the response as it left it) and nothing after it runs but the `after` ones.
    /// State for the `after` ones goes into the response ([`Response::set_state`]).
    pub fn before(
        mut self,
        middleware: impl Fn(&Request<'_>, &mut Response) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.before.push(Box::new(middleware));
        self
    }

    /// Middleware run on every answer to a request that was routed: after its handler, a
    /// 404 or 405, or a `before` that answered, in the order added — to add headers, count,
    /// log. A deferred answer ([`Response::defer`]) passes through when it is given, with its
    /// real status (and the state `before` set); its request is then seen without its body.
    pub fn after(mut self, middleware: handler!()) -> Self {
        self.after.push(Box::new(middleware));
        self
    }

    /// A hook on every answer the server makes itself to a request it refuses (400, 408,
    /// 413, 431, 501, 505: [`HttpError`] says which), before it is sent — to count, log or add
    /// headers. The connection closes after these answers whatever the hook does.
    pub fn refused(
        mut self,
        hook: impl Fn(&HttpError, &mut Response) + Send + Sync + 'static,
    ) -> Self {
        self.refused.push(Box::new(hook));
        self
    }

    /// How many routes there are.
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// Whether any `after` middleware is set (a deferred answer keeps its request's head
    /// for them only then).
    pub(crate) fn has_after(&self) -> bool {
        !self.after.is_empty()
    }

    /// Answers `request` into `response`.
    pub fn handle(&self, request: Request<'_>, response: &mut Response) {
        if self.before.iter().all(|m| m(&request, response)) {
            self.dispatch(request, response);
        } else {
            self.finish(&request, response);
        }
    }

    /// Answers a request the server refuses: status and reason, then the `refused` hooks.
    pub(crate) fn refuse(&self, error: &HttpError, response: &mut Response) {
        response.status(error.status()).body(error.to_string());
        for hook in &self.refused {
            hook(error, response);
        }
    }

    /// The `after` middleware for a deferred answer, now given: `head` is its request's head.
    pub(crate) fn after_deferred(&self, head: &[u8], response: &mut Response) {
        if self.after.is_empty() {
            return;
        }
        let Some(request) = Request::view(head, &[]) else {
            return;
        };
        let mut params = [("", ""); MAX_PARAMS];
        match self.find(&request, &mut params) {
            Found::Route(_, count) => {
                self.finish(&request.with_params(&params[..count]), response);
            }
            Found::Allowed | Found::Nothing => self.finish(&request, response),
        }
    }

    fn dispatch(&self, request: Request<'_>, response: &mut Response) {
        let mut params = [("", ""); MAX_PARAMS];
        match self.find(&request, &mut params) {
            Found::Route(route, count) => {
                let request = request.with_params(&params[..count]);
                (route.handler)(&request, response);
                // A deferred answer goes through `after` when it is given.
                if !response.is_deferred() {
                    self.finish(&request, response);
                }
                return;
            }
            Found::Allowed => self.method_not_allowed(request.path(), response),
            Found::Nothing => {
                response.status(404);
            }
        }
        self.finish(&request, response);
    }

    /// The route for `request`, or whether its path is routed for other methods.
    fn find<'r>(
        &'r self,
        request: &Request<'r>,
        params: &mut [(&'r str, &'r str); MAX_PARAMS],
    ) -> Found<'r> {
        let (path, method) = (request.path(), request.method());
        let mut allowed = false;
        for route in &self.routes {
            let Some(count) = route.pattern.matches(path, params) else {
                continue;
            };
            allowed = true;
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                return Found::Route(route, count);
            }
        }
        if allowed {
            Found::Allowed
        } else {
            Found::Nothing
        }
    }

    /// 405 with `Allow`: the methods routed for `path` (`HEAD` with `GET`).
    fn method_not_allowed(&self, path: &str, response: &mut Response) {
        let mut params = [("", ""); MAX_PARAMS];
        let mut allow: Vec<&str> = Vec::new();
        for route in &self.routes {
            if route.pattern.matches(path, &mut params).is_some() {
                allow.push(&route.method);
                if route.method == "GET" {
                    allow.push("HEAD");
                }
            }
        }
        let mut seen = Vec::with_capacity(allow.len());
        allow.retain(|m| {
            let first = !seen.contains(m);
            seen.push(*m);
            first
        });
        response.status(405).header("allow", allow.join(", "));
    }

    fn finish(&self, request: &Request<'_>, response: &mut Response) {
        for middleware in &self.after {
            middleware(request, response);
        }
    }
}

/// What routing found for a request.
enum Found<'r> {
    /// This route, with this many captures.
    Route(&'r Route, usize),
    /// The path is routed, for other methods (405).
    Allowed,
    /// Nothing (404).
    Nothing,
}
