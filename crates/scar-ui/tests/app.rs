use egui::Key;
use egui::accesskit::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT as _, Queryable};
use scar_core::{ChunkId, SeamKind, Side};
use scar_policy::{NeighbourRecord, Outcome, Policy};
use scar_retrieve::SearchReport;
use scar_ui::{Controls, ScarApp, Settings};

use crate::common::{
    KAYAK, Picks, answer_and_wait, asked_kayak, asked_kayak_with, environment, example_index,
    first_start, folder_with_handbook, harness, one_seed, papers_scar, settle, step_until,
};

/// A snapshot of the whole window, without the pointer and with the status line's timings
/// (which vary run to run) masked.
fn snapshot(harness: &mut Harness<'_, ScarApp>, name: &str) {
    harness.remove_cursor();
    harness.run_steps(1);
    let timings = harness.get_by_label_contains("first stage ").rect();
    harness.mask(timings);
    harness.snapshot(name);
}

/// The first neighbour record with `outcome`.
fn first(report: &SearchReport, outcome: Outcome) -> &NeighbourRecord {
    report
        .ledger
        .neighbours()
        .find(|n| n.outcome == outcome)
        .unwrap()
}

/// The labels SCAR's row for a neighbour shows, as the ledger has them.
fn scar_labels(report: &SearchReport, outcome: Outcome) -> Vec<String> {
    let record = first(report, outcome);
    vec![
        format!("cos(q,n) {:.3}", record.query_cos.unwrap()),
        format!("b {:.3}", record.penalty.unwrap()),
        format!("S {:.3}", record.score.unwrap()),
        format!("margin {:+.3}", record.margin.unwrap()),
    ]
}

/// The outcome of the neighbour record that reached `id`.
fn outcome_of(report: &SearchReport, id: ChunkId) -> Outcome {
    report
        .ledger
        .neighbours()
        .find(|n| n.id == Some(id))
        .unwrap()
        .outcome
}

#[test]
fn asking_shows_each_decision_with_its_signals() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    let report = harness.state().report().unwrap().clone();
    assert_eq!(report.ledger.policy, Policy::default());
    assert_eq!(report.ledger.count(Outcome::Accepted), 1);
    assert_eq!(report.ledger.count(Outcome::Rejected), 2);
    assert_eq!(report.ledger.count(Outcome::NotReached), 1);

    // In its decision row and in the reader, which opens on the first seed.
    assert_eq!(harness.query_all_by_label("seed #1").count(), 2);
    harness.get_by_label(&format!("cos(q,c) {:.3}", report.ledger.seeds[0].query_cos));
    harness.get_by_label("✔ accepted");
    assert_eq!(harness.query_all_by_label("✖ rejected").count(), 2);
    harness.get_by_label("· not reached");
    // 14 chunks in the example: the bar is a chunk ranked 7 in both lists (the better half),
    // not 10 × 1.
    assert_eq!(report.ledger.seeds[0].bar_rank, Some(7));
    harness.get_by_label(&format!(
        "bar {:.4} (ranked 7 in both lists)",
        report.ledger.seeds[0].bar.unwrap()
    ));
    // The continuation of the seed's cut sentence, and why it joins.
    let accepted = first(&report, Outcome::Accepted);
    assert_eq!(accepted.seam, Some(SeamKind::MidSentence));
    harness.get_by_label("cut: mid-sentence");
    harness.get_by_label(&format!(
        "dense #{} bm25 #{}",
        accepted.dense_rank.unwrap(),
        accepted.lexical_rank.unwrap()
    ));
    harness.get_by_label(&format!(
        "score {:.4} > bar {:.4} (ranked 7 in both lists)",
        accepted.score.unwrap(),
        accepted.bar.unwrap()
    ));
    harness.get_by_label(&format!("margin {:+.4}", accepted.margin.unwrap()));
    let rejected = first(&report, Outcome::Rejected);
    harness.get_by_label(&format!("cut: {}", rejected.seam.unwrap().label()));
    harness.get_by_label(&format!(
        "score {:.4} ≤ bar {:.4} (ranked 7 in both lists)",
        rejected.score.unwrap(),
        rejected.bar.unwrap()
    ));
    // The comparison with static ±1 in the library's words: here a saving.
    let verdict = report.comparison().verdict();
    assert!(verdict.starts_with("saved 1 chunk "), "{verdict}");
    harness.get_by_label(&verdict);
    snapshot(&mut harness, "decisions");
}

