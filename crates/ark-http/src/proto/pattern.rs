//! Route patterns: parsed and checked once, when a route is added ([`Pattern::parse`]), then
//! matched against request paths without allocating ([`Pattern::matches`]).

/// Most parameters a pattern may capture.
pub const MAX_PARAMS: usize = 8;

/// A route the router refuses when it is added: [`Router::try_route`](crate::Router::try_route)
/// returns it, [`Router::route`](crate::Router::route) panics with it (at start-up, naming the
/// pattern, as axum does), so no route is silently unreachable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// The pattern does not start with `/`.
    #[error("route {pattern:?}: a pattern starts with '/'")]
    NoLeadingSlash {
        /// The pattern.
        pattern: String,
    },
    /// `//`, or a `/` at the end: routes match whole segments, so `/users/` would be `/users`.
    #[error("route {pattern:?}: empty segment ('//' or a trailing '/')")]
    EmptySegment {
        /// The pattern.
        pattern: String,
    },
    /// A wildcard (`*rest`, `{*rest}`) that is not the last segment.
    #[error("route {pattern:?}: the wildcard {name:?} must be the last segment")]
    WildcardNotLast {
        /// The pattern.
        pattern: String,
        /// The wildcard's name.
        name: String,
    },
    /// One parameter name twice.
    #[error("route {pattern:?}: parameter {name:?} appears twice")]
    DuplicateParam {
        /// The pattern.
        pattern: String,
        /// The name.
        name: String,
    },
    /// A capture with no name (`/:`, `/*`, `{}`), or a name with `{`, `}`, `:` or `*` in it.
    #[error(
        "route {pattern:?}: capture {segment:?} needs a plain name (`:id`, `*rest`, `{{id}}`, `{{*rest}}`)"
    )]
    BadCaptureName {
        /// The pattern.
        pattern: String,
        /// The segment.
        segment: String,
    },
    /// Braces inside a segment of text (`/file.{ext}`): captures are whole segments.
    #[error(
        "route {pattern:?}: segment {segment:?} mixes text and a capture; captures are whole segments"
    )]
    PartialCapture {
        /// The pattern.
        pattern: String,
        /// The segment.
        segment: String,
    },
    /// More than [`MAX_PARAMS`] captures.
    #[error("route {pattern:?}: more than {MAX_PARAMS} parameters")]
    TooManyParams {
        /// The pattern.
        pattern: String,
    },
    /// A method that is not an HTTP token (a space, a `/`, an empty string, ...).
    #[error("method {method:?} is not an HTTP token (letters, digits and !#$%&'*+-.^_`|~)")]
    BadMethod {
        /// The method.
        method: String,
    },
    /// The same method and the same pattern (whatever the parameters' names) twice: the second
    /// could never be reached.
    #[error("route {method} {pattern:?} is routed already")]
    Duplicate {
        /// The method.
        method: String,
        /// The pattern.
        pattern: String,
    },
}

/// One segment of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Static(String),
    Param(String),
    Wildcard(String),
}

impl Segment {
    /// Same shape: what a path would match alike (names aside).
    fn same_shape(&self, other: &Segment) -> bool {
        match (self, other) {
            (Segment::Static(a), Segment::Static(b)) => a == b,
            (Segment::Param(_), Segment::Param(_))
            | (Segment::Wildcard(_), Segment::Wildcard(_)) => true,
            _ => false,
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Segment::Param(name) | Segment::Wildcard(name) => Some(name),
            Segment::Static(_) => None,
        }
    }
}

/// A checked route pattern: `/`, static segments, `:param` or `{param}`, and a last
/// `*wildcard` or `{*wildcard}`.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    segments: Vec<Segment>,
}

/// Whether `name` is a plain capture name.
fn plain(name: &str) -> bool {
    !name.is_empty() && !name.contains(['{', '}', ':', '*'])
}

/// One segment of `pattern` (text between slashes).
fn segment(pattern: &str, text: &str) -> Result<Segment, RouteError> {
    let bad_name = || RouteError::BadCaptureName {
        pattern: pattern.into(),
        segment: text.into(),
    };
    let capture = if let Some(inner) = text.strip_prefix('{') {
        Some(
            inner
                .strip_suffix('}')
                .ok_or_else(|| RouteError::PartialCapture {
                    pattern: pattern.into(),
                    segment: text.into(),
                })?,
        )
    } else if text.contains(['{', '}']) {
        return Err(RouteError::PartialCapture {
            pattern: pattern.into(),
            segment: text.into(),
        });
    } else if text.starts_with([':', '*']) {
        Some(text)
    } else {
        None
    };
    let Some(capture) = capture else {
        return Ok(Segment::Static(text.into()));
    };
    let (wildcard, name) = match capture.strip_prefix('*') {
        Some(name) => (true, name),
        None if text.starts_with(':') => (false, &capture[1..]),
        None => (false, capture),
    };
    if !plain(name) {
        return Err(bad_name());
    }
    Ok(if wildcard {
        Segment::Wildcard(name.into())
    } else {
        Segment::Param(name.into())
    })
}

impl Pattern {
    /// Parses and checks `pattern`.
    pub(crate) fn parse(pattern: &str) -> Result<Pattern, RouteError> {
        let Some(rest) = pattern.strip_prefix('/') else {
            return Err(RouteError::NoLeadingSlash {
                pattern: pattern.into(),
            });
        };
        let mut segments: Vec<Segment> = Vec::new();
        if !rest.is_empty() {
            for text in rest.split('/') {
                if text.is_empty() {
                    return Err(RouteError::EmptySegment {
                        pattern: pattern.into(),
                    });
                }
                segments.push(segment(pattern, text)?);
            }
        }
        Pattern::check(pattern, &segments)?;
        Ok(Pattern { segments })
    }

