use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use scar_embed::{DeviceChoice, Precision};
use scar_serve::{Library, LibraryOptions, Source, http};

pub use scar_test_support::{example_index, workspace};

/// The test models, on the CPU.
pub fn library_options() -> LibraryOptions {
    LibraryOptions {
        models_dir: scar_test_support::models_dir(),
        device: DeviceChoice::Cpu,
        precision: Precision::Auto,
        llm: scar_answer::DEFAULT_LLM.to_owned(),
        rerank: scar_answer::Reranking::None,
        reranker: scar_answer::DEFAULT_CROSS_ENCODER.to_owned(),
    }
}

/// The library of `dirs`, with the test models on the CPU.
pub fn library(dirs: &[PathBuf]) -> Library {
    let sources: Vec<Source> = dirs.iter().cloned().map(Source::Folder).collect();
    Library::open(&sources, library_options()).unwrap()
}

/// The example index served, shared by the tests of this binary.
pub fn example() -> Arc<Library> {
    static LIBRARY: OnceLock<Arc<Library>> = OnceLock::new();
    Arc::clone(LIBRARY.get_or_init(|| Arc::new(library(&[example_index().to_path_buf()]))))
}

/// A server on a free loopback port, running until the test binary ends.
pub struct Server {
    pub address: SocketAddr,
}

impl Server {
    pub fn start(library: Arc<Library>, options: &http::HttpOptions) -> Self {
        Self::start_with(library, options, http::Connections::default())
    }

    pub fn start_with(
        library: Arc<Library>,
        options: &http::HttpOptions,
        connections: http::Connections,
    ) -> Self {
        let router = http::router(library, options);
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Runtime::new().unwrap();
            runtime.block_on(async {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                sender.send(listener.local_addr().unwrap()).unwrap();
                http::serve(listener, router, &connections, std::future::pending())
                    .await
                    .unwrap();
            });
        });
        Self {
            address: receiver.recv().unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }
}

/// A client that reports every status as a response, not an error.
pub fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_mins(2))
        .build()
}

/// POSTs `body` to `url`: the status and the body as text.
pub fn post(url: &str, body: &str) -> (u16, String) {
    let response = match agent()
        .post(url)
        .set("Content-Type", "application/json")
        .send_string(body)
    {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(e) => panic!("{url}: {e}"),
    };
    (response.status(), response.into_string().unwrap())
}

/// GETs `url` with an optional bearer token: the status and the body.
pub fn get(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = agent().get(url);
    if let Some(token) = token {
        request = request.set("Authorization", &format!("Bearer {token}"));
    }
    let response = match request.call() {
        Ok(response) | Err(ureq::Error::Status(_, response)) => response,
        Err(e) => panic!("{url}: {e}"),
    };
    (response.status(), response.into_string().unwrap())
}