#[test]
fn raising_gamma_rejects_scars_continuation_at_once() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(papers_scar(), library.path());
    let before = harness.state().report().unwrap().clone();
    assert_eq!(before.ledger.policy, Policy::scar(1));
    let accepted = scar_labels(&before, Outcome::Accepted);
    for outcome in [Outcome::Accepted, Outcome::Rejected] {
        for label in scar_labels(&before, outcome) {
            harness.get_by_label(&label);
        }
    }
    let bar = format!("bar {:.3}", before.ledger.seeds[0].bar.unwrap());
    // Once for the seed, once per neighbour.
    assert_eq!(harness.query_all_by_label(&bar).count(), 3);
    harness.get_by_label("✔ accepted");

    // The accepted neighbour's S (0.620) falls below the seed's bar at γ = 0.9 (0.626).
    let controls = Controls {
        gamma: 0.9,
        ..*harness.state().controls()
    };
    harness.state_mut().set_controls(controls);
    assert!(!harness.state().is_busy(), "no new embedding was asked for");
    harness.run_steps(2);

    let after = harness.state().report().unwrap();
    // The question's embedding and seeds were reused, not computed again.
    assert!((after.timings.embed_ms - before.timings.embed_ms).abs() < f64::EPSILON);
    assert!(harness.query_by_label("✔ accepted").is_none());
    assert_eq!(harness.query_all_by_label("✖ rejected").count(), 2);
    // The same neighbour, the same cosine and penalty; only the verdict moved.
    harness.get_by_label(&accepted[0]);
    harness.get_by_label(&accepted[1]);
    snapshot(&mut harness, "gamma_raised");
}

#[test]
fn the_depth_control_reruns_the_evidence_walk_on_the_cached_rankings() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    let before = harness.state().report().unwrap().clone();
    let continuation = first(&before, Outcome::Accepted).id.unwrap();

    // Fused, its ranks (dense #2, BM25 #3) beat a chunk ranked 3 in both lists, not one ranked
    // 2.
    harness
        .get_by_role_and_label(Role::Slider, "depth ×k")
        .set_value_accesskit(2.0);
    harness.run_steps(2);
    assert_eq!(harness.state().controls().depth, 2);
    assert!(!harness.state().is_busy(), "no new embedding was asked for");
    let after = harness.state().report().unwrap();
    assert!((after.timings.embed_ms - before.timings.embed_ms).abs() < f64::EPSILON);
    assert_eq!(outcome_of(after, continuation), Outcome::Rejected);
    let bar = format!(
        "bar {:.4} (ranked 2 in both lists)",
        after.ledger.seeds[0].bar.unwrap()
    );
    assert!(harness.query_by_label("✔ accepted").is_none());
    // The seed's bar, and every neighbour's score against it (none beats it now).
    harness.get_by_label(&bar);
    assert_eq!(
        harness
            .query_all_by_label_contains(&format!("≤ {bar}"))
            .filter(|node| node.accesskit_node().role() == Role::Label)
            .count(),
        after
            .ledger
            .neighbours()
            .filter(|n| n.score.zip(n.bar).is_some_and(|(s, b)| s <= b))
            .count()
    );

    // A deeper walk never takes less.
    let mut context = 0;
    for depth in 1..=10 {
        let controls = Controls {
            depth,
            ..*harness.state().controls()
        };
        harness.state_mut().set_controls(controls);
        let report = harness.state().report().unwrap();
        assert!(report.ledger.context.len() >= context, "depth {depth}");
        context = report.ledger.context.len();
        let joined = outcome_of(report, continuation) == Outcome::Accepted;
        assert_eq!(joined, depth >= 3, "depth {depth}");
    }
}

