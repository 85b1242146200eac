//! Benchmarks in the LegalBench-RAG layout, and where their snippets point.
//!
//! ```json
//! {"tests": [{"query": "...", "snippets": [{"file_path": "a.txt", "span": [120, 480]}]}]}
//! ```
//!
//! `file_path` is relative to a corpus folder; `span` is a half-open range of Unicode code
//! points (Python `str` offsets) into that file's text. Other fields (`id`, `kind`, `answer`,
//! `label`, ...) are allowed; `id`, `kind` and `answer` are kept.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{EvalError, Result};

/// A benchmark file as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Benchmark {
    /// The tests, in file order.
    pub tests: Vec<Test>,
}

/// One question and where its evidence is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Test {
    /// The test's id, if the file gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A free label such as "short" or "long", if the file gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The question.
    pub query: String,
    /// The evidence.
    pub snippets: Vec<Snippet>,
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snippet {
    /// The file, relative to the corpus folder.
    pub file_path: String,
    /// Half-open code-point range in the file's text.
    pub span: [usize; 2],
    /// The evidence text, if the file gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

impl Benchmark {
    /// Reads a benchmark file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = fs_err::read_to_string(path)?;
        serde_json::from_str(&text).map_err(|source| EvalError::Benchmark {
            path: path.to_owned(),
            source,
        })
    }

    /// The `i`-th test's id: its own, or `#<i + 1>` when the file gives none.
    #[must_use]
    pub fn test_id(&self, i: usize) -> String {
        self.tests[i]
            .id
            .clone()
            .unwrap_or_else(|| format!("#{}", i + 1))
    }

    /// The indices of at most `n` tests spread evenly over the file (`⌊i·len/n⌋` for
    /// `i < n`), so that a quick run still sees every part of a benchmark that concatenates
    /// several corpora. All tests when there are no more than `n`.
    #[must_use]
    pub fn spread(&self, n: usize) -> Vec<usize> {
        let len = self.tests.len();
        if len <= n {
            return (0..len).collect();
        }
        (0..n).map(|i| i * len / n).collect()
    }
}

/// A span resolved to a file: the canonical path and the code-point range in the text the
/// indexer reads (a leading byte-order mark, which the indexer drops, is taken off).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoldSpan {
    /// Canonical path of the file.
    pub path: PathBuf,
    /// Half-open code-point range.
    pub chars: Range<usize>,
}

/// A test whose evidence was found on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedTest {
    /// The test's id (or `#n`).
    pub id: String,
    /// Its kind label, if any.
    pub kind: Option<String>,
    /// The question.
    pub query: String,
    /// Its usable evidence spans.
    pub spans: Vec<GoldSpan>,
}

/// A benchmark (or part of one) checked against a corpus folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    /// The benchmark file.
    pub benchmark: PathBuf,
    /// The corpus folder.
    pub corpus: PathBuf,
    /// Tests in the benchmark file.
    pub tests_in_file: usize,
    /// The tests chosen (all, or a quick subset), each with at least one usable span.
    pub tests: Vec<ResolvedTest>,
    /// The files the chosen tests refer to: canonical, sorted, each once.
    pub documents: Vec<PathBuf>,
    /// Snippets whose path was not found as written but by its file name (see [`resolve`]).
    pub fallbacks: usize,
    /// One example of such a fallback, `written → found`.
    pub fallback_example: Option<String>,
    /// Snippets and tests left out, one line each.
    pub problems: Vec<String>,
}

impl Resolved {
    /// No test resolved yet, of the `tests_in_file` in the benchmark at `path`.
    fn nothing_yet(path: &Path, corpus: &Path, tests_in_file: usize) -> Self {
        Self {
            benchmark: path.to_owned(),
            corpus: corpus.to_owned(),
            tests_in_file,
            tests: Vec::new(),
            documents: Vec::new(),
            fallbacks: 0,
            fallback_example: None,
            problems: Vec::new(),
        }
    }
}

