//! `scar models [list|fetch]`.

use std::process::ExitCode;

use anyhow::Result;
use scar_answer::{DEFAULT_LLM, KNOWN_LLMS, LlmLocator, ModelStores, StoredLlm};
use scar_core::ErrorChain;
use scar_embed::{KNOWN_MODELS, ModelLocator};
use serde::Serialize;

use crate::settings::Settings;

#[derive(Debug, Default, clap::Subcommand)]
pub enum ModelsAction {
    /// List the embedding and chat models the tool knows, whether each is installed, and the
    /// chat models Ollama and LM Studio downloaded (the default)
    #[default]
    List,
    /// Download an embedding model through the Hugging Face hub at its pinned revision
    Fetch {
        /// Hub id or short name [default: the `model` setting]
        name: Option<String>,
    },
}

/// One model as `scar models --json` lists it.
#[derive(Debug, Serialize)]
struct Listed {
    name: String,
    /// `embedding` or `chat`.
    kind: &'static str,
    default: bool,
    /// The file or folder it is at, when installed.
    path: Option<String>,
    /// `installed`, `not installed`, `broken: …`, or where a stored model came from.
    status: String,
    /// For a chat model: whether this build can run it.
    runs: Option<bool>,
    /// On the CPU: for an embedding model, the precision the `precision` setting gives here and
    /// the instructions it runs on (e.g. `int8 on AVX-512 VNNI`), or why it cannot run; for a
    /// chat model, which weight formats decode through our own products, on which instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    compute: Option<String>,
}

pub fn run(settings: &Settings, action: Option<&ModelsAction>, json: bool) -> Result<ExitCode> {
    match action.unwrap_or(&ModelsAction::List) {
        ModelsAction::List => {
            let listed = list(settings);
            if json {
                outln!("{}", serde_json::to_string_pretty(&listed)?);
            } else {
                print_list(&listed)?;
            }
        }
        ModelsAction::Fetch { name } => {
            let locator = ModelLocator::from_env(&settings.models_dir.value);
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

fn list(settings: &Settings) -> Vec<Listed> {
    let embedders = ModelLocator::from_env(&settings.models_dir.value);
    let compute = cpu_compute(settings);
    let mut listed: Vec<Listed> = KNOWN_MODELS
        .iter()
        .map(|model| {
            let (path, status) = match embedders.find_local(model.id) {
                Some(Ok(files)) => (
                    Some(files.dir.display().to_string()),
                    "installed".to_owned(),
                ),
                Some(Err(error)) => (None, format!("broken: {}", ErrorChain(&error))),
                None => (None, "not installed".to_owned()),
            };
            Listed {
                name: model.id.to_owned(),
                kind: "embedding",
                default: model.id == scar_embed::DEFAULT_MODEL,
                path,
                status,
                runs: None,
                compute: compute.clone(),
            }
        })
        .collect();
    let chats = LlmLocator::from_env(&settings.models_dir.value).offline(true);
    let decoding = settings
        .device
        .value
        .is_cpu()
        .then(scar_answer::cpu_decoding);
    listed.extend(KNOWN_LLMS.iter().map(|model| {
        let (path, status) = match chats.locate(model.name) {
            Ok(path) => (Some(path.display().to_string()), "installed".to_owned()),
            Err(_) => (None, "not installed".to_owned()),
        };
        Listed {
            name: model.name.to_owned(),
            kind: "chat",
            default: model.name == DEFAULT_LLM,
            path,
            status,
            runs: Some(true),
            compute: decoding.clone(),
        }
    }));
    listed.extend(
        ModelStores::from_env()
            .list()
            .into_iter()
            .map(|model| Listed {
                compute: decoding.clone(),
                ..stored(model)
            }),
    );
    listed
}

fn stored(model: StoredLlm) -> Listed {
    let from = match model.store {
        scar_answer::Store::Ollama => "Ollama",
        scar_answer::Store::LmStudio => "LM Studio",
    };
    let architecture = model.architecture.as_deref().unwrap_or("unreadable header");
    Listed {
        runs: Some(model.is_supported()),
        status: format!(
            "downloaded by {from}, {:.1} GB, architecture {architecture}",
            model.bytes as f64 / 1e9
        ),
        name: model.name,
        kind: "chat",
        default: false,
        path: Some(model.path.display().to_string()),
        compute: None,
    }
}

/// What embedding computes in on this CPU under the `precision` setting, where the `device`
/// setting leaves it on the CPU (a GPU's precision is known once it is opened).
fn cpu_compute(settings: &Settings) -> Option<String> {
    settings
        .device
        .value
        .is_cpu()
        .then(|| match settings.precision.value.on_this_cpu() {
            Ok(compute) => compute,
            Err(error) => format!("cannot run here: {}", ErrorChain(&error)),
        })
}

fn print_list(listed: &[Listed]) -> Result<()> {
    for (kind, title, compute_line) in [
        (
            "embedding",
            "Embedding models (--model)",
            "computed here in",
        ),
        ("chat", "Chat models (--llm)", "on this CPU:"),
    ] {
        outln!("{title}");
        if let Some(compute) = listed
            .iter()
            .find(|m| m.kind == kind)
            .and_then(|m| m.compute.as_ref())
        {
            outln!("  {compute_line} {compute}");
        }
        for model in listed.iter().filter(|m| m.kind == kind) {
            let default = if model.default { " (default)" } else { "" };
            let runs = if model.runs == Some(false) {
                "; not supported by this build yet"
            } else {
                ""
            };
            outln!("  {}{default}\n      {}{runs}", model.name, model.status);
            if let Some(path) = &model.path {
                outln!("      {path}");
            }
        }
    }
    Ok(())
}
