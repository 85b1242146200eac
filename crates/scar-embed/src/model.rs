//! Where a model's files are, and what the model is (pooling, query prefix, length limit).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::locate::{Found, HubFiles, LocateError, ModelSearch};
use crate::{EmbedError, Result};

/// The model used when none is named.
pub const DEFAULT_MODEL: &str = "BAAI/bge-large-en-v1.5";

/// BGE's English v1.5 instruction for queries; passages get none.
const BGE_QUERY_PREFIX: &str = "Represent this sentence for searching relevant passages: ";

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// The first (`[CLS]`) token's vector, as BGE is trained.
    Cls,
    /// The mean over real (unpadded) tokens, as sentence-transformers models declare.
    Mean,
}

/// A model the tool knows by name: where to download it and how to use it.
#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// Hugging Face repository id.
    pub id: &'static str,
    /// Commit pinned for downloads, so every user gets the same weights.
    pub revision: &'static str,
    /// Prefix added to queries.
    pub query_prefix: &'static str,
    /// Prefix added to passages (e5's `passage: `); empty for most models.
    pub passage_prefix: &'static str,
}

/// Models with a pinned revision and their query and passage instructions.
pub const KNOWN_MODELS: &[KnownModel] = &[
    KnownModel {
        id: "BAAI/bge-large-en-v1.5",
        revision: "d4aa6901d3a41ba39fb536a557fa166f842b0e09",
        query_prefix: BGE_QUERY_PREFIX,
        passage_prefix: "",
    },
    KnownModel {
        id: "BAAI/bge-base-en-v1.5",
        revision: "a5beb1e3e68b9ab74eb54cfd186867f64f240e1a",
        query_prefix: BGE_QUERY_PREFIX,
        passage_prefix: "",
    },
    KnownModel {
        id: "BAAI/bge-small-en-v1.5",
        revision: "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
        query_prefix: BGE_QUERY_PREFIX,
        passage_prefix: "",
    },
    KnownModel {
        id: "sentence-transformers/all-MiniLM-L6-v2",
        revision: "1110a243fdf4706b3f48f1d95db1a4f5529b4d41",
        query_prefix: "",
        passage_prefix: "",
    },
    // Multilingual (about a hundred languages, XLM-RoBERTa's vocabulary). e5-small is BERT's
    // encoder, the others XLM-RoBERTa's; e5 is trained with both prefixes.
    KnownModel {
        id: "intfloat/multilingual-e5-small",
        revision: "614241f622f53c4eeff9890bdc4f31cfecc418b3",
        query_prefix: "query: ",
        passage_prefix: "passage: ",
    },
    KnownModel {
        id: "intfloat/multilingual-e5-base",
        revision: "d13f1b27baf31030b7fd040960d60d909913633f",
        query_prefix: "query: ",
        passage_prefix: "passage: ",
    },
    KnownModel {
        id: "intfloat/multilingual-e5-large",
        revision: "3d7cfbdacd47fdda877c5cd8a79fbcc4f2a574f3",
        query_prefix: "query: ",
        passage_prefix: "passage: ",
    },
    // bge-m3's dense head: CLS pooling, no instruction.
    KnownModel {
        id: "BAAI/bge-m3",
        revision: "5617a9f61b028005a4858fdac845db406aefb181",
        query_prefix: "",
        passage_prefix: "",
    },
    KnownModel {
        id: "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
        revision: "e8f8c211226b894fcb81acc59f3b34ba3efd5f42",
        query_prefix: "",
        passage_prefix: "",
    },
];

/// Looks a model up by its full id or by its short name (`all-MiniLM-L6-v2`).
#[must_use]
pub fn known_model(name: &str) -> Option<&'static KnownModel> {
    KNOWN_MODELS
        .iter()
        .find(|m| m.id.eq_ignore_ascii_case(name) || short_name(m.id).eq_ignore_ascii_case(name))
}

fn short_name(id: &str) -> &str {
    id.rsplit('/').next().unwrap_or(id)
}

/// Files every model folder must hold; the first names the folder in the hub cache.
const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// sentence-transformers files that, when present, say how to pool, where to truncate and
/// what to put before a query.
const OPTIONAL_FILES: [&str; 4] = [
    "modules.json",
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "config_sentence_transformers.json",
];

