//! The project's benchmark files: every snippet's span is exactly its quoted answer in the
//! corpus text (code-point offsets), and every file resolves completely.

use std::path::{Path, PathBuf};

use scar_eval::{Benchmark, resolve};
use scar_test_support::{corpora, workspace};

fn benchmark_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs_err::read_dir(workspace().join("assets/benchmarks"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_span_is_its_answer() {
    let corpora = corpora();
    let files = benchmark_files();
    assert!(
        files.iter().any(|f| f.ends_with("all.json")),
        "run scripts/build-benchmarks"
    );
    let mut snippets = 0;
    for file in &files {
        let benchmark = Benchmark::load(file).unwrap();
        assert!(!benchmark.tests.is_empty(), "{}", file.display());
        for (i, test) in benchmark.tests.iter().enumerate() {
            assert!(
                !test.snippets.is_empty(),
                "{} {}",
                file.display(),
                benchmark.test_id(i)
            );
            for snippet in &test.snippets {
                let text = fs_err::read_to_string(corpora.join(&snippet.file_path)).unwrap();
                let [start, end] = snippet.span;
                let quoted: String = text.chars().skip(start).take(end - start).collect();
                assert_eq!(
                    Some(quoted.as_str()),
                    snippet.answer.as_deref(),
                    "{} {}: span [{start}, {end}) of {}",
                    file.display(),
                    benchmark.test_id(i),
                    snippet.file_path
                );
                snippets += 1;
            }
        }
    }
    // 4 corpora × 80 tests, once in their own file and once in all.json.
    assert!(snippets >= 2 * 320, "{snippets}");
}

#[test]
fn every_benchmark_resolves_without_problems() {
    let corpora = corpora();
    for file in benchmark_files() {
        let benchmark = Benchmark::load(&file).unwrap();
        let resolved = resolve(&benchmark, &file, &corpora, None).unwrap();
        assert_eq!(resolved.tests.len(), benchmark.tests.len());
        assert!(resolved.problems.is_empty(), "{:?}", resolved.problems);
        assert_eq!(resolved.fallbacks, 0);
        let expected = if file.ends_with("all.json") { 4 } else { 1 };
        assert_eq!(resolved.documents.len(), expected, "{}", file.display());
    }
}

#[test]
fn contractnli_paths_with_a_split_folder_resolve_by_file_name() {
    let dir = workspace().join("../shared/data/contractnli-dev");
    let path = dir.join("benchmark.json");
    if !path.is_file() {
        assert!(
            std::env::var_os("SCAR_REQUIRE_TOOLS").is_none(),
            "SCAR_REQUIRE_TOOLS is set (scripts/test sets it) but {} is missing",
            path.display()
        );
        eprintln!("skipped: {} is not present", path.display());
        return;
    }
    let benchmark = Benchmark::load(&path).unwrap();
    let resolved = resolve(&benchmark, &path, Path::new(&dir), None).unwrap();
    assert_eq!(resolved.tests.len(), benchmark.tests.len());
    assert!(
        resolved.problems.is_empty(),
        "{:?}",
        &resolved.problems[..3.min(resolved.problems.len())]
    );
    assert!(resolved.fallbacks > 0);
    assert!(
        resolved
            .fallback_example
            .as_deref()
            .unwrap()
            .contains("corpus/dev/")
    );
}

#[test]
fn the_multilingual_benchmark_resolves_on_the_seed_documents_in_three_languages() {
    let folder = workspace().join("assets/benchmarks/multilingual");
    let seeds = workspace().join("../shared/data/seeds");
    let path = folder.join("all.json");
    let benchmark = Benchmark::load(&path).unwrap();
    let resolved = resolve(&benchmark, &path, &seeds, None).unwrap();
    assert!(resolved.problems.is_empty(), "{:?}", resolved.problems);
    assert_eq!(resolved.documents.len(), 2);
    for test in &benchmark.tests {
        for snippet in &test.snippets {
            let text = fs_err::read_to_string(seeds.join(&snippet.file_path)).unwrap();
            let [start, end] = snippet.span;
            let quoted: String = text.chars().skip(start).take(end - start).collect();
            assert_eq!(Some(quoted.as_str()), snippet.answer.as_deref());
        }
    }
    // A test's id names its question's language: each of the three asks of both documents.
    for language in ["-en-", "-hi-", "-ja-"] {
        for document in ["000_", "002_"] {
            let asked = (0..benchmark.tests.len())
                .map(|i| benchmark.test_id(i))
                .filter(|id| id.starts_with(document) && id.contains(language))
                .count();
            assert!(asked >= 6, "{document}{language}: {asked}");
        }
    }
}
