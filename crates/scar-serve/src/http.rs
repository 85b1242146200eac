//! The HTTP API, described by its `OpenAPI` document at `GET /v1/openapi.json`:
//!
//! ```text
//! GET  /v1/health         {"status": "ok", "indexes": N}; never needs the token
//! GET  /v1/indexes        {"indexes": [name, dir, model, documents, chunks, paths]}
//! GET  /v1/openapi.json   this API
//! POST /v1/search         a search → its scar.search/2 report
//! POST /v1/ask            a question → server-sent events: `text` pieces, then `answer`
//!                         (the scar.answer/3 report) or `error`
//! ```
//!
//! Errors are `{"error": {"status", "message"}}` with the status: 400 for a request that cannot
//! be served as it is, 401 without the token, 404 for an unknown index, 408 for a body that
//! does not arrive in time, 413 for one past the size limit, 500 for the server's own failures.
//! Searches run on blocking threads, as many at a time as there are cores; answers run one at a
//! time on a lane of their own; requests beyond wait their turn.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use scar_core::ErrorChain;
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;

use crate::{AskRequest, Library, SearchRequest, ServeError};

/// How the API is guarded and bounded.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The bearer token every request but `/v1/health` must carry; none by default (then serve
    /// on a loopback address only: see [`check_reach`]).
    pub token: Option<String>,
    /// The largest request body, in bytes (64 KiB).
    pub max_body_bytes: usize,
    /// How long a request's body may take to arrive (30 s).
    pub body_timeout: Duration,
    /// Model jobs run at once (the number of cores).
    pub workers: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            token: None,
            max_body_bytes: 64 * 1024,
            body_timeout: Duration::from_secs(30),
            workers: std::thread::available_parallelism().map_or(2, usize::from),
        }
    }
}

/// How long a client may take to send a request's headers, unless told otherwise.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// File descriptors kept back from connections, for the index files, models and answers the
/// server opens while it serves.
const FILES_KEPT: u64 = 64;

/// How many clients are served at once, and how long each may take to send its headers.
#[derive(Debug, Clone)]
pub struct Connections {
    /// Connections open at once ([`default_max_connections`]); past it, clients wait in the
    /// listen queue until one closes.
    pub max: usize,
    /// How long a client may take to send a request's headers ([`HEADER_TIMEOUT`]).
    pub header_timeout: Duration,
}

impl Default for Connections {
    fn default() -> Self {
        Self {
            max: default_max_connections(),
            header_timeout: HEADER_TIMEOUT,
        }
    }
}

/// Connections at once unless told otherwise: the file descriptors this process may open but
/// 64, from 8 to 1,024.
#[must_use]
pub fn default_max_connections() -> usize {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given and nothing else.
        #[allow(unsafe_code)]
        let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0;
        if read {
            return limit.rlim_cur.saturating_sub(FILES_KEPT).clamp(8, 1024) as usize;
        }
    }
    1024
}

/// Refuses an address that other machines can reach unless a token guards it.
pub fn check_reach(address: SocketAddr, token: Option<&str>) -> crate::Result<()> {
    if address.ip().is_loopback() || token.is_some_and(|t| !t.is_empty()) {
        Ok(())
    } else {
        Err(ServeError::Unguarded(address))
    }
}

#[derive(Clone)]
struct AppState {
    library: Arc<Library>,
    token: Option<Arc<str>>,
    work: Arc<Semaphore>,
    body_timeout: Duration,
    max_body_bytes: usize,
}

impl AppState {
    /// Runs model work on a blocking thread, once a worker is free.
    async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Library) -> crate::Result<T> + Send + 'static,
    ) -> Result<T, ApiError> {
        let permit = Arc::clone(&self.work)
            .acquire_owned()
            .await
            .map_err(|_| ApiError::internal("the server is shutting down"))?;
        let library = Arc::clone(&self.library);
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&library)
        })
        .await
        .map_err(|e| ApiError::internal(format!("the request's work failed: {e}")))?
        .map_err(ApiError::from)
    }
}

