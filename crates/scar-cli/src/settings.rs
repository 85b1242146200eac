//! Effective settings: a flag beats a `SCAR_*` environment variable, which beats the config
//! file (`<config dir>/scar/config.toml`), which beats the default. Each value remembers where
//! it came from, for `scar config`.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};

use scar_answer::{DEFAULT_CROSS_ENCODER, RerankerModels, Reranking};
use scar_embed::{DeviceChoice, EmbedOptions, Embedder, Precision};
use scar_policy::{Policy, PolicyKind, PolicySettings};
use scar_retrieve::{FirstStage, Rerank};
use serde::Serialize;

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    Flag,
    Environment,
    ConfigFile,
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Flag => "flag",
            Self::Environment => "environment",
            Self::ConfigFile => "config file",
            Self::Default => "default",
        })
    }
}

/// A resolved value and its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    pub source: Source,
}

/// Values given on the command line (None: not given). The doc comments are clap's help text.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Default, Clone, clap::Args)]
pub struct SettingFlags {
    /// Index folder [env: SCAR_INDEX] [default: ~/.local/share/scar/index on Linux]
    #[arg(long, global = true)]
    pub index: Option<PathBuf>,
    /// Embedding model: hub id, short name or folder [env: SCAR_MODEL] [default: BAAI/bge-large-en-v1.5]
    #[arg(long, global = true)]
    pub model: Option<String>,
    /// PostgreSQL store that `index` publishes to and the searches read instead of the index folder: postgres://USER@HOST:PORT/DB [env: SCAR_STORE] [default: none]
    #[arg(long, global = true)]
    pub store: Option<String>,
    /// Where models are installed [env: SCAR_MODELS_DIR] [default: ./models]
    #[arg(long, global = true)]
    pub models_dir: Option<PathBuf>,
    /// cpu, cuda, cuda:N or auto [env: SCAR_DEVICE] [default: auto]
    #[arg(long, global = true)]
    pub device: Option<DeviceChoice>,
    /// Embedding precision: auto, f32, bf16 (CPUs with AVX-512 BF16; GPUs), int8 (CPUs with AVX-512 VNNI or AVX-VNNI) or f16 (GPUs; CPUs with AVX2, FMA and F16C, as f16 weights) [env: SCAR_PRECISION] [default: auto: bf16 where the CPU has it, f16 weights on AVX2 CPUs without AVX-512, f16 on a GPU, else f32]
    #[arg(long, global = true)]
    pub precision: Option<Precision>,
}

/// Search settings given on the command line.
#[allow(clippy::doc_markdown)]
#[derive(Debug, Default, Clone, clap::Args)]
pub struct SearchFlags {
    /// Seeds taken from the first stage [env: SCAR_K] [default: 5]
    #[arg(long, short, allow_negative_numbers = true)]
    pub k: Option<usize>,
    /// Expansion policy: evidence, scar, static_window, top_k, parent or section [env: SCAR_POLICY] [default: evidence]
    #[arg(long)]
    pub policy: Option<PolicyKind>,
    /// Neighbours considered on each side [env: SCAR_WINDOW] [default: 2 for evidence, 1 for scar and static_window]
    #[arg(long, allow_negative_numbers = true)]
    pub window: Option<u32>,
    /// Evidence walk: a neighbour must rank among the top depth × k chunks [env: SCAR_DEPTH] [default: 10]
    #[arg(long, allow_negative_numbers = true)]
    pub depth: Option<u32>,
    /// λ, weight of the continuity penalty [env: SCAR_LAMBDA] [default: 0.1]
    #[arg(long, allow_negative_numbers = true)]
    pub lambda: Option<f32>,
    /// γ, the bar as a share of the seed's relevance [env: SCAR_GAMMA] [default: 0.8]
    #[arg(long, allow_negative_numbers = true)]
    pub gamma: Option<f32>,
    /// Chunks per parent block (`parent`, and `section` in documents without headings) [env: SCAR_PARENT_BLOCK] [default: 4]
    #[arg(long, allow_negative_numbers = true)]
    pub parent_block: Option<u32>,
    /// dense, bm25 or hybrid [env: SCAR_FIRST_STAGE] [default: hybrid]
    #[arg(long)]
    pub first_stage: Option<FirstStage>,
    #[command(flatten)]
    pub rerank: RerankFlags,
    /// Stop expanding when the context would pass this many tokens [env: SCAR_BUDGET_TOKENS]
    #[arg(long, allow_negative_numbers = true)]
    pub budget_tokens: Option<usize>,
}

