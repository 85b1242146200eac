//! `scar models list|fetch`.

use std::process::ExitCode;

use anyhow::Result;
use scar_core::ErrorChain;
use scar_embed::{KNOWN_MODELS, ModelLocator};

use crate::settings::Settings;

#[derive(Debug, clap::Subcommand)]
pub enum ModelsAction {
    /// List the models the tool knows and whether each is installed
    List,
    /// Download a model through the Hugging Face hub at its pinned revision
    Fetch {
        /// Hub id or short name [default: the `model` setting]
        name: Option<String>,
    },
}

pub fn run(settings: &Settings, action: &ModelsAction) -> Result<ExitCode> {
    let locator = ModelLocator::from_env(&settings.models_dir.value);
    match action {
        ModelsAction::List => {
            for model in KNOWN_MODELS {
                let place = match locator.find_local(model.id) {
                    Some(Ok(files)) => format!("installed at {}", files.dir.display()),
                    Some(Err(error)) => format!("broken: {}", ErrorChain(&error)),
                    None => "not installed".to_owned(),
                };
                let default = if model.id == scar_embed::DEFAULT_MODEL {
                    " (default)"
                } else {
                    ""
                };
                outln!(
                    "{}{default}\n    revision {}\n    {place}",
                    model.id,
                    model.revision
                );
            }
        }
        ModelsAction::Fetch { name } => {
            let name = name.as_deref().unwrap_or(&settings.model.value);
            let files = match locator.find_local(name) {
                Some(found) => found?,
                None => locator.download(name)?,
            };
            outln!("{} is at {}", files.model_id(), files.dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