/// The API's routes over `library`.
pub fn router(library: Arc<Library>, options: &HttpOptions) -> Router {
    let state = AppState {
        library,
        token: options.token.as_deref().map(Arc::from),
        work: Arc::new(Semaphore::new(options.workers.max(1))),
        body_timeout: options.body_timeout,
        max_body_bytes: options.max_body_bytes,
    };
    let guarded = Router::new()
        .route("/v1/indexes", get(indexes))
        .route("/v1/openapi.json", get(openapi))
        .route("/v1/search", post(search))
        .route("/v1/ask", post(ask))
        .route_layer(middleware::from_fn_with_state(state.clone(), authorize));
    Router::new()
        .route("/v1/health", get(health))
        .merge(guarded)
        .fallback(not_found)
        .with_state(state)
}

/// Serves `router` on `listener` until `shutdown` resolves, within `connections`' limits; a
/// connection that fails ends alone.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    connections: &Connections,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    let open = Arc::new(Semaphore::new(connections.max.max(1)));
    let header_timeout = connections.header_timeout;
    loop {
        // A connection is accepted only when it can be served: past the limit clients wait in
        // the listen queue, rather than take the descriptors the indexes and models need.
        let permit = tokio::select! {
            permit = Arc::clone(&open).acquire_owned() => permit,
            () = &mut shutdown => return Ok(()),
        };
        let Ok(permit) = permit else {
            return Ok(());
        };
        let stream = tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    // Out of file descriptors, say: wait for connections to close.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                stream
            }
            () = &mut shutdown => return Ok(()),
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            // A client that hangs up or stalls ends its own connection, nothing else.
            let _ = connection.await;
        });
    }
}

/// Listens on `address` and serves `router` until Ctrl-C or SIGTERM, on a runtime of its own;
/// `listening` is told the address bound (the port chosen when `address` asks for port 0).
pub fn run(
    address: SocketAddr,
    router: Router,
    connections: &Connections,
    listening: impl FnOnce(SocketAddr),
) -> crate::Result<()> {
    let bind_error = |source| ServeError::Bind {
        address: address.to_string(),
        source,
    };
    let runtime = tokio::runtime::Runtime::new().map_err(bind_error)?;
    runtime.block_on(async {
        let listener = TcpListener::bind(address).await.map_err(bind_error)?;
        listening(listener.local_addr().map_err(bind_error)?);
        serve(listener, router, connections, stop_signal())
            .await
            .map_err(bind_error)
    })
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut terminate) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// An error response: `{"error": {"status", "message"}}`.
#[derive(Debug)]
struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }
}

impl From<ServeError> for ApiError {
    fn from(error: ServeError) -> Self {
        let status = match &error {
            ServeError::UnknownIndex { .. } => StatusCode::NOT_FOUND,
            e if e.is_bad_request() => StatusCode::BAD_REQUEST,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, ErrorChain(&error).to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"status": self.status.as_u16(), "message": self.message}});
        (self.status, Json(body)).into_response()
    }
}

/// A JSON request body: read within the time limit and the size limit, then parsed.
struct JsonBody(serde_json::Value);

impl FromRequest<AppState> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let too_large = || {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body is larger than {} bytes",
                    state.max_body_bytes
                ),
            )
        };
        // Refused by its announced length, before a byte of it is read.
        let announced = request
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.parse::<u64>().ok());
        if announced.is_some_and(|length| length > state.max_body_bytes as u64) {
            return Err(too_large());
        }
        let body = axum::body::to_bytes(request.into_body(), state.max_body_bytes);
        let bytes = tokio::time::timeout(state.body_timeout, body)
            .await
            .map_err(|_| {
                ApiError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time",
                )
            })?
            .map_err(|e| {
                let error = e.into_inner();
                if error.is::<http_body_util::LengthLimitError>() {
                    too_large()
                } else {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!("the request body could not be read: {error}"),
                    )
                }
            })?;
        serde_json::from_slice(&bytes).map(Self).map_err(|e| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
        })
    }
}

/// Lets a request through when no token is set or it carries the token.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(token) = &state.token else {
        return next.run(request).await;
    };
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    if given.is_some_and(|given| same_secret(given.as_bytes(), token.as_bytes())) {
        return next.run(request).await;
    }
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "a bearer token is required").into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// Compares two secrets in time that depends on their lengths only, not on where they differ.
fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    given.len() == expected.len()
        && given
            .iter()
            .zip(expected)
            .fold(0u8, |difference, (a, b)| difference | (a ^ b))
            == 0
}

async fn health(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"status": "ok", "indexes": state.library.names().len()}))
}