#[test]
fn the_seam_map_marks_where_each_cut_fell() {
    let library = tempfile::tempdir().unwrap();
    let harness = asked_kayak(one_seed(), library.path());
    let index = scar_index::Index::open(example_index()).unwrap();
    // The map opens on the first seed's document.
    let seed = harness.state().report().unwrap().ledger.seeds[0].id;
    let slot = index.position(seed).document;
    let document = index.documents().iter().find(|d| d.slot == slot).unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for id in document.rows().map(ChunkId) {
        let Some(kind) = index.seam(id, Side::Next) else {
            continue;
        };
        let ordinal = index.position(id).ordinal;
        let label = format!("cut ¶{ordinal}–¶{}: {}", ordinal + 1, kind.label());
        harness.get_by_role_and_label(Role::Image, &label);
        kinds.insert(kind);
    }
    assert!(kinds.len() >= 3, "the handbook has only {kinds:?}");
    // The legend names every kind.
    for kind in SeamKind::ALL {
        harness.get_by_label(kind.label());
    }
}

#[test]
fn a_new_k_embeds_again_on_the_worker() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    let controls = Controls {
        k: 3,
        ..*harness.state().controls()
    };
    harness.state_mut().set_controls(controls);
    assert!(harness.state().is_busy());
    settle(&mut harness);
    let report = harness.state().report().unwrap();
    assert_eq!(report.k, 3);
    assert_eq!(report.ledger.seeds.len(), 3);
    harness.get_by_label("seed #3");
}

#[test]
fn clicking_a_chunk_in_the_seam_map_opens_it_in_the_reader() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    let index = scar_index::Index::open(example_index()).unwrap();
    let rejected = harness
        .state()
        .report()
        .unwrap()
        .ledger
        .neighbours()
        .find(|n| n.outcome == Outcome::Rejected)
        .and_then(|n| n.id)
        .unwrap();
    let chunk = index.chunk(rejected).unwrap();
    let cell = format!("¶{}", chunk.ordinal);
    let first_line = chunk.text.trim().lines().next().unwrap();
    assert!(harness.query_by_label_contains(first_line).is_none());

    harness.get_by_role_and_label(Role::Button, &cell).click();
    harness.run_steps(2);
    harness.get_by_label_contains(first_line);
    snapshot(&mut harness, "seam_map_reader");
}

#[test]
fn enter_asks_the_question_in_the_box() {
    let library = tempfile::tempdir().unwrap();
    let picks = Picks::default();
    let mut app = ScarApp::new(Settings::default(), environment(library.path()), picks);
    app.open_index(example_index());
    let mut harness = harness(app);
    settle(&mut harness);
    assert!(harness.state().report().is_none());

    // The question box comes first; the chat model's name is the other text field.
    let question = harness.query_all_by_role(Role::TextInput).next().unwrap();
    question.focus();
    question.type_text(KAYAK);
    harness.run_steps(1);
    harness.key_press(Key::Enter);
    settle(&mut harness);
    assert_eq!(harness.state().report().unwrap().query, KAYAK);
}

#[test]
fn the_ledger_exports_as_scar_search_json_prints_it() {
    let library = tempfile::tempdir().unwrap();
    let path = library.path().join("ledger.json");
    let picks = Picks {
        save_path: Some(path.clone()),
        ..Picks::default()
    };
    let mut app = ScarApp::new(Settings::default(), environment(library.path()), picks);
    app.open_index(example_index());
    app.ask(KAYAK);
    let mut harness = harness(app);
    settle(&mut harness);

    harness.get_by_label("Export ledger…").click();
    step_until(&mut harness, |_| path.exists());
    harness.run_steps(2);
    // Byte for byte what `scar search --json` prints for the same report.
    let report = harness.state().report().unwrap();
    let printed = serde_json::to_string_pretty(report).unwrap() + "\n";
    assert_eq!(std::fs::read_to_string(&path).unwrap(), printed);
    assert_eq!(report.schema, scar_retrieve::SCHEMA_VERSION);
}