    /// A wildcard only last; names once; at most [`MAX_PARAMS`].
    fn check(pattern: &str, segments: &[Segment]) -> Result<(), RouteError> {
        let mut names: Vec<&str> = Vec::new();
        for (i, segment) in segments.iter().enumerate() {
            if let Segment::Wildcard(name) = segment
                && i + 1 != segments.len()
            {
                return Err(RouteError::WildcardNotLast {
                    pattern: pattern.into(),
                    name: name.clone(),
                });
            }
            let Some(name) = segment.name() else {
                continue;
            };
            if names.contains(&name) {
                return Err(RouteError::DuplicateParam {
                    pattern: pattern.into(),
                    name: name.into(),
                });
            }
            names.push(name);
        }
        if names.len() > MAX_PARAMS {
            return Err(RouteError::TooManyParams {
                pattern: pattern.into(),
            });
        }
        Ok(())
    }

    /// Whether a path matching one matches the other alike.
    pub(crate) fn same_shape(&self, other: &Pattern) -> bool {
        self.segments.len() == other.segments.len()
            && self
                .segments
                .iter()
                .zip(&other.segments)
                .all(|(a, b)| a.same_shape(b))
    }

    /// Whether `path` matches; the captures go into `params`, their count returned.
    pub(crate) fn matches<'p>(
        &'p self,
        path: &'p str,
        params: &mut [(&'p str, &'p str); MAX_PARAMS],
    ) -> Option<usize> {
        let mut rest = path.strip_prefix('/').unwrap_or(path);
        let mut count = 0;
        for segment in &self.segments {
            if let Segment::Wildcard(name) = segment {
                params[count] = (name, rest);
                return Some(count + 1);
            }
            if rest.is_empty() {
                return None;
            }
            let (part, tail) = rest.split_once('/').unwrap_or((rest, ""));
            match segment {
                Segment::Static(s) if s == part => {}
                Segment::Param(name) => {
                    params[count] = (name, part);
                    count += 1;
                }
                _ => return None,
            }
            rest = tail;
        }
        rest.is_empty().then_some(count)
    }
}

/// Whether `method` is an HTTP token (RFC 9110 §5.6.2).
pub(crate) fn is_token(method: &str) -> bool {
    !method.is_empty()
        && method
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(pattern: &str) -> RouteError {
        Pattern::parse(pattern).unwrap_err()
    }

    #[test]
    fn both_capture_syntaxes_match_alike() {
        for pattern in ["/users/:id/files/*path", "/users/{id}/files/{*path}"] {
            let parsed = Pattern::parse(pattern).unwrap();
            let mut params = [("", ""); MAX_PARAMS];
            assert_eq!(parsed.matches("/users/7/files/a/b", &mut params), Some(2));
            assert_eq!(params[..2], [("id", "7"), ("path", "a/b")]);
            assert_eq!(parsed.matches("/users/7", &mut params), None);
        }
        let root = Pattern::parse("/").unwrap();
        let mut params = [("", ""); MAX_PARAMS];
        assert_eq!(root.matches("/", &mut params), Some(0));
        assert_eq!(root.matches("/x", &mut params), None);
        let rest = Pattern::parse("/static/*rest").unwrap();
        let mut params = [("", ""); MAX_PARAMS];
        assert_eq!(rest.matches("/static/", &mut params), Some(1));
        assert_eq!(params[0], ("rest", ""));
    }

    #[test]
    fn every_bad_pattern_is_refused_by_name() {
        assert!(matches!(
            refused("users"),
            RouteError::NoLeadingSlash { .. }
        ));
        assert!(matches!(refused(""), RouteError::NoLeadingSlash { .. }));
        assert!(matches!(refused("/a//b"), RouteError::EmptySegment { .. }));
        assert!(matches!(refused("/a/"), RouteError::EmptySegment { .. }));
        assert_eq!(
            refused("/a/*rest/b"),
            RouteError::WildcardNotLast {
                pattern: "/a/*rest/b".into(),
                name: "rest".into()
            }
        );
        assert!(matches!(
            refused("/a/{*rest}/b"),
            RouteError::WildcardNotLast { .. }
        ));
        assert!(matches!(
            refused("/:id/x/:id"),
            RouteError::DuplicateParam { .. }
        ));
        assert!(matches!(
            refused("/{id}/:id"),
            RouteError::DuplicateParam { .. }
        ));
        for bad in ["/:", "/*", "/{}", "/{*}", "/:a:b", "/{a{b}"] {
            assert!(
                matches!(
                    refused(bad),
                    RouteError::BadCaptureName { .. } | RouteError::PartialCapture { .. }
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            refused("/file.{ext}"),
            RouteError::PartialCapture { .. }
        ));
        assert!(matches!(refused("/{id"), RouteError::PartialCapture { .. }));
        let many = (0..=MAX_PARAMS)
            .map(|i| format!("/:p{i}"))
            .collect::<String>();
        assert!(matches!(refused(&many), RouteError::TooManyParams { .. }));
        assert!(refused("/a/*rest/b").to_string().contains("\"/a/*rest/b\""));
    }

    #[test]
    fn methods_are_tokens() {
        for good in ["GET", "M-SEARCH", "PROPFIND", "x.y"] {
            assert!(is_token(good), "{good}");
        }
        for bad in ["", "GET POST", "GE/T", "GÉT", "GET\r\n"] {
            assert!(!is_token(bad), "{bad:?}");
        }
    }
}