/// Finds the files and checks the spans of the tests at `indices` (all tests: `None`).
///
/// A snippet's `file_path` is looked up under `corpus` as written; if there is no such file,
/// the inner folders are dropped one at a time (`corpus/dev/3.txt` → `corpus/3.txt` → `3.txt`),
/// then `corpus/<file name>` is tried: benchmarks converted from other layouts sometimes keep
/// a split folder in the path. A snippet whose file is still missing, or whose span is empty
/// or runs past the end of the text, is left out with a line in [`Resolved::problems`]; a test
/// left with no snippet is left out too. Nothing here stops the run, except a corpus folder
/// that does not exist, no usable test at all, or a `file_path` outside the corpus folder
/// (absolute, climbing out with `..`, or a symbolic link leading out), which is never read.
pub fn resolve(
    benchmark: &Benchmark,
    path: &Path,
    corpus: &Path,
    indices: Option<&[usize]>,
) -> Result<Resolved> {
    if !corpus.is_dir() {
        let message = format!("corpus folder {} is not a folder", corpus.display());
        return Err(std::io::Error::new(std::io::ErrorKind::NotFound, message).into());
    }
    let canonical_corpus = fs_err::canonicalize(corpus)?;
    let all: Vec<usize> = (0..benchmark.tests.len()).collect();
    let indices = indices.unwrap_or(&all);
    let mut resolved = Resolved::nothing_yet(path, corpus, benchmark.tests.len());
    // Written path → what was found there, or why nothing was.
    let mut files: BTreeMap<String, std::result::Result<FoundFile, String>> = BTreeMap::new();
    for &i in indices {
        let test = &benchmark.tests[i];
        let id = benchmark.test_id(i);
        let mut spans = Vec::new();
        for snippet in &test.snippets {
            let outside = |target: PathBuf| EvalError::OutsideCorpus {
                test: id.clone(),
                path: snippet.file_path.clone(),
                corpus: corpus.to_owned(),
                target,
            };
            if !stays_inside(&snippet.file_path) {
                return Err(outside(corpus.join(&snippet.file_path)));
            }
            let file = files.entry(snippet.file_path.clone()).or_insert_with(|| {
                FoundFile::look_up(corpus, &canonical_corpus, &snippet.file_path)
            });
            if let Ok(found) = file
                && !found.canonical.starts_with(&canonical_corpus)
            {
                return Err(outside(found.canonical.clone()));
            }
            if let Ok(found) = file
                && found.fell_back
            {
                resolved.fallback_example.get_or_insert_with(|| {
                    let shown = found.path.strip_prefix(corpus).unwrap_or(&found.path);
                    format!("{} → {}", snippet.file_path, shown.display())
                });
            }
            let FoundFile {
                canonical,
                length,
                bom,
                fell_back,
                ..
            } = match file {
                Ok(file) => file.clone(),
                Err(why) => {
                    resolved
                        .problems
                        .push(format!("test {id}: snippet left out: {why}"));
                    continue;
                }
            };
            resolved.fallbacks += usize::from(fell_back);
            let [start, end] = snippet.span;
            if start >= end || end > length {
                resolved.problems.push(format!(
                    "test {id}: snippet left out: span [{start}, {end}) is empty or past the end of {} ({length} characters)",
                    snippet.file_path
                ));
                continue;
            }
            let shift = usize::from(bom);
            spans.push(GoldSpan {
                path: canonical,
                chars: start.saturating_sub(shift)..end - shift,
            });
        }
        if spans.is_empty() {
            resolved
                .problems
                .push(format!("test {id}: left out, no usable snippet"));
            continue;
        }
        resolved.tests.push(ResolvedTest {
            id,
            kind: test.kind.clone(),
            query: test.query.clone(),
            spans,
        });
    }
    // Sorted, each once.
    let documents: std::collections::BTreeSet<&PathBuf> = resolved
        .tests
        .iter()
        .flat_map(|t| t.spans.iter().map(|s| &s.path))
        .collect();
    resolved.documents = documents.into_iter().cloned().collect();
    if resolved.tests.is_empty() {
        return Err(nothing_to_evaluate(path, &resolved.problems));
    }
    Ok(resolved)
}