#[test]
fn adding_a_folder_indexes_it_in_the_background_and_lists_unreadable_files() {
    let library = tempfile::tempdir().unwrap();
    let papers = folder_with_handbook(library.path(), "papers");
    std::fs::write(papers.join("broken.pdf"), b"%PDF-1.7 this is not a PDF").unwrap();
    let mut harness = first_start(library.path(), Some(papers.clone()));

    harness.get_by_label("➕ Add folder…").click();
    let mut saw_progress = false;
    step_until(&mut harness, |harness| {
        saw_progress |= harness.query_by_label("Cancel").is_some();
        !harness.state().settings().library.is_empty() && !harness.state().is_busy()
    });
    assert!(saw_progress, "indexing showed no progress");
    let entry = &harness.state().settings().library[0];
    assert_eq!(entry.name(), "papers");
    assert_eq!(entry.sources, [papers]);
    assert_eq!(
        harness.state().settings().current.as_ref(),
        Some(&entry.location)
    );
    harness.get_by_label("1 file not indexed");
    harness.get_by_label_contains("broken.pdf: ");

    harness.state_mut().ask(KAYAK);
    settle(&mut harness);
    let report = harness.state().report().unwrap();
    assert!(
        report
            .chunks
            .iter()
            .all(|c| c.document.ends_with("ferry-handbook.md"))
    );

    // Started again, the library still says what the index left out and why.
    let settings = harness.state().settings().clone();
    let reopened = ScarApp::new(
        settings,
        environment(&library.path().join("indexes")),
        Picks::default(),
    );
    let mut harness = crate::common::harness(reopened);
    settle(&mut harness);
    assert!(harness.query_by_label("1 file not indexed").is_none());
    harness.get_by_label("1 file skipped").click();
    harness.run_steps(2);
    harness.get_by_label_contains("broken.pdf: ");
}

/// A folder dropped on the window, as the window system hands it over.
#[derive(Debug)]
struct Dropped(std::path::PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &std::path::Path {
        &self.0
    }

    fn bytes(&self) -> Result<Vec<u8>, String> {
        Err("a folder has no bytes".to_owned())
    }
}

#[test]
fn a_folder_dropped_on_the_window_is_indexed_and_the_library_shows_its_formats() {
    let library = tempfile::tempdir().unwrap();
    let notes = folder_with_handbook(library.path(), "notes");
    std::fs::write(
        notes.join("tides.csv"),
        "Date,High tide\n2026-05-01,06:12\n",
    )
    .unwrap();
    let mut harness = first_start(library.path(), None);
    harness.get_by_label("…or drop a folder on the window");

    harness
        .input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(notes.clone())));
    step_until(&mut harness, |harness| {
        !harness.state().settings().library.is_empty() && !harness.state().is_busy()
    });
    let entry = &harness.state().settings().library[0];
    assert_eq!(entry.name(), "notes");
    assert_eq!(entry.sources, [notes]);
    settle(&mut harness);
    harness.get_by_label("sentence-transformers/all-MiniLM-L6-v2");
    harness.get_by_label_contains("2 files · ");
    harness.get_by_label_contains(" chunks · 1 csv, 1 md");
}

