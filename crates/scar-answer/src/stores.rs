//! Chat models other tools already downloaded, used in place: Ollama's store (manifests naming
//! GGUF blobs) and LM Studio's models folder (GGUF files by publisher and repository).

use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::Content;
use serde::Serialize;

use crate::{AnswerError, Result};

/// The media type of the layer that holds an Ollama model's weights.
const OLLAMA_MODEL_LAYER: &str = "application/vnd.ollama.image.model";
/// The registry Ollama's short names (`qwen2.5:7b`) live in.
const OLLAMA_REGISTRY: &str = "registry.ollama.ai";

/// The tool that downloaded a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Store {
    /// Ollama (`~/.ollama/models`, or `OLLAMA_MODELS`).
    Ollama,
    /// LM Studio (`~/.lmstudio/models`, or the older `~/.cache/lm-studio/models`).
    LmStudio,
}

/// A chat model found in another tool's store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredLlm {
    /// The name `--llm` takes: `ollama:qwen2.5:7b`, `lmstudio:publisher/repo/file.gguf`.
    pub name: String,
    /// Which tool's store holds it.
    pub store: Store,
    /// The GGUF file, used where it is.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// `general.architecture` from its header, when it could be read.
    pub architecture: Option<String>,
}

impl StoredLlm {
    /// True when this build can run the model's architecture.
    #[must_use]
    pub fn is_supported(&self) -> bool {
        self.architecture
            .as_deref()
            .is_some_and(|a| crate::local::Architecture::from_name(a).is_some())
    }
}

/// Where other tools keep their models.
#[derive(Debug, Clone, Default)]
pub struct ModelStores {
    ollama: Option<PathBuf>,
    lm_studio: Vec<PathBuf>,
}

impl ModelStores {
    /// The stores of this user: `OLLAMA_MODELS` or `~/.ollama/models`, and LM Studio's folders.
    #[must_use]
    pub fn from_env() -> Self {
        let home = dirs::home_dir();
        let ollama = std::env::var_os("OLLAMA_MODELS")
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|home| home.join(".ollama/models")));
        let lm_studio = home
            .iter()
            .flat_map(|home| {
                [
                    home.join(".lmstudio/models"),
                    home.join(".cache/lm-studio/models"),
                ]
            })
            .collect();
        Self { ollama, lm_studio }
    }

    /// Stores at these folders (for tests, and for stores kept elsewhere).
    #[must_use]
    pub fn at(ollama: Option<PathBuf>, lm_studio: Vec<PathBuf>) -> Self {
        Self { ollama, lm_studio }
    }

    /// Every chat model found, Ollama's first, each store's in name order. Stores that do not
    /// exist list nothing; a manifest that cannot be read is left out.
    #[must_use]
    pub fn list(&self) -> Vec<StoredLlm> {
        let mut found = self
            .ollama
            .as_deref()
            .map(ollama_models)
            .unwrap_or_default();
        for folder in &self.lm_studio {
            found.extend(lm_studio_models(folder));
        }
        found
    }

    /// The file of a stored model named as [`StoredLlm::name`] gives it, or as Ollama names it
    /// (`qwen2.5:7b`, `qwen2.5` for its `latest` tag); `None` when `name` names none.
    #[must_use]
    pub fn find(&self, name: &str) -> Option<StoredLlm> {
        let ollama_name = name.strip_prefix("ollama:").unwrap_or(name);
        let ollama_name = if ollama_name.contains(':') {
            ollama_name.to_owned()
        } else {
            format!("{ollama_name}:latest")
        };
        self.list().into_iter().find(|model| {
            model.name == name
                || (model.store == Store::Ollama && model.name == format!("ollama:{ollama_name}"))
        })
    }

    /// The file of the stored model `name`, or why there is none, naming the stores searched.
    pub fn locate(&self, name: &str) -> Result<PathBuf> {
        self.find(name)
            .map(|model| model.path)
            .ok_or_else(|| AnswerError::ModelNotFound {
                model: name.to_owned(),
                searched: format!("{}; `scar models` lists the models found", self.describe()),
            })
    }

    /// The folders searched, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        let folders: Vec<String> = self
            .ollama
            .iter()
            .map(|dir| format!("Ollama's store {}", dir.display()))
            .chain(
                self.lm_studio
                    .iter()
                    .map(|dir| format!("LM Studio's folder {}", dir.display())),
            )
            .collect();
        folders.join(", ")
    }
}