/// The error for a benchmark none of whose tests can be used, with its first problems.
fn nothing_to_evaluate(path: &Path, problems: &[String]) -> EvalError {
    let reason = if problems.is_empty() {
        "it has no tests".to_owned()
    } else {
        problems
            .iter()
            .take(3)
            .cloned()
            .collect::<Vec<_>>()
            .join("; ")
    };
    EvalError::NothingToEvaluate {
        benchmark: path.to_owned(),
        reason,
    }
}

/// A snippet's file as found on disk.
#[derive(Debug, Clone)]
struct FoundFile {
    /// Where it was found.
    path: PathBuf,
    canonical: PathBuf,
    /// Length of the text in code points.
    length: usize,
    /// Whether the text starts with a byte-order mark.
    bom: bool,
    /// Whether it was found only by a fallback.
    fell_back: bool,
}

impl FoundFile {
    /// Finds and reads the file `written` names under `corpus` (`root` when canonical), or says
    /// why it cannot. A file that a link leads out of `root` is not read: [`resolve`] refuses it.
    fn look_up(corpus: &Path, root: &Path, written: &str) -> std::result::Result<Self, String> {
        let (path, fell_back) = find(corpus, written)
            .ok_or_else(|| format!("{written} not found under {}", corpus.display()))?;
        let canonical = fs_err::canonicalize(&path).map_err(|e| e.to_string())?;
        if !canonical.starts_with(root) {
            return Ok(Self {
                path,
                canonical,
                length: 0,
                bom: false,
                fell_back,
            });
        }
        let contents = fs_err::read_to_string(&path).map_err(|e| e.to_string())?;
        Ok(Self {
            path,
            canonical,
            length: contents.chars().count(),
            bom: contents.starts_with('\u{feff}'),
            fell_back,
        })
    }
}

/// Whether `written`, joined to a folder, stays inside it: relative, and no `..` climbs above
/// where it starts.
fn stays_inside(written: &str) -> bool {
    let mut depth = 0_usize;
    Path::new(written)
        .components()
        .all(|component| match component {
            Component::Normal(_) => {
                depth += 1;
                true
            }
            Component::CurDir => true,
            Component::ParentDir => depth.checked_sub(1).map(|d| depth = d).is_some(),
            Component::RootDir | Component::Prefix(_) => false,
        })
}

