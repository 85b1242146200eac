//! What the app remembers between runs: the library, the last question and the live controls.

use std::path::PathBuf;

use scar_answer::DEFAULT_LLM;
use scar_policy::{Options, Policy, PolicyError};
use scar_retrieve::FirstStage;
use serde::{Deserialize, Serialize};

/// The app's persisted state. Unknown or missing fields fall back to their defaults, so
/// settings written by an older version still load.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The user's indexes, in the order they were added.
    pub library: Vec<LibraryEntry>,
    /// The index questions go to.
    pub current: Option<PathBuf>,
    /// The question box's text.
    pub question: String,
    /// Policy, first stage and their parameters.
    pub controls: Controls,
    /// The chat model that answers from the context, and how long it may talk.
    pub answer: AnswerSettings,
}

/// How answers are generated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnswerSettings {
    /// A GGUF chat model: a known name, a file or folder, or `org/repo:file.gguf`.
    pub model: String,
    /// Most tokens an answer may take.
    pub max_tokens: usize,
}

/// [`DEFAULT_LLM`] and 256 tokens, as `scar ask` defaults to.
impl Default for AnswerSettings {
    fn default() -> Self {
        Self {
            model: DEFAULT_LLM.to_owned(),
            max_tokens: scar_answer::GenerationParams::default().max_tokens,
        }
    }
}

/// One index in the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryEntry {
    /// The index folder.
    pub dir: PathBuf,
    /// The folders indexed into it by the app; empty for an index opened as it is.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
}

impl LibraryEntry {
    /// The name shown in the library: the indexed folder's, else the index folder's.
    #[must_use]
    pub fn name(&self) -> String {
        crate::file_name(self.sources.first().unwrap_or(&self.dir))
    }
}

/// Which expansion rule the controls describe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// SCAR: λ, γ and the window.
    #[default]
    Scar,
    /// Every neighbour within the window.
    StaticWindow,
    /// The seeds alone.
    TopK,
    /// The seed's heading section, or its block of chunks.
    Parent,
}

impl PolicyKind {
    /// Every kind, in the order the controls list them.
    pub const ALL: [Self; 4] = [Self::Scar, Self::StaticWindow, Self::TopK, Self::Parent];

    /// The name shown in the controls.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Scar => "SCAR",
            Self::StaticWindow => "static window",
            Self::TopK => "top-k",
            Self::Parent => "parent section",
        }
    }
}

/// The live controls. Every policy keeps its parameters here, so switching policies and back
/// loses nothing.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Controls {
    /// The expansion rule.
    pub policy: PolicyKind,
    /// SCAR's λ, the weight of the continuity penalty.
    pub lambda: f32,
    /// SCAR's γ, the bar as a share of the seed's relevance; in (0, 1).
    pub gamma: f32,
    /// Neighbours considered on each side (SCAR and static window).
    pub window: u32,
    /// Chunks per block for the parent policy in documents without headings.
    pub parent_block: u32,
    /// Seeds taken from the first stage.
    pub k: usize,
    /// How the seeds are found.
    pub first_stage: FirstStage,
}

/// The paper's SCAR(±1) over five dense seeds, as `scar search` defaults to.
impl Default for Controls {
    fn default() -> Self {
        Self {
            policy: PolicyKind::Scar,
            lambda: Policy::PAPER_LAMBDA,
            gamma: Policy::PAPER_GAMMA,
            window: 1,
            parent_block: 4,
            k: 5,
            first_stage: FirstStage::Dense,
        }
    }
}

impl Controls {
    /// The policy the controls describe, validated.
    pub fn options(&self) -> Result<Options, PolicyError> {
        let window = self.window;
        Options::new(match self.policy {
            PolicyKind::Scar => Policy::Scar {
                lambda: self.lambda,
                gamma: self.gamma,
                window,
            },
            PolicyKind::StaticWindow => Policy::StaticWindow { window },
            PolicyKind::TopK => Policy::TopK,
            PolicyKind::Parent => Policy::Parent {
                block: self.parent_block,
            },
        })
    }

    /// Whether `other` needs new seeds rather than a re-run of the policy on these.
    #[must_use]
    pub fn seeds_differ(&self, other: &Self) -> bool {
        self.k != other.k || self.first_stage != other.first_stage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_an_older_version_keep_their_values_and_default_the_rest() {
        let settings: Settings =
            serde_json::from_str(r#"{"question": "fees?", "controls": {"gamma": 0.7}}"#).unwrap();
        assert_eq!(settings.question, "fees?");
        assert!((settings.controls.gamma - 0.7).abs() < f32::EPSILON);
        assert_eq!(settings.controls.k, Controls::default().k);
        assert!(settings.library.is_empty());
        assert_eq!(settings.answer.model, DEFAULT_LLM);
        assert_eq!(settings.answer.max_tokens, 256);
    }

    #[test]
    fn controls_describe_each_policy_with_its_own_parameters() {
        let mut controls = Controls {
            lambda: 0.2,
            gamma: 0.6,
            window: 2,
            ..Controls::default()
        };
        assert_eq!(
            controls.options().unwrap().policy(),
            Policy::Scar {
                lambda: 0.2,
                gamma: 0.6,
                window: 2
            }
        );
        controls.policy = PolicyKind::StaticWindow;
        assert_eq!(
            controls.options().unwrap().policy(),
            Policy::StaticWindow { window: 2 }
        );
        controls.policy = PolicyKind::Scar;
        controls.gamma = 1.0;
        assert!(controls.options().is_err());
    }

    #[test]
    fn only_k_and_the_first_stage_need_new_seeds() {
        let controls = Controls::default();
        let gamma = Controls {
            gamma: 0.9,
            ..controls
        };
        let k = Controls { k: 3, ..controls };
        assert!(!controls.seeds_differ(&gamma));
        assert!(controls.seeds_differ(&k));
    }

    #[test]
    fn entries_are_named_after_their_source_folder() {
        let opened = LibraryEntry {
            dir: "/data/indexes/contracts".into(),
            sources: Vec::new(),
        };
        let added = LibraryEntry {
            dir: "/data/indexes/notes-1a2b".into(),
            sources: vec!["/home/me/notes".into()],
        };
        assert_eq!(opened.name(), "contracts");
        assert_eq!(added.name(), "notes");
    }
}
