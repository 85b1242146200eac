//! Fixtures shared by the workspace's integration tests: where the checkout and the shared data
//! are, the test models that `scripts/fetch-test-models` installs, and the example index, built
//! once per checkout.
//!
//! A fixture that cannot be set up panics with the command that sets it up: a test that needs
//! it cannot run without it.

#![allow(clippy::missing_panics_doc)]

pub mod http;
// The PDF builder lives with the tests of scar-index's PDF reader, which cannot depend on this
// crate (it depends on scar-index); the other crates' tests share the same file.
#[path = "../../scar-index/src/load/test_pdf.rs"]
mod test_pdf;

pub use test_pdf::{pdf_text_page, pdf_with_pages};

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

use scar_embed::{DeviceChoice, EmbedOptions, Embedder, ModelFiles, ModelLocator, Precision};
use scar_index::{IndexOptions, index_paths};

/// The name the example index's model goes by, as `SCAR_MODEL` or the app's model setting.
pub const MINILM: &str = "all-MiniLM-L6-v2";

/// The checkout's root folder.
#[must_use]
pub fn workspace() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .expect("the checkout exists")
    })
}

/// The checkout's `models/` folder.
#[must_use]
pub fn models_dir() -> PathBuf {
    workspace().join("models")
}

/// The corpora of the shared data folder beside the checkout.
#[must_use]
pub fn corpora() -> PathBuf {
    workspace().join("../shared/data/corpora")
}

/// all-MiniLM-L6-v2 on the CPU: for tests whose outcome depends on what texts mean.
#[must_use]
pub fn minilm() -> Embedder {
    cpu_model("sentence-transformers/all-MiniLM-L6-v2", MINILM)
}

/// [`minilm`] in the given precision.
#[must_use]
pub fn minilm_in(precision: Precision) -> Embedder {
    cpu_model_in("sentence-transformers/all-MiniLM-L6-v2", MINILM, precision)
}

/// A BERT with all-MiniLM-L6-v2's tokenizer, 2 layers of width 32 and random weights
/// (`scripts/make-bge-shaped-model tiny`): for tests of everything but meaning (byte ranges,
/// incremental runs, crash safety, graphs) at a fraction of the real model's cost. Different
/// texts still get different vectors, and equal texts equal ones.
#[must_use]
pub fn tiny_bert() -> Embedder {
    cpu_model("bge-tiny-shape", "bge-tiny-shape")
}

/// The model in `models/<folder>`, known as `name`, on the CPU in the default precision.
#[must_use]
pub fn cpu_model(name: &str, folder: &str) -> Embedder {
    cpu_model_in(name, folder, Precision::Auto)
}

/// [`cpu_model`] in the given precision.
#[must_use]
pub fn cpu_model_in(name: &str, folder: &str, precision: Precision) -> Embedder {
    let files = ModelFiles::from_dir(name, models_dir().join(folder))
        .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
    Embedder::load(&files, &cpu(precision)).expect("the test model loads")
}

fn cpu(precision: Precision) -> EmbedOptions {
    EmbedOptions::new(DeviceChoice::Cpu, precision)
}

/// `assets/example` indexed with [`MINILM`], found through the models folder as the CLI and the
/// app find it, into a folder named `example` (the name the app's library shows). In f32, so
/// that its vectors, and the scores the app's snapshots show, are the same on every CPU. Built
/// once per checkout under the target folder; later calls rerun the incremental indexer, which
/// finds nothing to do.
#[must_use]
pub fn example_index() -> &'static Path {
    static INDEX: OnceLock<PathBuf> = OnceLock::new();
    INDEX.get_or_init(|| {
        let dir = scratch_dir("example-index").join("example");
        let files = ModelLocator::from_env(models_dir())
            .locate(MINILM)
            .unwrap_or_else(|e| panic!("{e}: run scripts/fetch-test-models first"));
        let embedder = Embedder::load(&files, &cpu(Precision::F32)).expect("the test model loads");
        let report = index_paths(
            &dir,
            &[workspace().join("assets/example")],
            &embedder,
            &IndexOptions::default(),
            &mut |_| {},
            &AtomicBool::new(false),
        )
        .expect("the example indexes");
        assert!(report.is_complete(), "{report:?}");
        dir
    })
}

/// A folder under the target folder's `tmp/` for fixtures kept between runs, named after `name`
/// and the checkout, so that two checkouts sharing a target folder never share one.
#[must_use]
pub fn scratch_dir(name: &str) -> PathBuf {
    // Test binaries live in <target>/<profile>/deps/.
    let exe = std::env::current_exe().expect("the test binary has a path");
    let target = exe
        .ancestors()
        .nth(3)
        .expect("test binaries live in <target>/<profile>/deps");
    let mut hasher = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(workspace(), &mut hasher);
    let checkout = std::hash::Hasher::finish(&hasher);
    target.join("tmp").join(format!("{name}-{checkout:016x}"))
}

