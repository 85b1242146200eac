//! What the app remembers between runs: the library, the last question and the live controls.

use std::path::PathBuf;

use scar_answer::DEFAULT_LLM;
use scar_policy::{Options, Policy, PolicyError, PolicyKind, PolicySettings};
use scar_retrieve::{DEFAULT_K, FirstStage};
use serde::{Deserialize, Deserializer, Serialize};

/// The app's persisted state. Unknown or missing fields fall back to their defaults, so
/// settings written by an older version still load.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// The user's indexes, in the order they were added.
    pub library: Vec<LibraryEntry>,
    /// The index or store questions go to.
    pub current: Option<Location>,
    /// The question box's text.
    pub question: String,
    /// Policy, first stage and their parameters.
    pub controls: Controls,
    /// The chat model that answers from the context, and how long it may talk.
    pub answer: AnswerSettings,
    /// Conversations, oldest first: each question answered, with what was searched for.
    pub conversations: Vec<Conversation>,
    /// The conversation a follow-up continues, by its place in `conversations`; `None` starts
    /// a new one with the next answer.
    pub conversation: Option<usize>,
}

/// Questions asked one after another, each answered; a follow-up is searched for as the chat
/// model rewrote it to stand alone.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Conversation {
    /// The turns in the order they were asked.
    pub turns: Vec<scar_answer::Turn>,
}

impl Conversation {
    /// The first question, which names the conversation in lists.
    #[must_use]
    pub fn title(&self) -> &str {
        self.turns.first().map_or("", |turn| turn.question.as_str())
    }
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

/// One index or store in the library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LibraryEntry {
    /// The index folder, or the store.
    #[serde(alias = "dir")]
    pub location: Location,
    /// The folders indexed into it by the app; empty for an index or store opened as it is.
    #[serde(default)]
    pub sources: Vec<PathBuf>,
}

impl LibraryEntry {
    /// The name shown in the library: the indexed folder's, else the index folder's, else the
    /// store's database and server.
    #[must_use]
    pub fn name(&self) -> String {
        match (&self.location, self.sources.first()) {
            (_, Some(source)) => crate::file_name(source),
            (Location::Folder(dir), None) => crate::file_name(dir),
            (Location::Store(url), None) => store_name(url),
        }
    }
}

/// Where an entry's chunks are: an index folder, or a PostgreSQL store (`scar --store`). Saved
/// as one string, a path or a `postgres://` URL, so the settings of versions that knew only
/// folders still load.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// An index folder.
    Folder(PathBuf),
    /// A PostgreSQL store, by its `postgres://` or `postgresql://` URL.
    Store(String),
}

/// The schemes that make a saved string a store's URL rather than a folder.
const STORE_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

impl Location {
    /// The store at `url`, which must be a `postgres://` or `postgresql://` URL (the app
    /// saves it as one string beside folders' paths).
    pub fn store(url: &str) -> crate::Result<Self> {
        let url = url.trim();
        if STORE_SCHEMES.iter().any(|scheme| url.starts_with(scheme)) {
            Ok(Self::Store(url.to_owned()))
        } else {
            Err(crate::UiError::NotAStoreUrl(scar_postgres::redacted(url)))
        }
    }

    /// The index folder, for a folder.
    #[must_use]
    pub fn folder(&self) -> Option<&std::path::Path> {
        match self {
            Self::Folder(dir) => Some(dir),
            Self::Store(_) => None,
        }
    }

    fn saved(text: String) -> Self {
        if STORE_SCHEMES.iter().any(|scheme| text.starts_with(scheme)) {
            Self::Store(text)
        } else {
            Self::Folder(text.into())
        }
    }
}

/// A folder as its path shows it; a store as its URL does, with the password left out.
impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Folder(dir) => write!(f, "{}", dir.display()),
            Self::Store(url) => f.write_str(&scar_postgres::redacted(url)),
        }
    }
}

impl From<PathBuf> for Location {
    fn from(dir: PathBuf) -> Self {
        Self::Folder(dir)
    }
}

impl Serialize for Location {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Folder(dir) => dir.serialize(serializer),
            Self::Store(url) => url.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Location {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::saved)
    }
}