#[test]
fn answering_streams_text_whose_citations_open_their_chunks() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    assert!(harness.query_by_label_contains("prompt ").is_none());

    harness
        .get_by_role_and_label(Role::Button, "Answer")
        .click();
    harness.run_steps(2);
    assert!(harness.state().is_answering());
    harness.get_by_label("Stop");
    step_until(&mut harness, |harness| !harness.state().is_answering());
    harness.run_steps(3);

    let answer = harness.state().answer().unwrap().clone();
    assert!(answer.generation.generated_tokens > 0);
    assert!(!answer.generation.text.trim().is_empty());
    let prompt_tokens = answer.generation.prompt_tokens.unwrap();
    assert!(prompt_tokens > 0);
    harness.get_by_label_contains(&format!("prompt {prompt_tokens} tokens"));
    harness.get_by_label_contains(&answer.model);
    // Each sentence with the source found for it, under the answer.
    assert!(
        !answer.attribution.is_empty(),
        "{:?}",
        answer.generation.text
    );
    harness.get_by_label("Sources found for each sentence");
    let first = &answer.attribution[0];
    let verdict = if first.found {
        format!("found in [{}]", first.source)
    } else {
        "not found in the sources".to_owned()
    };
    assert!(
        harness.query_all_by_label(&verdict).next().is_some(),
        "{verdict}"
    );
    // The text before the first citation shows as it came.
    let opening = answer.generation.text.split('[').next().unwrap().trim();
    if let Some(line) = opening.lines().next().filter(|line| !line.is_empty()) {
        // In the answer, and again in its sentence's attribution.
        assert!(
            harness.query_all_by_label_contains(line).next().is_some(),
            "{line}"
        );
    }

    if let Some(source) = answer.citations.cited.first() {
        // Open another chunk first, so that the citation has somewhere to move the reader.
        let other = u32::from(source.ordinal == 0);
        harness
            .get_by_role_and_label(Role::Button, &format!("¶{other}"))
            .click();
        harness.run_steps(2);
        assert_ne!(harness.state().selected_chunk(), Some(source.chunk));
        harness
            .query_all_by_label(&format!("[{}]", source.number))
            .next()
            .unwrap()
            .click();
        harness.run_steps(2);
        assert_eq!(harness.state().selected_chunk(), Some(source.chunk));
    }

    // The answer belongs to the report it came from: a new verdict clears it.
    let controls = Controls {
        depth: 2,
        ..*harness.state().controls()
    };
    harness.state_mut().set_controls(controls);
    harness.run_steps(2);
    assert!(harness.state().answer().is_none());
    assert!(harness.query_by_label_contains("prompt ").is_none());
}

#[test]
fn gemma_3_answers_in_the_app_with_its_sentences_traced() {
    let library = tempfile::tempdir().unwrap();
    let mut settings = Settings {
        controls: one_seed(),
        ..Settings::default()
    };
    settings.answer.model = scar_test_support::models_dir()
        .join("gemma-3-270m/gemma-3-270m-q4_k_m.gguf")
        .display()
        .to_string();
    settings.answer.max_tokens = 24;
    let mut harness = asked_kayak_with(settings, library.path());
    answer_and_wait(&mut harness);
    let answer = harness.state().answer().unwrap().clone();
    assert_eq!(answer.model, "gemma-3-270m-q4_k_m");
    assert!(!answer.generation.text.trim().is_empty());
    assert!(
        !answer.attribution.is_empty(),
        "{:?}",
        answer.generation.text
    );
    harness.get_by_label("Sources found for each sentence");
}

#[test]
fn a_missing_chat_model_is_reported_in_the_answer_panel() {
    let library = tempfile::tempdir().unwrap();
    let mut settings = Settings::default();
    settings.answer.model = library
        .path()
        .join("no-such-model.gguf")
        .display()
        .to_string();
    let mut harness = asked_kayak_with(settings, library.path());
    answer_and_wait(&mut harness);
    assert!(harness.state().answer().is_none());
    harness.get_by_label_contains("⚠ ");
}