/// A model folder on disk, with the name it was asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFiles {
    /// The name the model was asked for (a hub id, a short name or a folder).
    pub name: String,
    /// The folder holding `config.json`, `tokenizer.json` and `model.safetensors`.
    pub dir: PathBuf,
}

impl ModelFiles {
    /// Checks that `dir` holds the files a BERT embedding model needs.
    pub fn from_dir(name: impl Into<String>, dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        for file in REQUIRED_FILES {
            if !dir.join(file).is_file() {
                return Err(EmbedError::MissingFile { dir, file });
            }
        }
        Ok(Self {
            name: name.into(),
            dir,
        })
    }

    /// The stable id recorded in indexes: the hub id for known models, else the name as given.
    #[must_use]
    pub fn model_id(&self) -> String {
        known_model(&self.name).map_or_else(|| self.name.clone(), |m| m.id.to_owned())
    }
}

/// Finds embedding models locally and, when allowed, downloads them through hf-hub.
///
/// Order: an explicit folder; `models_dir/<short name>/`; the Hugging Face cache (`HF_HOME`);
/// a download at the pinned revision (never when offline). All but the first are
/// [`ModelSearch`]'s, shared with the chat models.
#[derive(Debug, Clone)]
pub struct ModelLocator {
    search: ModelSearch,
}

impl ModelLocator {
    /// A locator over `models_dir` and the cache `HF_HOME` names; offline when
    /// `HF_HUB_OFFLINE` is set to anything but `0`/empty (hf-hub itself ignores that variable).
    #[must_use]
    pub fn from_env(models_dir: impl Into<PathBuf>) -> Self {
        Self {
            search: ModelSearch::from_env(models_dir),
        }
    }

    /// Replaces the Hugging Face cache folder (the one that holds `models--org--name`).
    #[must_use]
    pub fn with_hub_cache(self, dir: impl Into<PathBuf>) -> Self {
        Self {
            search: self.search.with_hub_cache(dir),
        }
    }

    /// Forbids (or allows) downloads.
    #[must_use]
    pub fn offline(self, offline: bool) -> Self {
        Self {
            search: self.search.offline(offline),
        }
    }

    /// The project's model folder.
    #[must_use]
    pub fn models_dir(&self) -> &Path {
        self.search.models_dir()
    }

    /// Finds the model on disk without touching the network.
    #[must_use]
    pub fn find_local(&self, name: &str) -> Option<Result<ModelFiles>> {
        let explicit = Path::new(name);
        if explicit.is_dir() {
            return Some(ModelFiles::from_dir(name, explicit));
        }
        let found = self
            .search
            .find_local(installed_folder(name), &hub_files(name))?;
        Some(self.model_files(name, found))
    }

    /// Finds the model locally, downloading it when it is missing and downloads are allowed.
    pub fn locate(&self, name: &str) -> Result<ModelFiles> {
        self.find_local(name).unwrap_or_else(|| self.download(name))
    }

    /// Downloads the model's files into the Hugging Face cache at the pinned revision
    /// (`main` for models the tool does not know).
    pub fn download(&self, name: &str) -> Result<ModelFiles> {
        match self.search.download(&hub_files(name)) {
            Ok(config) => self.model_files(name, Found::Hub(config)),
            Err(LocateError::Offline) => Err(self.not_found(name)),
            Err(LocateError::Download(source)) => Err(EmbedError::Download {
                model: hub_files(name).repo.to_owned(),
                source,
            }),
        }
    }

    /// The model folder where the search found it: named as asked when installed, by its hub id
    /// when in the cache.
    fn model_files(&self, name: &str, found: Found) -> Result<ModelFiles> {
        match found {
            Found::Installed(dir) => ModelFiles::from_dir(name, dir),
            Found::Hub(config) => {
                let dir = config.parent().ok_or_else(|| self.not_found(name))?;
                ModelFiles::from_dir(hub_files(name).repo, dir)
            }
        }
    }

    fn not_found(&self, name: &str) -> EmbedError {
        EmbedError::ModelNotFound {
            model: name.to_owned(),
            searched: self.search.searched(installed_folder(name)),
        }
    }
}

/// The folder under `models/` for a name: the known model's own spelling, else the last segment.
fn installed_folder(name: &str) -> &str {
    short_name(known_model(name).map_or(name, |m| m.id))
}