/// True for a name that can only mean a stored model.
pub(crate) fn is_store_name(name: &str) -> bool {
    name.starts_with("ollama:") || name.starts_with("lmstudio:")
}

/// Ollama's models: each manifest under `manifests/<registry>/<namespace>/<model>/<tag>` names
/// its weights' blob by digest, kept as `blobs/sha256-<hex>`.
fn ollama_models(store: &Path) -> Vec<StoredLlm> {
    let manifests = store.join("manifests");
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(&manifests)
        .min_depth(4)
        .max_depth(4)
        .sort_by_file_name()
        .into_iter()
        .filter_map(std::result::Result::ok)
        .filter(|entry| entry.file_type().is_file())
    {
        let Ok(relative) = entry.path().strip_prefix(&manifests) else {
            continue;
        };
        let parts: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        let [registry, namespace, model, tag] = parts.as_slice() else {
            continue;
        };
        let Some(blob) = ollama_blob(store, entry.path()) else {
            continue;
        };
        let short = match (registry.as_str(), namespace.as_str()) {
            (OLLAMA_REGISTRY, "library") => format!("{model}:{tag}"),
            (OLLAMA_REGISTRY, _) => format!("{namespace}/{model}:{tag}"),
            _ => format!("{registry}/{namespace}/{model}:{tag}"),
        };
        found.push(stored(format!("ollama:{short}"), Store::Ollama, blob));
    }
    found
}

/// The blob holding the weights a manifest names, if it is there.
fn ollama_blob(store: &Path, manifest: &Path) -> Option<PathBuf> {
    let text = fs_err::read_to_string(manifest).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    let digest = manifest["layers"]
        .as_array()?
        .iter()
        .find(|layer| layer["mediaType"] == OLLAMA_MODEL_LAYER)?["digest"]
        .as_str()?;
    // `sha256:<hex>` is stored as `sha256-<hex>` (older versions kept the colon).
    let blobs = store.join("blobs");
    [digest.replace(':', "-"), digest.to_owned()]
        .into_iter()
        .map(|name| blobs.join(name))
        .find(|path| path.is_file())
}

/// LM Studio's models: `.gguf` files under `<publisher>/<repository>/`, without the vision
/// projectors (`mmproj-…`) that sit beside some of them.
fn lm_studio_models(folder: &Path) -> Vec<StoredLlm> {
    walkdir::WalkDir::new(folder)
        .min_depth(3)
        .max_depth(3)
        .sort_by_file_name()
        .into_iter()
        .filter_map(std::result::Result::ok)
        .filter(|entry| entry.file_type().is_file())
        .filter(|entry| {
            let gguf = entry
                .path()
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"));
            let projector = entry
                .file_name()
                .to_string_lossy()
                .to_ascii_lowercase()
                .starts_with("mmproj");
            gguf && !projector
        })
        .filter_map(|entry| {
            let relative = entry.path().strip_prefix(folder).ok()?;
            let name = format!("lmstudio:{}", relative.to_string_lossy());
            Some(stored(name, Store::LmStudio, entry.path().to_owned()))
        })
        .collect()
}

fn stored(name: String, store: Store, path: PathBuf) -> StoredLlm {
    let bytes = fs_err::metadata(&path).map_or(0, |m| m.len());
    let architecture = architecture(&path);
    StoredLlm {
        name,
        store,
        path,
        bytes,
        architecture,
    }
}

