use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};

use scar_answer::{LlmLocator, LoadOptions, LocalModel, Prompt};
use scar_embed::DeviceChoice;

/// The test model, installed by `scripts/fetch-test-models`.
pub fn model_path() -> PathBuf {
    LlmLocator::from_env(scar_test_support::models_dir())
        .offline(true)
        .locate(scar_answer::DEFAULT_LLM)
        .unwrap()
}

/// One loaded model shared by the tests (loading and converting takes a second or two).
pub fn model() -> MutexGuard<'static, LocalModel> {
    static MODEL: OnceLock<Mutex<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let options = LoadOptions {
                device: DeviceChoice::Cpu,
                requantize: true,
            };
            Mutex::new(LocalModel::load(&model_path(), &options).unwrap())
        })
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn prompt(user: &str) -> Prompt {
    Prompt {
        system: "You are a concise assistant.".to_owned(),
        user: user.to_owned(),
        sources: Vec::new(),
    }
}