/// The model's files on the hub: pinned for known models, `main` otherwise.
fn hub_files(name: &str) -> HubFiles<'_> {
    let (repo, revision) = known_model(name).map_or((name, "main"), |m| (m.id, m.revision));
    let [file, also_required @ ..] = &REQUIRED_FILES;
    HubFiles {
        repo,
        revision,
        file,
        also_required,
        optional: &OPTIONAL_FILES,
    }
}

/// What the model folder says about using the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelTraits {
    pub pooling: Pooling,
    pub max_tokens: usize,
    pub query_prefix: String,
    pub passage_prefix: String,
}

#[derive(Deserialize)]
struct ModuleEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

#[derive(Deserialize)]
struct SentenceBertConfig {
    max_seq_length: usize,
}

/// `config_sentence_transformers.json`: only its named prompts matter here.
#[derive(Deserialize)]
struct SentenceTransformersConfig {
    #[serde(default)]
    prompts: std::collections::HashMap<String, String>,
}

pub(crate) fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let unreadable = |source: Box<dyn std::error::Error + Send + Sync>| EmbedError::Unreadable {
        path: path.to_owned(),
        source,
    };
    let text = fs_err::read_to_string(path).map_err(|e| unreadable(e.into()))?;
    serde_json::from_str(&text).map_err(|e| unreadable(e.into()))
}