#[test]
fn a_follow_up_is_rewritten_from_the_conversation_before_it_is_searched_for() {
    let library = tempfile::tempdir().unwrap();
    let mut harness = asked_kayak(one_seed(), library.path());
    let answer = |harness: &mut Harness<'_, ScarApp>| {
        answer_and_wait(harness);
        harness.state().answer().unwrap().generation.text.clone()
    };
    let first = answer(&mut harness);
    let turns = harness.state().conversation().to_vec();
    assert_eq!(turns.len(), 1);
    assert_eq!(
        (turns[0].question.as_str(), turns[0].answer.as_str()),
        (KAYAK, first.as_str())
    );
    assert_eq!(turns[0].standalone, KAYAK);

    // The follow-up goes to the chat model with the first turn, and what it wrote is searched.
    harness.state_mut().ask("And for a car?");
    harness.run_steps(2);
    assert!(harness.state().is_rewriting());
    settle(&mut harness);
    assert!(!harness.state().is_rewriting());
    let searched = harness.state().report().unwrap().query.clone();
    assert!(!searched.trim().is_empty());
    if searched != "And for a car?" {
        harness.get_by_label(&format!("Searched for: {searched}"));
    }
    harness.get_by_label("Earlier in this conversation (1)");
    let second = answer(&mut harness);
    let turns = harness.state().conversation().to_vec();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1].question, "And for a car?");
    assert_eq!(
        (turns[1].standalone.as_str(), turns[1].answer.as_str()),
        (searched.as_str(), second.as_str())
    );

    // Kept with the settings, listed, and reopened after a restart; "New" starts another.
    let settings = harness.state().settings().clone();
    assert_eq!(settings.conversations.len(), 1);
    let restarted = ScarApp::new(
        Settings {
            conversation: None,
            ..settings
        },
        environment(library.path()),
        Picks::default(),
    );
    let mut harness = crate::common::harness(restarted);
    // The restarted app reopens its index on a worker: clicked before that lands, the button
    // may have moved.
    settle(&mut harness);
    assert!(harness.state().conversation().is_empty());
    harness.get_by_label(&format!("{KAYAK} (2)")).click();
    harness.run_steps(2);
    assert_eq!(harness.state().conversation(), turns);
    harness.get_by_label("New").click();
    harness.run_steps(2);
    assert!(harness.state().conversation().is_empty());
}

#[test]
fn the_reader_opens_its_document_and_the_folder_that_holds_it() {
    let library = tempfile::tempdir().unwrap();
    let picks = Picks::default();
    let opened = std::sync::Arc::clone(&picks.opened);
    let settings = Settings {
        controls: one_seed(),
        ..Settings::default()
    };
    let mut app = ScarApp::new(settings, environment(library.path()), picks);
    app.open_index(example_index());
    app.ask(KAYAK);
    let mut harness = harness(app);
    settle(&mut harness);
    let seed = harness.state().report().unwrap().ledger.seeds[0].id;
    let index = scar_index::Index::open(example_index()).unwrap();
    let document = index.chunk(seed).unwrap().document.path.clone();
    harness
        .get_by_role_and_label(
            Role::Button,
            &format!("¶{}", index.chunk(seed).unwrap().ordinal),
        )
        .click();
    harness.run_steps(2);

    let wait_for = |count: usize| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while opened.lock().unwrap().len() < count {
            assert!(std::time::Instant::now() < deadline, "nothing was opened");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    };
    harness.get_by_label("Open").click();
    harness.run_steps(1);
    wait_for(1);
    harness.get_by_label("Show in folder").click();
    harness.run_steps(1);
    wait_for(2);
    assert_eq!(
        *opened.lock().unwrap(),
        [
            (document.clone(), None),
            (document.parent().unwrap().to_owned(), None)
        ]
    );
}

