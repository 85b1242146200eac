//! Where a model's files are: the search that embedding and chat models share.
//!
//! A model is looked for in the project's models folder, then in the Hugging Face cache, then
//! downloaded into that cache at a pinned revision, unless downloads are forbidden. Each kind of
//! model names its folder and files and checks what it finds: [`crate::ModelLocator`] wants a
//! folder of BERT files, `scar-answer`'s chat locator a single GGUF file.

use std::path::{Path, PathBuf};

use hf_hub::api::sync::{ApiBuilder, ApiError};
use hf_hub::{Repo, RepoType};

/// True when `HF_HUB_OFFLINE` is set to anything but `0` or empty: downloads are forbidden.
fn hub_offline() -> bool {
    std::env::var("HF_HUB_OFFLINE").is_ok_and(|v| !v.is_empty() && v != "0")
}

/// A model's files in a Hugging Face repository.
#[derive(Debug, Clone, Copy)]
pub struct HubFiles<'a> {
    /// Repository id, `org/name`.
    pub repo: &'a str,
    /// The commit pinned for downloads, or a branch such as `main`.
    pub revision: &'a str,
    /// The file whose path a search returns.
    pub file: &'a str,
    /// Other files the model cannot do without.
    pub also_required: &'a [&'a str],
    /// Files fetched along when the repository has them (metadata some models lack).
    pub optional: &'a [&'a str],
}

impl HubFiles<'_> {
    fn required(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.file).chain(self.also_required.iter().copied())
    }

    fn repo(&self) -> Repo {
        Repo::with_revision(
            self.repo.to_owned(),
            RepoType::Model,
            self.revision.to_owned(),
        )
    }
}

/// Where a search found a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// `models_dir/<folder>`; what it holds is for the caller to check.
    Installed(PathBuf),
    /// [`HubFiles::file`] in the Hugging Face cache, found there or just downloaded, with the
    /// other required files beside it.
    Hub(PathBuf),
}

/// Why a search found nothing.
#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    /// The model is not on disk, and downloads are forbidden.
    #[error("the model is not on disk, and downloads are off (HF_HUB_OFFLINE)")]
    Offline,
    /// The download failed.
    #[error("downloading from the Hugging Face hub failed")]
    Download(#[source] ApiError),
}

/// The places a model is looked for: the project's models folder, the Hugging Face cache, and
/// (unless offline) the hub.
#[derive(Debug, Clone)]
pub struct ModelSearch {
    models_dir: PathBuf,
    hub_cache: hf_hub::Cache,
    offline: bool,
}

impl ModelSearch {
    /// A search over `models_dir` and the cache `HF_HOME` names; offline when `HF_HUB_OFFLINE`
    /// is set to anything but `0`/empty. hf-hub itself ignores that variable, so the rule is
    /// kept here.
    #[must_use]
    pub fn from_env(models_dir: impl Into<PathBuf>) -> Self {
        Self {
            models_dir: models_dir.into(),
            hub_cache: hf_hub::Cache::from_env(),
            offline: hub_offline(),
        }
    }