impl ModelTraits {
    /// Reads pooling and length from sentence-transformers metadata when present.
    /// Without it, BERT's own convention applies: the CLS token, and the position limit.
    pub(crate) fn read(files: &ModelFiles, max_positions: usize) -> Result<Self> {
        let modules_path = files.dir.join("modules.json");
        let pooling = if modules_path.is_file() {
            let modules: Vec<ModuleEntry> = read_json(&modules_path)?;
            match modules.iter().find(|m| m.kind.ends_with("models.Pooling")) {
                Some(module) => {
                    let path = files.dir.join(&module.path).join("config.json");
                    let config: PoolingConfig = read_json(&path)?;
                    match (
                        config.pooling_mode_cls_token,
                        config.pooling_mode_mean_tokens,
                    ) {
                        (true, _) => Pooling::Cls,
                        (false, true) => Pooling::Mean,
                        (false, false) => {
                            return Err(EmbedError::BadFile {
                                path,
                                reason: "only CLS and mean pooling are supported".into(),
                            });
                        }
                    }
                }
                None => Pooling::Cls,
            }
        } else {
            Pooling::Cls
        };
        let sbert_path = files.dir.join("sentence_bert_config.json");
        let max_tokens = if sbert_path.is_file() {
            read_json::<SentenceBertConfig>(&sbert_path)?
                .max_seq_length
                .min(max_positions)
        } else {
            max_positions.min(512)
        };
        // The model's own prompts win; known models that predate prompts (BGE v1.5, e5) carry
        // theirs in KNOWN_MODELS.
        let st_config_path = files.dir.join("config_sentence_transformers.json");
        let mut prompts = if st_config_path.is_file() {
            read_json::<SentenceTransformersConfig>(&st_config_path)?.prompts
        } else {
            std::collections::HashMap::new()
        };
        let known = known_model(&files.name);
        let query_prefix = prompts
            .remove("query")
            .unwrap_or_else(|| known.map_or("", |m| m.query_prefix).to_owned());
        let passage_prefix = prompts
            .remove("passage")
            .or_else(|| prompts.remove("document"))
            .unwrap_or_else(|| known.map_or("", |m| m.passage_prefix).to_owned());
        Ok(Self {
            pooling,
            max_tokens,
            query_prefix,
            passage_prefix,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_model_dir(extra: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for file in REQUIRED_FILES {
            std::fs::write(dir.path().join(file), "{}").unwrap();
        }
        for (file, text) in extra {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn known_models_resolve_by_short_name() {
        assert_eq!(known_model("bge-large-en-v1.5").unwrap().id, DEFAULT_MODEL);
        assert_eq!(known_model("ALL-MINILM-L6-V2").unwrap().query_prefix, "");
        assert!(known_model("nonexistent").is_none());
        for e5 in [
            "multilingual-e5-small",
            "multilingual-e5-base",
            "multilingual-e5-large",
        ] {
            let model = known_model(e5).unwrap();
            assert_eq!(
                (model.query_prefix, model.passage_prefix),
                ("query: ", "passage: ")
            );
        }
        assert_eq!(known_model("bge-m3").unwrap().passage_prefix, "");
    }

    #[test]
    fn pooling_follows_sentence_transformers_metadata() {
        let dir = fake_model_dir(&[
            (
                "modules.json",
                r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
                    {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"}]"#,
            ),
            (
                "1_Pooling/config.json",
                r#"{"pooling_mode_mean_tokens": true}"#,
            ),
            ("sentence_bert_config.json", r#"{"max_seq_length": 256}"#),
        ]);
        let files = ModelFiles::from_dir("all-MiniLM-L6-v2", dir.path()).unwrap();
        let traits = ModelTraits::read(&files, 512).unwrap();
        assert_eq!(traits.pooling, Pooling::Mean);
        assert_eq!(traits.max_tokens, 256);
        assert_eq!(traits.query_prefix, "");
    }

    #[test]
    fn bert_without_metadata_uses_cls_and_position_limit() {
        let dir = fake_model_dir(&[]);
        let files = ModelFiles::from_dir("BAAI/bge-small-en-v1.5", dir.path()).unwrap();
        let traits = ModelTraits::read(&files, 512).unwrap();
        assert_eq!(traits.pooling, Pooling::Cls);
        assert_eq!(traits.max_tokens, 512);
        assert_eq!(traits.query_prefix, BGE_QUERY_PREFIX);
    }

    #[test]
    fn a_declared_query_prompt_wins_over_the_known_one() {
        let dir = fake_model_dir(&[(
            "config_sentence_transformers.json",
            r#"{"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": null}"#,
        )]);
        let files = ModelFiles::from_dir("BAAI/bge-small-en-v1.5", dir.path()).unwrap();
        assert_eq!(
            ModelTraits::read(&files, 512).unwrap().query_prefix,
            "query: "
        );
        let without_prompts = fake_model_dir(&[(
            "config_sentence_transformers.json",
            r#"{"__version__": {"sentence_transformers": "2.2.2"}}"#,
        )]);
        let files = ModelFiles::from_dir("BAAI/bge-small-en-v1.5", without_prompts.path()).unwrap();
        assert_eq!(
            ModelTraits::read(&files, 512).unwrap().query_prefix,
            BGE_QUERY_PREFIX
        );
    }

    #[test]
    fn missing_file_names_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let error = ModelFiles::from_dir("x", dir.path()).unwrap_err();
        assert!(error.to_string().contains("config.json"), "{error}");
        assert!(
            error
                .to_string()
                .contains(&dir.path().display().to_string())
        );
    }

    #[test]
    fn offline_with_nothing_installed_says_what_to_run() {
        let models = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let locator = ModelLocator::from_env(models.path())
            .with_hub_cache(cache.path())
            .offline(true);
        let error = locator.locate("BAAI/bge-large-en-v1.5").unwrap_err();
        assert!(error.to_string().contains("scar models fetch"), "{error}");
    }

    #[test]
    fn finds_installed_model_by_short_name_and_hub_snapshot() {
        let models = tempfile::tempdir().unwrap();
        let installed = fake_model_dir(&[]);
        std::fs::rename(installed.path(), models.path().join("all-MiniLM-L6-v2")).unwrap();
        let cache = tempfile::tempdir().unwrap();
        let locator = ModelLocator::from_env(models.path())
            .with_hub_cache(cache.path())
            .offline(true);
        let found = locator
            .locate("sentence-transformers/all-MiniLM-L6-v2")
            .unwrap();
        assert_eq!(found.dir, models.path().join("all-MiniLM-L6-v2"));
        assert_eq!(found.model_id(), "sentence-transformers/all-MiniLM-L6-v2");

        let snapshot = cache.path().join(
            "models--BAAI--bge-small-en-v1.5/snapshots/5c38ec7c405ec4b44b94cc5a9bb96e735b38267a",
        );
        std::fs::create_dir_all(&snapshot).unwrap();
        for file in REQUIRED_FILES {
            std::fs::write(snapshot.join(file), "{}").unwrap();
        }
        assert_eq!(locator.locate("bge-small-en-v1.5").unwrap().dir, snapshot);
    }
}