/// A store's name in the library: `docs on db.example.com:5432`, from its URL.
fn store_name(url: &str) -> String {
    let shown = scar_postgres::redacted(url);
    let rest = STORE_SCHEMES
        .iter()
        .find_map(|scheme| shown.strip_prefix(scheme))
        .unwrap_or(&shown);
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let server = rest.split_once('/').map_or(rest, |(server, _)| server);
    let server = server.rsplit_once('@').map_or(server, |(_, host)| host);
    match rest.split_once('/').map(|(_, database)| database) {
        Some(database) if !database.is_empty() => format!("{database} on {server}"),
        _ => server.to_owned(),
    }
}

/// The live controls. Every policy keeps its parameters here, so switching policies and back
/// loses nothing but the window, which each kind starts at its own default.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Controls {
    /// The expansion rule. A name this version does not know (saved by another version) reads
    /// as the default rather than failing the whole settings.
    #[serde(deserialize_with = "kind_or_default")]
    pub policy: PolicyKind,
    /// SCAR's λ, the weight of the continuity penalty.
    pub lambda: f32,
    /// SCAR's γ, the bar as a share of the seed's relevance; in (0, 1).
    pub gamma: f32,
    /// Neighbours considered on each side (the kinds that walk).
    pub window: u32,
    /// The evidence walk's depth, as a multiple of the number of seeds.
    pub depth: u32,
    /// Chunks per block: the parent's, and the section's in documents without headings.
    #[serde(alias = "parent_block")]
    pub block: u32,
    /// Seeds taken from the first stage.
    pub k: usize,
    /// How the seeds are found.
    pub first_stage: FirstStage,
}

/// `scar search`'s defaults: the default policy at its own window, over
/// [`DEFAULT_K`] seeds from the default first stage.
impl Default for Controls {
    fn default() -> Self {
        let settings = PolicySettings::default();
        let policy = PolicyKind::default();
        Self {
            policy,
            lambda: settings.lambda,
            gamma: settings.gamma,
            window: settings.window.unwrap_or_else(|| policy.default_window()),
            depth: settings.depth,
            block: settings.block,
            k: DEFAULT_K,
            first_stage: FirstStage::default(),
        }
    }
}

impl Controls {
    /// The same controls with policy `kind` at its own default window.
    #[must_use]
    pub fn with_policy(self, kind: PolicyKind) -> Self {
        Self {
            policy: kind,
            window: kind.default_window(),
            ..self
        }
    }

    /// The policy the controls describe, not yet validated.
    #[must_use]
    pub fn policy(&self) -> Policy {
        let settings = PolicySettings {
            lambda: self.lambda,
            gamma: self.gamma,
            window: Some(self.window),
            block: self.block,
            depth: self.depth,
        };
        Policy::from_kind(self.policy, &settings)
    }

    /// The policy the controls describe, validated.
    pub fn options(&self) -> Result<Options, PolicyError> {
        Options::new(self.policy())
    }

    /// Whether `other` needs new seeds rather than a re-run of the policy on these.
    #[must_use]
    pub fn seeds_differ(&self, other: &Self) -> bool {
        self.k != other.k || self.first_stage != other.first_stage
    }
}