/// Numbers uniform in [-0.5, 0.5) from `seed` (splitmix64), for the benchmarks' synthetic
/// vectors: the same seed gives the same numbers on every machine.
pub fn uniform_stream(mut state: u64) -> impl FnMut() -> f32 {
    move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    }
}

/// `vector` scaled to unit length.
#[must_use]
pub fn normalised(mut vector: Vec<f32>) -> Vec<f32> {
    let norm = vector.iter().map(|x| x * x).sum::<f32>().sqrt();
    for x in &mut vector {
        *x /= norm;
    }
    vector
}

/// A unit vector near `direction`: `noise` is the spread of the uniform noise added to each
/// value, drawn from `next` (a [`uniform_stream`]).
pub fn near(direction: &[f32], noise: f32, next: &mut impl FnMut() -> f32) -> Vec<f32> {
    normalised(direction.iter().map(|x| x + noise * next()).collect())
}

/// The database at `database` (a URL [`postgres_database`] gave) as the test server's streaming
/// replica serves it (`SCAR_TEST_POSTGRES_REPLICA`, which `scripts/test` sets); or `None`, said,
/// when no replica is named and none is required.
///
/// # Panics
///
/// When `SCAR_REQUIRE_TOOLS` is set and no replica is named.
#[must_use]
pub fn postgres_replica_of(database: &str) -> Option<String> {
    let Ok(replica) = std::env::var("SCAR_TEST_POSTGRES_REPLICA") else {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but SCAR_TEST_POSTGRES_REPLICA \
             names no replica"
        );
        eprintln!("skipped: SCAR_TEST_POSTGRES_REPLICA names no PostgreSQL replica");
        return None;
    };
    let (server, _) = replica.rsplit_once('/').expect("a URL names its database");
    let (_, name) = database.rsplit_once('/').expect("a URL names its database");
    Some(format!("{server}/{name}"))
}

/// A new, empty database on the PostgreSQL test server (`scripts/start-postgres`, which
/// `scripts/test` runs and names in `SCAR_TEST_POSTGRES`), named after `name` and this process,
/// as a URL; or `None`, said, when no server is named and none is required.
///
/// # Panics
///
/// When `SCAR_REQUIRE_TOOLS` is set and no server is named, or the server refuses.
#[must_use]
pub fn postgres_database(name: &str) -> Option<String> {
    let Ok(url) = std::env::var("SCAR_TEST_POSTGRES") else {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but SCAR_TEST_POSTGRES names no \
             server: scripts/test starts one with scripts/start-postgres"
        );
        eprintln!("skipped: SCAR_TEST_POSTGRES names no PostgreSQL server");
        return None;
    };
    Some(fresh_database(&url, name))
}

/// A new, empty database named after `name` and this process on the server `url` names, as a
/// URL.
fn fresh_database(url: &str, name: &str) -> String {
    let database = format!("scar_test_{name}_{}", std::process::id());
    let mut client = postgres::Client::connect(url, postgres::NoTls)
        .unwrap_or_else(|e| panic!("the test server at {url}: {e}"));
    // One statement a call: neither may run inside the transaction a batch makes.
    for statement in [
        format!("DROP DATABASE IF EXISTS {database} WITH (FORCE)"),
        format!("CREATE DATABASE {database}"),
    ] {
        client
            .batch_execute(&statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    let (server, _) = url.rsplit_once('/').expect("a URL names its database");
    format!("{server}/{database}")
}

/// A new, empty database named after `name` on each of the shard servers
/// (`SCAR_TEST_POSTGRES_SHARDS`, space-separated URLs, which `scripts/test` sets); or `None`,
/// said, when no shards are named and none are required.
///
/// # Panics
///
/// When `SCAR_REQUIRE_TOOLS` is set and no shards are named, or a shard refuses.
#[must_use]
pub fn postgres_shards(name: &str) -> Option<Vec<String>> {
    let Ok(shards) = std::env::var("SCAR_TEST_POSTGRES_SHARDS") else {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but SCAR_TEST_POSTGRES_SHARDS \
             names no shard servers"
        );
        eprintln!("skipped: SCAR_TEST_POSTGRES_SHARDS names no PostgreSQL shard servers");
        return None;
    };
    Some(
        shards
            .split_whitespace()
            .map(|url| fresh_database(url, name))
            .collect(),
    )
}
