use std::net::SocketAddr;

/// Everything that can go wrong serving.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Nothing to serve.
    #[error("no index to serve; name one or more index folders")]
    NoIndex,
    /// An index or its model could not be opened.
    #[error("cannot serve {place}")]
    Open {
        /// The index folder, or the store's URL without its password.
        place: String,
        /// Why.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A request named an index that is not served.
    #[error("no index is called `{name}`; the indexes served are {known}")]
    UnknownIndex {
        /// The name asked for.
        name: String,
        /// The names served.
        known: String,
    },
    /// A request that cannot be served as it is.
    #[error("{0}")]
    BadRequest(String),
    /// The search failed (boxed: the retrieval error is large, and requests pass this one around).
    #[error(transparent)]
    Search(Box<scar_retrieve::RetrieveError>),
    /// The chat model could not be found or loaded.
    #[error("the chat model cannot answer")]
    ChatModel(#[source] scar_answer::AnswerError),
    /// Generating the answer failed.
    #[error(transparent)]
    Answer(#[from] scar_answer::AnswerError),
    /// Binding the address failed.
    #[error("cannot listen on {address}")]
    Bind {
        /// The address.
        address: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Another machine could reach the server, and no token guards it.
    #[error(
        "{0} can be reached from other machines; serve it with a token (--token or \
         SCAR_SERVE_TOKEN) or on a loopback address such as 127.0.0.1"
    )]
    Unguarded(SocketAddr),
    /// Reading or writing the MCP stream failed.
    #[error("the MCP stream failed")]
    Stream(#[source] std::io::Error),
}

impl ServeError {
    pub(crate) fn open(
        source: &crate::Source,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Open {
            place: source.to_string(),
            source: Box::new(error),
        }
    }

    pub(crate) fn bad(message: impl Into<String>) -> Self {
        Self::BadRequest(message.into())
    }

    /// True when the request, not the server, is at fault.
    #[must_use]
    pub fn is_bad_request(&self) -> bool {
        use scar_retrieve::RetrieveError as R;
        matches!(self, Self::BadRequest(_) | Self::UnknownIndex { .. })
            || matches!(self, Self::Search(e) if matches!(**e, R::EmptyQuery | R::ZeroK | R::BadFirstStage(_)))
    }
}

impl From<scar_retrieve::RetrieveError> for ServeError {
    fn from(error: scar_retrieve::RetrieveError) -> Self {
        Self::Search(Box::new(error))
    }
}

/// Result with [`ServeError`].
pub type Result<T, E = ServeError> = std::result::Result<T, E>;