async fn indexes(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let summaries = state.run(Library::summaries).await?;
    Ok(Json(json!({ "indexes": summaries })))
}

async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        openapi_document(),
    )
}

/// The `OpenAPI` document, with the search report's JSON Schema in its components.
fn openapi_document() -> String {
    let mut document: serde_json::Value =
        serde_json::from_str(include_str!("openapi.json")).unwrap_or_default();
    let report: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/schema/search-v2.schema.json"))
            .unwrap_or_default();
    document["components"]["schemas"]["SearchReport"] = report;
    document.to_string()
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no such endpoint; GET /v1/openapi.json lists them",
    )
}

async fn search(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let search = SearchRequest::from_json(body)?.checked()?;
    let report = state.run(move |library| library.search(&search)).await?;
    Ok(Json(report).into_response())
}

/// What an answer's task sends the stream, in order: text pieces, then the report or the error.
enum Streamed {
    Text(String),
    Done(Box<scar_answer::AnswerReport>),
    Failed(ServeError),
}

impl Streamed {
    fn event(self) -> Event {
        let event = match self {
            Self::Text(text) => Event::default()
                .event("text")
                .json_data(json!({ "text": text })),
            Self::Done(report) => Event::default().event("answer").json_data(&report),
            Self::Failed(error) => Event::default()
                .event("error")
                .json_data(json!({ "message": ErrorChain(&error).to_string() })),
        };
        // Serialising these values cannot fail; should it, the client still sees an error event.
        event.unwrap_or_else(|_| Event::default().event("error").data("unreadable event"))
    }
}

/// Searches on a worker, then answers on the chat model's own lane (one answer at a time, the
/// model loaded by the first question), so that questions waiting for the chat model hold no
/// worker that searches need. Whatever fails before the first piece of text (loading the model,
/// a prompt too long) is an HTTP error; after it, an `error` event.
async fn ask(
    State(state): State<AppState>,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let (search, params) = AskRequest::from_json(body)?.checked()?;
    let searched = state
        .run(move |library| library.search_for_answer(&search))
        .await?;
    let (sender, mut receiver) = mpsc::channel::<Streamed>(64);
    let library = Arc::clone(&state.library);
    tokio::task::spawn_blocking(move || {
        let result = library.answer(searched, &params, &mut |piece| {
            match sender.blocking_send(Streamed::Text(piece.to_owned())) {
                Ok(()) => ControlFlow::Continue(()),
                // The client left: stop generating for nobody.
                Err(_) => ControlFlow::Break(()),
            }
        });
        let last = match result {
            Ok(report) => Streamed::Done(Box::new(report)),
            Err(error) => Streamed::Failed(error),
        };
        let _ = sender.blocking_send(last);
    });
    let first = match receiver.recv().await {
        Some(Streamed::Failed(error)) => return Err(error.into()),
        Some(first) => first,
        None => return Err(ApiError::internal("the answer ended before it began")),
    };
    let events = tokio_stream::once(first)
        .chain(ReceiverStream::new(receiver))
        .map(|piece| Ok::<_, Infallible>(piece.event()));
    Ok(Sse::new(events).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_equal_only_when_every_byte_is() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cres", b"s3cret"));
        assert!(!same_secret(b"s3cre", b"s3cret"));
        assert!(!same_secret(b"", b"s3cret"));
    }

    #[test]
    fn only_a_loopback_address_may_go_without_a_token() {
        let loopback: SocketAddr = "127.0.0.1:8765".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert!(check_reach(loopback, None).is_ok());
        assert!(check_reach("[::1]:8765".parse().unwrap(), None).is_ok());
        assert!(check_reach(any, None).is_err());
        assert!(check_reach(any, Some("")).is_err());
        assert!(check_reach(any, Some("t0ken")).is_ok());
    }

    #[test]
    fn the_openapi_document_holds_every_route_and_the_report_schema() {
        let document: serde_json::Value = serde_json::from_str(&openapi_document()).unwrap();
        for path in [
            "/v1/health",
            "/v1/indexes",
            "/v1/search",
            "/v1/ask",
            "/v1/openapi.json",
        ] {
            assert!(
                document["paths"][path].is_object(),
                "{path} is not described"
            );
        }
        let report = &document["components"]["schemas"]["SearchReport"];
        assert_eq!(report["properties"]["schema"]["const"], "scar.search/2");
    }
}