/// The reranker, given on the command line (searches, answers and the servers).
#[allow(clippy::doc_markdown)]
#[derive(Debug, Default, Clone, clap::Args)]
pub struct RerankFlags {
    /// Judge the first stage's best 30 candidates again and take the seeds in its order: none, sentence (the candidate's sentence closest to the question), llm (the probability of "yes" from the chat model the llm setting names; tens of seconds a question), likelihood (how much likelier that chat model finds the question after the candidate; as slow) or cross-encoder (--reranker) [env: SCAR_RERANK] [default: none]
    #[arg(long)]
    pub rerank: Option<Reranking>,
    /// Cross-encoder for `--rerank cross-encoder`: hub id or folder [env: SCAR_RERANKER] [default: cross-encoder/ms-marco-MiniLM-L-6-v2]
    #[arg(long)]
    pub reranker: Option<String>,
}

/// A server's search settings: the reranker alone (requests carry the rest).
impl From<RerankFlags> for SearchFlags {
    fn from(rerank: RerankFlags) -> Self {
        Self {
            rerank,
            ..Self::default()
        }
    }
}

/// Answer settings given on the command line (`scar ask`).
#[allow(clippy::doc_markdown)]
#[derive(Debug, Default, Clone, clap::Args)]
pub struct AnswerFlags {
    /// Local chat model: GGUF file, folder, known name or org/repo:file.gguf [env: SCAR_LLM] [default: SmolLM2-135M-Instruct]
    #[arg(long)]
    pub llm: Option<String>,
    /// Answer through an OpenAI-compatible server instead, e.g. http://127.0.0.1:8080/v1; a key, if any, from SCAR_LLM_API_KEY [env: SCAR_LLM_URL]
    #[arg(long)]
    pub llm_url: Option<String>,
    /// Model name sent to that server [env: SCAR_LLM_MODEL] [default: default]
    #[arg(long)]
    pub llm_model: Option<String>,
    /// Let --llm-url name a host other than this machine (documents are sent there) [env: SCAR_ALLOW_REMOTE_HOST]
    #[arg(long)]
    pub allow_remote_host: bool,
    /// Most tokens in the answer [env: SCAR_MAX_TOKENS] [default: 256]
    #[arg(long, allow_negative_numbers = true)]
    pub max_tokens: Option<usize>,
    /// 0 answers deterministically; higher samples, up to 2 [env: SCAR_TEMPERATURE] [default: 0]
    #[arg(long, allow_negative_numbers = true)]
    pub temperature: Option<f64>,
    /// Sampling seed [env: SCAR_SEED] [default: 42]
    #[arg(long, allow_negative_numbers = true)]
    pub seed: Option<u64>,
}

impl AnswerFlags {
    /// Only a chat model given (the servers answer with a local model and their own defaults).
    pub fn llm(llm: Option<String>) -> Self {
        Self {
            llm,
            ..Self::default()
        }
    }
}

/// The highest temperature accepted: OpenAI-compatible servers refuse more, and a local model
/// samples noise long before it.
pub const MAX_TEMPERATURE: f64 = 2.0;

/// Every setting, resolved.
#[derive(Debug, Clone)]
pub struct Settings {
    pub index: Setting<PathBuf>,
    /// A PostgreSQL store's URL; `None`: the index folder alone.
    pub store: Setting<Option<String>>,
    pub model: Setting<String>,
    pub models_dir: Setting<PathBuf>,
    pub device: Setting<DeviceChoice>,
    pub precision: Setting<Precision>,
    pub k: Setting<usize>,
    pub policy: Setting<PolicyKind>,
    /// `None`: the policy's own window.
    pub window: Setting<Option<u32>>,
    pub depth: Setting<u32>,
    pub lambda: Setting<f32>,
    pub gamma: Setting<f32>,
    pub parent_block: Setting<u32>,
    pub first_stage: Setting<FirstStage>,
    pub rerank: Setting<Reranking>,
    pub reranker: Setting<String>,
    pub budget_tokens: Setting<Option<usize>>,
    pub llm: Setting<String>,
    pub llm_url: Setting<Option<String>>,
    pub llm_model: Setting<String>,
    pub allow_remote_host: Setting<bool>,
    pub max_tokens: Setting<usize>,
    pub temperature: Setting<f64>,
    pub seed: Setting<u64>,
    /// The config file that was read, if it exists.
    pub config_file: Option<PathBuf>,
}