/// `general.architecture` from a GGUF file's header (the tensors are not read).
fn architecture(path: &Path) -> Option<String> {
    let mut file = fs_err::File::open(path).ok()?;
    let content = Content::read(&mut file).ok()?;
    content
        .metadata
        .get("general.architecture")?
        .to_string()
        .ok()
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal GGUF header: version 3, no tensors, one string key.
    fn gguf(architecture: &str) -> Vec<u8> {
        let mut bytes = b"GGUF".to_vec();
        bytes.extend(3u32.to_le_bytes());
        bytes.extend(0u64.to_le_bytes());
        bytes.extend(1u64.to_le_bytes());
        let key = b"general.architecture";
        bytes.extend((key.len() as u64).to_le_bytes());
        bytes.extend(key);
        bytes.extend(8u32.to_le_bytes()); // a string
        bytes.extend((architecture.len() as u64).to_le_bytes());
        bytes.extend(architecture.as_bytes());
        bytes
    }

    /// An Ollama store holding `model:tag` in `namespace`, its weights a GGUF of `architecture`.
    fn ollama_model(store: &Path, namespace: &str, model: &str, tag: &str, architecture: &str) {
        let digest = format!("{:064x}", model.len() * 7 + tag.len());
        let blobs = store.join("blobs");
        fs_err::create_dir_all(&blobs).unwrap();
        fs_err::write(blobs.join(format!("sha256-{digest}")), gguf(architecture)).unwrap();
        let dir = store
            .join("manifests")
            .join(OLLAMA_REGISTRY)
            .join(namespace)
            .join(model);
        fs_err::create_dir_all(&dir).unwrap();
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "layers": [
                {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:00"},
                {"mediaType": OLLAMA_MODEL_LAYER, "digest": format!("sha256:{digest}")},
            ],
        });
        fs_err::write(dir.join(tag), manifest.to_string()).unwrap();
    }

    #[test]
    fn ollama_and_lm_studio_models_are_listed_and_found_by_name() {
        let root = tempfile::tempdir().unwrap();
        let ollama = root.path().join("ollama");
        ollama_model(&ollama, "library", "qwen2.5", "7b", "qwen2");
        ollama_model(&ollama, "library", "smollm2", "latest", "llama");
        ollama_model(&ollama, "someone", "tiny", "q4", "mamba");
        let lm_studio = root.path().join("lmstudio");
        let repo = lm_studio.join("lmstudio-community/gemma-3-GGUF");
        fs_err::create_dir_all(&repo).unwrap();
        fs_err::write(repo.join("gemma-3-Q4_K_M.gguf"), gguf("gemma3")).unwrap();
        fs_err::write(repo.join("mmproj-gemma-3.gguf"), gguf("clip")).unwrap();
        let stores = ModelStores::at(
            Some(ollama.clone()),
            vec![lm_studio, root.path().join("none")],
        );

        let listed: Vec<(String, bool)> = stores
            .list()
            .into_iter()
            .map(|model| (model.name.clone(), model.is_supported()))
            .collect();
        assert_eq!(
            listed,
            [
                ("ollama:qwen2.5:7b".to_owned(), true),
                ("ollama:smollm2:latest".to_owned(), true),
                ("ollama:someone/tiny:q4".to_owned(), false),
                (
                    "lmstudio:lmstudio-community/gemma-3-GGUF/gemma-3-Q4_K_M.gguf".to_owned(),
                    true
                ),
            ]
        );
        let smollm = stores.find("ollama:smollm2").unwrap();
        assert!(smollm.path.starts_with(ollama.join("blobs")));
        assert_eq!(stores.find("smollm2:latest").unwrap().path, smollm.path);
        assert_eq!(smollm.architecture.as_deref(), Some("llama"));
        assert!(stores.find("ollama:qwen2.5:0.5b").is_none());
        let error = stores.locate("ollama:mistral").unwrap_err().to_string();
        assert!(
            error.contains("Ollama's store") && error.contains("scar models"),
            "{error}"
        );
    }
}