    /// Replaces the Hugging Face cache folder (the one that holds `models--org--name`).
    #[must_use]
    pub fn with_hub_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.hub_cache = hf_hub::Cache::new(dir.into());
        self
    }

    /// Forbids (or allows) downloads.
    #[must_use]
    pub fn offline(mut self, offline: bool) -> Self {
        self.offline = offline;
        self
    }

    /// The project's model folder.
    #[must_use]
    pub fn models_dir(&self) -> &Path {
        &self.models_dir
    }

    /// `models_dir/<folder>` when it exists, else the files in the Hugging Face cache; never
    /// the network.
    #[must_use]
    pub fn find_local(&self, folder: &str, hub: &HubFiles<'_>) -> Option<Found> {
        let installed = self.models_dir.join(folder);
        if installed.is_dir() {
            return Some(Found::Installed(installed));
        }
        self.find_in_hub_cache(hub).map(Found::Hub)
    }

    /// What [`ModelSearch::find_local`] finds, else a download.
    pub fn find(&self, folder: &str, hub: &HubFiles<'_>) -> Result<Found, LocateError> {
        match self.find_local(folder, hub) {
            Some(found) => Ok(found),
            None => self.download(hub).map(Found::Hub),
        }
    }

    /// Downloads the files into the Hugging Face cache and returns the path of
    /// [`HubFiles::file`]; an error when offline.
    pub fn download(&self, hub: &HubFiles<'_>) -> Result<PathBuf, LocateError> {
        if self.offline {
            return Err(LocateError::Offline);
        }
        let api = ApiBuilder::from_cache(self.hub_cache.clone())
            .with_progress(true)
            .build()
            .map_err(LocateError::Download)?;
        let repo = api.repo(hub.repo());
        let path = repo.get(hub.file).map_err(LocateError::Download)?;
        for file in hub.also_required {
            repo.get(file).map_err(LocateError::Download)?;
        }
        for file in hub.optional {
            // A model without its optional files is still usable.
            let _ = repo.get(file);
        }
        Ok(path)
    }

    /// Where a model would be, for a message saying it is not there.
    #[must_use]
    pub fn searched(&self, folder: &str) -> String {
        format!(
            "{}, the Hugging Face cache {}{}",
            self.models_dir.join(folder).display(),
            self.hub_cache.path().display(),
            if self.offline { " (offline)" } else { "" }
        )
    }

    /// The path of `hub.file` in a cached snapshot that holds every required file.
    fn find_in_hub_cache(&self, hub: &HubFiles<'_>) -> Option<PathBuf> {
        let holds_all = |snapshot: &Path| hub.required().all(|f| snapshot.join(f).is_file());
        // A snapshot named by the commit itself (what other clients leave) or by a ref.
        let by_commit = self
            .hub_cache
            .path()
            .join(hub.repo().folder_name())
            .join("snapshots")
            .join(hub.revision);
        if holds_all(&by_commit) {
            return Some(by_commit.join(hub.file));
        }
        let file = self.hub_cache.repo(hub.repo()).get(hub.file)?;
        let snapshot = file
            .ancestors()
            .nth(Path::new(hub.file).components().count())?;
        holds_all(snapshot).then_some(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB: HubFiles<'static> = HubFiles {
        repo: "org/model",
        revision: "0123456789abcdef0123456789abcdef01234567",
        file: "weights.bin",
        also_required: &["vocab.json"],
        optional: &[],
    };

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn an_installed_folder_comes_before_the_cache() {
        let models = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let search = ModelSearch::from_env(models.path())
            .with_hub_cache(cache.path())
            .offline(true);
        let snapshot = cache
            .path()
            .join("models--org--model/snapshots")
            .join(HUB.revision);
        write(&snapshot.join("weights.bin"), "{}");
        // Without every required file, a snapshot does not count.
        assert_eq!(search.find_local("model", &HUB), None);
        write(&snapshot.join("vocab.json"), "{}");
        assert_eq!(
            search.find_local("model", &HUB),
            Some(Found::Hub(snapshot.join("weights.bin")))
        );
        std::fs::create_dir(models.path().join("model")).unwrap();
        assert_eq!(
            search.find("model", &HUB).unwrap(),
            Found::Installed(models.path().join("model"))
        );
    }

    #[test]
    fn a_ref_names_the_snapshot_of_a_branch() {
        let cache = tempfile::tempdir().unwrap();
        let search = ModelSearch::from_env("models")
            .with_hub_cache(cache.path())
            .offline(true);
        let repo = cache.path().join("models--org--model");
        write(&repo.join("refs/main"), "feedface");
        let snapshot = repo.join("snapshots/feedface");
        write(&snapshot.join("nested/weights.bin"), "{}");
        write(&snapshot.join("vocab.json"), "{}");
        let hub = HubFiles {
            revision: "main",
            file: "nested/weights.bin",
            ..HUB
        };
        assert_eq!(
            search.find_local("model", &hub),
            Some(Found::Hub(snapshot.join("nested/weights.bin")))
        );
    }

    #[test]
    fn offline_there_is_no_download() {
        let models = tempfile::tempdir().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let search = ModelSearch::from_env(models.path())
            .with_hub_cache(cache.path())
            .offline(true);
        assert!(matches!(
            search.find("model", &HUB),
            Err(LocateError::Offline)
        ));
        let searched = search.searched("model");
        assert!(
            searched.starts_with(&models.path().join("model").display().to_string()),
            "{searched}"
        );
        assert!(searched.ends_with(" (offline)"), "{searched}");
    }
}