/// The file `written` names under `corpus`, and whether it was found only by a fallback.
fn find(corpus: &Path, written: &str) -> Option<(PathBuf, bool)> {
    let written = Path::new(written);
    let direct = corpus.join(written);
    if direct.is_file() {
        return Some((direct, false));
    }
    let name = written.file_name()?;
    let folders: Vec<&std::ffi::OsStr> = written
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part),
            _ => None,
        })
        .collect();
    (0..folders.len())
        .rev()
        .map(|keep| {
            let mut path = corpus.to_owned();
            path.extend(&folders[..keep]);
            path.join(name)
        })
        .chain(std::iter::once(corpus.join("corpus").join(name)))
        .find(|path| path.is_file())
        .map(|path| (path, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_fields_are_allowed_and_ids_default_to_positions() {
        let json = r#"{"tests": [
            {"query": "q1", "label": "Entailment", "snippets": [{"file_path": "a.txt", "span": [0, 3]}]},
            {"id": "t2", "kind": "long", "query": "q2", "snippets": [{"file_path": "a.txt", "span": [1, 2], "answer": "b"}]}
        ], "name": "x"}"#;
        let benchmark: Benchmark = serde_json::from_str(json).unwrap();
        assert_eq!(benchmark.test_id(0), "#1");
        assert_eq!(benchmark.test_id(1), "t2");
        assert_eq!(benchmark.tests[1].snippets[0].answer.as_deref(), Some("b"));
    }

    #[test]
    fn a_spread_covers_the_whole_file() {
        let test = Test {
            id: None,
            kind: None,
            query: "q".into(),
            snippets: vec![],
        };
        let benchmark = Benchmark {
            tests: vec![test; 10],
        };
        assert_eq!(benchmark.spread(4), [0, 2, 5, 7]);
        assert_eq!(benchmark.spread(20).len(), 10);
    }

    #[test]
    fn odd_paths_fall_back_to_the_file_name_and_bad_snippets_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(dir.path().join("corpus")).unwrap();
        fs_err::write(dir.path().join("corpus/3.txt"), "héllo world").unwrap();
        fs_err::write(dir.path().join("bom.txt"), "\u{feff}abc").unwrap();
        let json = r#"{"tests": [
            {"id": "a", "query": "q", "snippets": [
                {"file_path": "corpus/3.txt", "span": [0, 5]},
                {"file_path": "corpus/dev/3.txt", "span": [6, 11]},
                {"file_path": "corpus/none.txt", "span": [0, 1]},
                {"file_path": "corpus/3.txt", "span": [5, 99]}]},
            {"id": "b", "query": "q", "snippets": [{"file_path": "gone.txt", "span": [0, 1]}]},
            {"id": "c", "query": "q", "snippets": [{"file_path": "bom.txt", "span": [1, 3]}]}
        ]}"#;
        let benchmark: Benchmark = serde_json::from_str(json).unwrap();
        let resolved = resolve(&benchmark, Path::new("b.json"), dir.path(), None).unwrap();
        let ids: Vec<&str> = resolved.tests.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["a", "c"]);
        let a = &resolved.tests[0];
        assert_eq!(a.spans.len(), 2);
        assert_eq!(a.spans[0].path, a.spans[1].path);
        assert_eq!(a.spans[1].chars, 6..11);
        // The byte-order mark counts in the benchmark's offsets but not in the indexed text.
        assert_eq!(resolved.tests[1].spans[0].chars, 0..2);
        assert_eq!(resolved.fallbacks, 1);
        assert_eq!(
            resolved.fallback_example.as_deref(),
            Some("corpus/dev/3.txt → corpus/3.txt")
        );
        assert_eq!(resolved.documents.len(), 2);
        assert_eq!(resolved.problems.len(), 4, "{:?}", resolved.problems);
        assert!(resolved.problems[1].contains("[5, 99)"));
    }

    #[test]
    fn paths_outside_the_corpus_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let corpus = dir.path().join("corpus");
        fs_err::create_dir_all(corpus.join("sub")).unwrap();
        fs_err::write(corpus.join("inside.txt"), "inside text").unwrap();
        let secret = dir.path().join("secret.txt");
        fs_err::write(&secret, "secret text").unwrap();
        std::os::unix::fs::symlink(&secret, corpus.join("link.txt")).unwrap();
        let benchmark = |file_path: &str| -> Benchmark {
            let snippet = Snippet {
                file_path: file_path.to_owned(),
                span: [0, 6],
                answer: None,
            };
            let inside = Snippet {
                file_path: "inside.txt".to_owned(),
                ..snippet.clone()
            };
            Benchmark {
                tests: vec![Test {
                    id: Some("t7".to_owned()),
                    kind: None,
                    query: "q".to_owned(),
                    snippets: vec![inside, snippet],
                }],
            }
        };
        let absolute = secret.display().to_string();
        for written in [
            "../secret.txt",
            "sub/../../secret.txt",
            &absolute,
            "link.txt",
        ] {
            let error = resolve(&benchmark(written), Path::new("b.json"), &corpus, None)
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("test t7") && error.contains(&format!("`{written}`")),
                "{written}: {error}"
            );
            assert!(error.contains("outside the corpus folder"), "{error}");
        }
        // A `..` that stays inside is only a detour.
        let resolved = resolve(
            &benchmark("sub/../inside.txt"),
            Path::new("b.json"),
            &corpus,
            None,
        )
        .unwrap();
        assert_eq!(resolved.documents.len(), 1);
    }

    #[test]
    fn nothing_usable_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let benchmark: Benchmark = serde_json::from_str(
            r#"{"tests": [{"query": "q", "snippets": [{"file_path": "x.txt", "span": [0, 1]}]}]}"#,
        )
        .unwrap();
        let error = resolve(&benchmark, Path::new("b.json"), dir.path(), None).unwrap_err();
        assert!(error.to_string().contains("x.txt not found"), "{error}");
    }
}