/// Reads a policy kind by any name [`PolicyKind`] accepts, and an unknown one as the default.
/// The name comes as an identifier, which both JSON (a string) and eframe's RON (a bare word)
/// provide.
fn kind_or_default<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PolicyKind, D::Error> {
    struct Name;
    impl serde::de::Visitor<'_> for Name {
        type Value = PolicyKind;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the name of a policy")
        }

        fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<PolicyKind, E> {
            Ok(name.parse().unwrap_or_default())
        }
    }
    deserializer.deserialize_identifier(Name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_from_an_older_version_keep_their_values_and_default_the_rest() {
        let settings: Settings = serde_json::from_str(
            r#"{"question": "fees?", "controls": {"policy": "scar", "gamma": 0.7, "parent_block": 6}}"#,
        )
        .unwrap();
        assert_eq!(settings.question, "fees?");
        assert_eq!(settings.controls.policy, PolicyKind::Scar);
        assert!((settings.controls.gamma - 0.7).abs() < f32::EPSILON);
        assert_eq!(settings.controls.block, 6);
        assert_eq!(settings.controls.k, Controls::default().k);
        assert!(settings.library.is_empty());
        assert_eq!(settings.answer.model, DEFAULT_LLM);
        assert_eq!(settings.answer.max_tokens, 256);
    }

    #[test]
    fn an_unknown_policy_name_falls_back_to_the_default_and_keeps_the_rest() {
        let settings: Settings = serde_json::from_str(
            r#"{"question": "fees?", "controls": {"policy": "sliding", "k": 3}}"#,
        )
        .unwrap();
        assert_eq!(settings.controls.policy, PolicyKind::default());
        assert_eq!(settings.controls.k, 3);
        assert_eq!(settings.question, "fees?");
        // The old spellings the command line accepts read as their kinds.
        let old: Controls = serde_json::from_str(r#"{"policy": "static"}"#).unwrap();
        assert_eq!(old.policy, PolicyKind::StaticWindow);
    }

    #[test]
    fn settings_round_trip() {
        let settings = Settings {
            question: "fees?".to_owned(),
            controls: Controls::default().with_policy(PolicyKind::Section),
            ..Settings::default()
        };
        let json = serde_json::to_string(&settings).unwrap();
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), settings);
    }

    #[test]
    fn defaults_are_the_libraries_own() {
        let controls = Controls::default();
        assert_eq!(controls.policy(), Policy::default());
        assert_eq!(controls.k, DEFAULT_K);
        assert_eq!(controls.first_stage, FirstStage::default());
    }

    #[test]
    fn controls_describe_each_policy_with_its_own_parameters() {
        let controls = Controls {
            lambda: 0.2,
            gamma: 0.6,
            depth: 4,
            ..Controls::default()
        };
        assert_eq!(
            controls.policy(),
            Policy::Evidence {
                depth: 4,
                window: 2
            }
        );
        let mut scar = controls.with_policy(PolicyKind::Scar);
        assert_eq!(
            scar.options().unwrap().policy(),
            Policy::Scar {
                lambda: 0.2,
                gamma: 0.6,
                window: 1
            }
        );
        let wide = Controls {
            window: 3,
            ..controls.with_policy(PolicyKind::StaticWindow)
        };
        assert_eq!(wide.policy(), Policy::StaticWindow { window: 3 });
        scar.gamma = 1.0;
        assert!(scar.options().is_err());
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
    fn entries_are_named_after_their_source_folder_or_their_store() {
        let opened = LibraryEntry {
            location: PathBuf::from("/data/indexes/contracts").into(),
            sources: Vec::new(),
        };
        let added = LibraryEntry {
            location: PathBuf::from("/data/indexes/notes-1a2b").into(),
            sources: vec!["/home/me/notes".into()],
        };
        let store = LibraryEntry {
            location: Location::store("postgres://ann:secret@db.example.com:5432/docs").unwrap(),
            sources: Vec::new(),
        };
        assert_eq!(opened.name(), "contracts");
        assert_eq!(added.name(), "notes");
        assert_eq!(store.name(), "docs on db.example.com:5432");
        assert!(!store.location.to_string().contains("secret"));
        let bare = Location::store("postgresql://localhost").unwrap();
        assert_eq!(store_name(&bare.to_string()), "localhost");
    }

    #[test]
    fn a_store_is_named_by_a_postgres_url_only() {
        let error = Location::store("host=db password=secret dbname=docs").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("postgres://"), "{message}");
        assert!(!message.contains("secret"), "{message}");
        assert!(Location::store("/data/indexes/contracts").is_err());
    }

    #[test]
    fn locations_are_saved_as_paths_and_urls_and_old_entries_load() {
        // As a version that knew only folders saved them.
        let old: Settings = serde_json::from_str(
            r#"{"library": [{"dir": "/data/contracts", "sources": []}],
                "current": "/data/contracts"}"#,
        )
        .unwrap();
        let folder = Location::Folder("/data/contracts".into());
        assert_eq!(old.library[0].location, folder);
        assert_eq!(old.current, Some(folder.clone()));
        let store = Location::store("postgres://scar@127.0.0.1:5432/docs").unwrap();
        let settings = Settings {
            library: vec![
                LibraryEntry {
                    location: folder,
                    sources: Vec::new(),
                },
                LibraryEntry {
                    location: store.clone(),
                    sources: Vec::new(),
                },
            ],
            current: Some(store),
            ..Settings::default()
        };
        let json = serde_json::to_string(&settings).unwrap();
        assert!(
            json.contains(r#""current":"postgres://scar@127.0.0.1:5432/docs""#),
            "{json}"
        );
        assert_eq!(serde_json::from_str::<Settings>(&json).unwrap(), settings);
    }
}