/// The user's config file.
pub fn config_path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("scar").join("config.toml"))
}

struct Layers {
    environment: BTreeMap<String, String>,
    file: BTreeMap<String, String>,
    file_path: Option<PathBuf>,
    /// Every key resolved so far: the settings there are.
    asked: std::cell::RefCell<Vec<&'static str>>,
}

impl Layers {
    /// A setting whose value is text or nothing (`none`, or empty).
    fn resolve_optional_text(
        &self,
        key: &'static str,
        flag: Option<&String>,
    ) -> Result<Setting<Option<String>>> {
        let setting = self.resolve(
            key,
            flag.cloned().map(|u| OptionalText(Some(u))),
            OptionalText(None),
        )?;
        Ok(Setting {
            value: setting.value.0,
            source: setting.source,
        })
    }

    fn read() -> Result<Self> {
        let environment = std::env::vars()
            .filter_map(|(k, v)| {
                k.strip_prefix("SCAR_")
                    .map(|key| (key.to_ascii_lowercase(), v))
            })
            .collect();
        let path = std::env::var_os("SCAR_CONFIG")
            .map(PathBuf::from)
            .or_else(config_path);
        let mut file = BTreeMap::new();
        let mut file_path = None;
        if let Some(path) = path.filter(|p| p.is_file()) {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let table: toml::Table = text
                .parse()
                .with_context(|| format!("parsing {}", path.display()))?;
            for (key, value) in table {
                let value = match value {
                    toml::Value::String(s) => s,
                    other => other.to_string(),
                };
                file.insert(key.replace('-', "_"), value);
            }
            file_path = Some(path);
        }
        Ok(Self {
            environment,
            file,
            file_path,
            asked: std::cell::RefCell::default(),
        })
    }

    /// Refuses a config file key that no setting reads (a typo would otherwise be ignored),
    /// suggesting the setting nearest in spelling.
    fn refuse_unknown_keys(&self) -> Result<()> {
        let asked = self.asked.borrow();
        let Some(unknown) = self.file.keys().find(|key| !asked.contains(&key.as_str())) else {
            return Ok(());
        };
        let nearest = asked
            .iter()
            .min_by_key(|known| edit_distance(unknown, known))
            .filter(|known| edit_distance(unknown, known) <= 2)
            .map_or_else(String::new, |known| format!("did you mean `{known}`? "));
        let path = self
            .file_path
            .as_ref()
            .map_or_else(String::new, |p| p.display().to_string());
        bail!(
            "`{unknown}` in {path} is not a setting; {nearest}the settings are {}",
            asked.join(", ")
        );
    }

    fn resolve<T>(&self, key: &'static str, flag: Option<T>, default: T) -> Result<Setting<T>>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.asked.borrow_mut().push(key);
        if let Some(value) = flag {
            return Ok(Setting {
                value,
                source: Source::Flag,
            });
        }
        for (layer, source, place) in [
            (
                &self.environment,
                Source::Environment,
                format!("SCAR_{}", key.to_ascii_uppercase()),
            ),
            (
                &self.file,
                Source::ConfigFile,
                format!("`{key}` in the config file"),
            ),
        ] {
            if let Some(text) = layer.get(key) {
                let value = text
                    .parse()
                    .map_err(|e| anyhow::anyhow!("{place} = {text:?}: {e}"))?;
                return Ok(Setting { value, source });
            }
        }
        Ok(Setting {
            value: default,
            source: Source::Default,
        })
    }
}

/// Letters to insert, delete or replace to turn `a` into `b` (Levenshtein).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, x) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, y) in b.iter().enumerate() {
            let replace = previous[j] + usize::from(x != *y);
            current.push(replace.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// A text that may be absent (`none` or empty clears it).
#[derive(Debug, Clone)]
struct OptionalText(Option<String>);

impl FromStr for OptionalText {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        let text = text.trim();
        Ok(Self(
            (!matches!(text, "" | "none" | "off")).then(|| text.to_owned()),
        ))
    }
}

/// A number that may be absent (`budget_tokens = none` clears it; `window = default` takes the
/// policy's own).
#[derive(Debug, Clone, Copy)]
struct Optional<T>(Option<T>);

impl<T: FromStr> FromStr for Optional<T> {
    type Err = T::Err;
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        if matches!(text.trim(), "" | "none" | "off" | "default") {
            Ok(Self(None))
        } else {
            text.trim().parse().map(|n| Self(Some(n)))
        }
    }
}

