use std::path::{Path, PathBuf};
use std::process::Command;
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

/// Runs a llama-cpp-python snippet with the GGUF file at `path` loaded as `model` and the text
/// as `text`; what it prints, or None when llama-cpp-python is not installed.
pub fn llama_cpp(path: &Path, snippet: &str, text: &str) -> Option<String> {
    let Some(python) = std::env::var_os("SCAR_LLAMA_SERVER_PYTHON") else {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but SCAR_LLAMA_SERVER_PYTHON is not: run scripts/fetch-llama-server"
        );
        eprintln!("SCAR_LLAMA_SERVER_PYTHON is not set: skipped (scripts/test sets it)");
        return None;
    };
    let script = format!(
        "import sys, llama_cpp\n\
         model = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=1024, n_threads=2, verbose=False)\n\
         text = sys.argv[2]\n{snippet}"
    );
    let output = Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(path)
        .arg(text)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Some(String::from_utf8(output.stdout).unwrap().trim().to_owned())
}

/// A llama-cpp-python snippet printing the first `tokens` tokens of its greedy continuation of
/// `text` (fewer when the model ends its turn), tokenized with the special tokens read as such and the file's own choice of a
/// leading BOS.
pub fn greedy_snippet(tokens: usize) -> String {
    format!(
        "ids = model.tokenize(text.encode(), add_bos=True, special=True)\n\
         out = []\n\
         for token in model.generate(ids, temp=0.0, top_k=1, repeat_penalty=1.0):\n    \
             if token == model.token_eos(): break\n    \
             out.append(token)\n    \
             if len(out) == {tokens}: break\n\
         print(model.detokenize(out).decode())"
    )
}