#[test]
fn a_library_entry_follows_files_added_to_and_removed_from_its_folder() {
    let library = tempfile::tempdir().unwrap();
    let papers = folder_with_handbook(library.path(), "papers");
    let mut harness = first_start(library.path(), Some(papers.clone()));
    harness.get_by_label("➕ Add folder…").click();
    step_until(&mut harness, |harness| {
        !harness.state().settings().library.is_empty() && !harness.state().is_busy()
    });
    let location = harness.state().settings().library[0].location.clone();
    let dir = location.folder().unwrap().to_owned();
    let documents = |dir: &std::path::Path| scar_index::Index::open(dir).unwrap().documents().len();
    assert_eq!(documents(&dir), 1);

    std::fs::write(papers.join("tides.md"), "# Tides\n\nHigh water at six.").unwrap();
    step_until(&mut harness, |_| documents(&dir) == 2);
    std::fs::remove_file(papers.join("ferry-handbook.md")).unwrap();
    step_until(&mut harness, |_| documents(&dir) == 1);
    settle(&mut harness);
    // A run the watch started leaves the current index where it was, open again.
    assert_eq!(harness.state().settings().current.as_ref(), Some(&location));
    harness.get_by_label_contains("0 added, 0 updated, 1 removed");
}

#[test]
fn a_pdf_chunk_opens_its_file_at_the_page_it_starts_on() {
    let library = tempfile::tempdir().unwrap();
    let reports = library.path().join("reports");
    std::fs::create_dir(&reports).unwrap();
    let topics = [
        "harbour fees are paid at the office before a boat leaves the quay",
        "moorings on the north pontoon are let by the season from April",
        "the crane lifts boats of up to fourteen tonnes on weekday mornings",
    ];
    let pages: Vec<String> = topics
        .iter()
        .map(|topic| scar_test_support::pdf_text_page(&[*topic; 12]))
        .collect();
    let pages: Vec<&str> = pages.iter().map(String::as_str).collect();
    let pdf = reports.join("harbour-rules.pdf");
    std::fs::write(&pdf, scar_test_support::pdf_with_pages(&pages)).unwrap();
    let picks = Picks {
        folder: Some(reports.clone()),
        ..Picks::default()
    };
    let opened = std::sync::Arc::clone(&picks.opened);
    let settings = Settings {
        controls: one_seed(),
        ..Settings::default()
    };
    let app = ScarApp::new(
        settings,
        environment(&library.path().join("indexes")),
        picks,
    );
    let mut harness = harness(app);
    harness.run_steps(2);
    harness.get_by_label("➕ Add folder…").click();
    step_until(&mut harness, |harness| {
        !harness.state().settings().library.is_empty() && !harness.state().is_busy()
    });
    harness
        .state_mut()
        .ask("How heavy a boat can the crane lift?");
    settle(&mut harness);

    let location = &harness.state().settings().library[0].location;
    let dir = location.folder().unwrap().to_owned();
    let index = scar_index::Index::open(&dir).unwrap();
    let document = &index.documents()[0];
    let last = index
        .chunk(scar_core::ChunkId(document.rows().end - 1))
        .unwrap();
    let page = last.page.expect("a PDF's chunks know their page");
    assert!(page > 1, "the last chunk starts on page {page}");
    harness
        .get_by_role_and_label(Role::Button, &format!("¶{}", last.ordinal))
        .click();
    harness.run_steps(2);
    harness.get_by_label_contains(&format!("¶{}, p. {page}", last.ordinal));
    harness.get_by_label("Open").click();
    harness.run_steps(1);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while opened.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "nothing was opened");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(
        *opened.lock().unwrap(),
        [(document.path.clone(), Some(page))]
    );
}

#[test]
fn a_reranker_s_verdict_stands_beside_each_seed() {
    let library = tempfile::tempdir().unwrap();
    let environment = scar_ui::Environment {
        rerank: scar_ui::Reranking::Sentence,
        ..environment(library.path())
    };
    let mut app = ScarApp::new(Settings::default(), environment, Picks::default());
    app.open_index(example_index());
    app.ask(KAYAK);
    let mut harness = crate::common::harness(app);
    settle(&mut harness);
    let report = harness.state().report().unwrap().clone();
    for seed in &report.ledger.seeds {
        let judged = seed.judged.unwrap();
        harness.get_by_label(&format!(
            "reranker {:.3} (first stage #{})",
            judged.score, judged.first_stage_rank
        ));
    }
}