impl Settings {
    pub fn resolve(
        flags: &SettingFlags,
        search: &SearchFlags,
        answer: &AnswerFlags,
    ) -> Result<Self> {
        let layers = Layers::read()?;
        let default_index = dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("scar")
            .join("index");
        let budget = layers.resolve(
            "budget_tokens",
            search.budget_tokens.map(|b| Optional(Some(b))),
            Optional(None),
        )?;
        let window = layers.resolve(
            "window",
            search.window.map(|w| Optional(Some(w))),
            Optional(None),
        )?;
        let generation = scar_answer::GenerationParams::default();
        let settings = Self {
            index: layers.resolve("index", flags.index.clone(), default_index)?,
            store: layers.resolve_optional_text("store", flags.store.as_ref())?,
            model: layers.resolve(
                "model",
                flags.model.clone(),
                scar_embed::DEFAULT_MODEL.to_owned(),
            )?,
            models_dir: layers.resolve(
                "models_dir",
                flags.models_dir.clone(),
                PathBuf::from("models"),
            )?,
            device: layers.resolve("device", flags.device, DeviceChoice::Auto)?,
            precision: layers.resolve("precision", flags.precision, Precision::Auto)?,
            k: layers.resolve("k", search.k, scar_retrieve::DEFAULT_K)?,
            policy: layers.resolve("policy", search.policy, PolicyKind::default())?,
            window: Setting {
                value: window.value.0,
                source: window.source,
            },
            depth: layers.resolve("depth", search.depth, Policy::DEFAULT_DEPTH)?,
            lambda: layers.resolve("lambda", search.lambda, Policy::PAPER_LAMBDA)?,
            gamma: layers.resolve("gamma", search.gamma, Policy::PAPER_GAMMA)?,
            parent_block: layers.resolve(
                "parent_block",
                search.parent_block,
                Policy::DEFAULT_BLOCK,
            )?,
            first_stage: layers.resolve(
                "first_stage",
                search.first_stage,
                FirstStage::default(),
            )?,
            rerank: layers.resolve("rerank", search.rerank.rerank, Reranking::default())?,
            reranker: layers.resolve(
                "reranker",
                search.rerank.reranker.clone(),
                DEFAULT_CROSS_ENCODER.to_owned(),
            )?,
            budget_tokens: Setting {
                value: budget.value.0,
                source: budget.source,
            },
            llm: layers.resolve(
                "llm",
                answer.llm.clone(),
                scar_answer::DEFAULT_LLM.to_owned(),
            )?,
            llm_url: layers.resolve_optional_text("llm_url", answer.llm_url.as_ref())?,
            llm_model: layers.resolve(
                "llm_model",
                answer.llm_model.clone(),
                "default".to_owned(),
            )?,
            allow_remote_host: layers.resolve(
                "allow_remote_host",
                answer.allow_remote_host.then_some(true),
                false,
            )?,
            max_tokens: layers.resolve("max_tokens", answer.max_tokens, generation.max_tokens)?,
            temperature: layers.resolve(
                "temperature",
                answer.temperature,
                generation.temperature,
            )?,
            seed: layers.resolve("seed", answer.seed, generation.seed)?,
            config_file: layers.file_path.clone(),
        };
        layers.refuse_unknown_keys()?;
        settings.validated()
    }

    /// The settings, if every value is in range, whatever the command: a bad value in the config
    /// file should not wait for the day a command reads it to surface.
    fn validated(self) -> Result<Self> {
        self.policy()?;
        if self.max_tokens.value == 0 {
            bail!(
                "{} = 0: max_tokens must be at least 1",
                self.origin("max_tokens", self.max_tokens.source)
            );
        }
        let temperature = self.temperature.value;
        if !(0.0..=MAX_TEMPERATURE).contains(&temperature) {
            bail!(
                "{} = {temperature}: temperature must be between 0 and {MAX_TEMPERATURE} \
                 (0 answers deterministically)",
                self.origin("temperature", self.temperature.source)
            );
        }
        Ok(self)
    }

    /// Where the value of setting `key` was given, in the words the user gave it.
    fn origin(&self, key: &str, source: Source) -> String {
        match source {
            Source::Flag => format!("--{}", key.replace('_', "-")),
            Source::Environment => format!("SCAR_{}", key.to_ascii_uppercase()),
            Source::ConfigFile => format!(
                "`{key}` in {}",
                self.config_file
                    .as_ref()
                    .map_or_else(|| "the config file".to_owned(), |p| p.display().to_string())
            ),
            Source::Default => format!("the default {key}"),
        }
    }

    /// The policy these settings describe, validated.
    pub fn policy(&self) -> Result<scar_policy::Options> {
        let settings = PolicySettings {
            lambda: self.lambda.value,
            gamma: self.gamma.value,
            window: self.window.value,
            block: self.parent_block.value,
            depth: self.depth.value,
        };
        // Every setting is checked, not only those the chosen policy reads: a bad value in the
        // config file should not wait for the day someone switches policy to surface.
        for kind in PolicyKind::ALL {
            Policy::from_kind(kind, &settings).validate()?;
        }
        let policy = Policy::from_kind(self.policy.value, &settings);
        if self.k.value == 0 {
            bail!("k must be at least 1");
        }
        Ok(scar_policy::Options::new(policy)?.with_budget(self.budget_tokens.value))
    }

    /// The embedding model named by `--model` for this run, which overrides an existing index's.
    pub fn named_model(&self) -> Option<&str> {
        (self.model.source == Source::Flag).then_some(self.model.value.as_str())
    }

    /// How the embedding model is loaded: on the chosen device, in the chosen precision.
    pub fn embed_options(&self) -> EmbedOptions {
        EmbedOptions::new(self.device.value, self.precision.value)
    }

    /// The judge the `rerank` setting names, loaded beside `embedder` (the index's model).
    pub fn reranker(&self, embedder: Arc<Embedder>) -> Result<Option<Arc<dyn Rerank>>> {
        self.open_reranker(self.rerank.value, embedder)
    }

    /// The judge `choice` names, from the models these settings name.
    pub fn open_reranker(
        &self,
        choice: Reranking,
        embedder: Arc<Embedder>,
    ) -> Result<Option<Arc<dyn Rerank>>> {
        let embed = self.embed_options();
        let sources = RerankerModels {
            models_dir: &self.models_dir.value,
            cross_encoder: &self.reranker.value,
            llm: &self.llm.value,
            embed: &embed,
        };
        Ok(choice.open(embedder, &sources)?)
    }

    /// How answers are generated: the answer settings over the library's defaults.
    pub fn generation_params(&self) -> scar_answer::GenerationParams {
        scar_answer::GenerationParams {
            max_tokens: self.max_tokens.value,
            temperature: self.temperature.value,
            seed: self.seed.value,
            ..scar_answer::GenerationParams::default()
        }
    }

    /// `(name, value, source)` for every setting, for `scar config`.
    pub fn rows(&self) -> Vec<(&'static str, String, Source)> {
        fn row<T: fmt::Display>(
            name: &'static str,
            s: &Setting<T>,
        ) -> (&'static str, String, Source) {
            (name, s.value.to_string(), s.source)
        }
        let path = |name, s: &Setting<PathBuf>| (name, s.value.display().to_string(), s.source);
        vec![
            path("index", &self.index),
            (
                "store",
                self.store
                    .value
                    .as_deref()
                    .map_or_else(|| "none".to_owned(), scar_postgres::redacted),
                self.store.source,
            ),
            row("model", &self.model),
            path("models_dir", &self.models_dir),
            row("device", &self.device),
            row("precision", &self.precision),
            row("k", &self.k),
            row("policy", &self.policy),
            (
                "window",
                self.window.value.map_or_else(
                    || format!("default ({})", self.policy.value.default_window()),
                    |w| w.to_string(),
                ),
                self.window.source,
            ),
            row("depth", &self.depth),
            row("lambda", &self.lambda),
            row("gamma", &self.gamma),
            row("parent_block", &self.parent_block),
            row("first_stage", &self.first_stage),
            row("rerank", &self.rerank),
            row("reranker", &self.reranker),
            (
                "budget_tokens",
                self.budget_tokens
                    .value
                    .map_or_else(|| "none".to_owned(), |b| b.to_string()),
                self.budget_tokens.source,
            ),
            row("llm", &self.llm),
            (
                "llm_url",
                self.llm_url
                    .value
                    .clone()
                    .unwrap_or_else(|| "none".to_owned()),
                self.llm_url.source,
            ),
            row("llm_model", &self.llm_model),
            row("allow_remote_host", &self.allow_remote_host),
            row("max_tokens", &self.max_tokens),
            row("temperature", &self.temperature),
            row("seed", &self.seed),
        ]
    }
}
