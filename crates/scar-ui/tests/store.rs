//! The app over a PostgreSQL store (`SCAR_TEST_POSTGRES`, which `scripts/test` starts): the
//! example index published there shows the folder's decisions, read from the server once per
//! question, and the controls decide again without it.

use std::sync::atomic::AtomicBool;

use egui::accesskit::Role;
use egui_kittest::kittest::Queryable;
use scar_index::{HnswSetting, Index};
use scar_policy::Outcome;
use scar_retrieve::SearchReport;
use scar_ui::{Controls, Location, ScarApp, Settings};

use crate::common::{
    KAYAK, Picks, asked_kayak, environment, example_index, harness, papers_scar, settle, workspace,
};

/// Each decision by where its chunk is, not by id: the ids are each store's own.
fn decisions(report: &SearchReport) -> Vec<(String, String, Option<Outcome>)> {
    let place = |id| {
        let place = report.place(id).unwrap();
        (place.name(), place.place())
    };
    report
        .ledger
        .seeds
        .iter()
        .flat_map(|seed| {
            let (name, at) = place(seed.id);
            std::iter::once((name, at, None)).chain(seed.neighbours.iter().filter_map(
                move |neighbour| {
                    let (name, at) = place(neighbour.id?);
                    Some((name, at, Some(neighbour.outcome)))
                },
            ))
        })
        .collect()
}

#[test]
fn a_store_in_the_library_shows_the_folder_s_decisions_and_decides_again_without_it() {
    let Some(url) = scar_test_support::postgres_database("app") else {
        return;
    };
    let index = Index::open(example_index()).unwrap();
    scar_postgres::publish(
        &index,
        &url,
        &[workspace().join("assets/example")],
        HnswSetting::Keep,
        &mut |_, _| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let library = tempfile::tempdir().unwrap();
    // The paper's SCAR over a dense seed reads no lexical ranking, which is each store's own.
    let folder = asked_kayak(papers_scar(), library.path());
    let expected = folder.state().report().unwrap().clone();

    let settings = Settings {
        controls: papers_scar(),
        ..Settings::default()
    };
    let mut app = ScarApp::new(settings, environment(library.path()), Picks::default());
    let store = Location::store(&url).unwrap();
    app.open(store.clone());
    app.ask(KAYAK);
    let mut harness = harness(app);
    settle(&mut harness);
    assert!(
        harness.state().error().is_none(),
        "{:?}",
        harness.state().error()
    );
    let before = harness.state().report().unwrap().clone();
    assert_eq!(decisions(&before), decisions(&expected));
    assert_eq!(before.comparison(), expected.comparison());

    // The library names the store by its database and server, and says what it holds.
    let entry = &harness.state().settings().library[0];
    assert_eq!(entry.location, store);
    harness.get_by_label(&entry.name());
    harness.get_by_label_contains(&format!("{} chunks in 4 documents", index.len()));
    harness.get_by_label(&format!("4 files · {} chunks · 2 md, 2 txt", index.len()));
    // The decisions, the seam map's cuts and the reader, from the chunks read once.
    harness.get_by_label("✔ accepted");
    assert!(harness.query_all_by_label("seed #1").count() > 0);
    assert!(harness.query_all_by_label_contains("cut ¶").count() > 0);
    let rejected = before
        .ledger
        .neighbours()
        .find(|n| n.outcome == Outcome::Rejected)
        .and_then(|n| n.id)
        .unwrap();
    let place = before.place(rejected).unwrap();
    harness
        .get_by_role_and_label(Role::Button, &format!("¶{}", place.ordinal))
        .click();
    harness.run_steps(2);
    assert_eq!(harness.state().selected_chunk(), Some(rejected));

    // The accepted neighbour falls below the bar at γ = 0.9: decided again at once, with no
    // worker and no server asked.
    let controls = Controls {
        gamma: 0.9,
        ..*harness.state().controls()
    };
    harness.state_mut().set_controls(controls);
    assert!(!harness.state().is_busy(), "no new search was asked for");
    harness.run_steps(2);
    let after = harness.state().report().unwrap();
    assert_eq!(after.ledger.count(Outcome::Accepted), 0);
    assert!(harness.query_by_label("✔ accepted").is_none());
}

#[test]
fn a_store_that_cannot_be_reached_is_named_without_its_password() {
    let library = tempfile::tempdir().unwrap();
    let mut app = ScarApp::new(
        Settings::default(),
        environment(library.path()),
        Picks::default(),
    );
    // Nothing listens on port 1.
    app.open(Location::store("postgres://scar:hunter2@127.0.0.1:1/docs").unwrap());
    let mut harness = harness(app);
    settle(&mut harness);
    let error = harness.state().error().unwrap().to_string();
    assert!(
        error.contains("cannot reach PostgreSQL at postgres://scar:***@127.0.0.1:1/docs"),
        "{error}"
    );
    harness.get_by_label_contains("cannot reach PostgreSQL");
    assert!(harness.query_by_label_contains("hunter2").is_none());
    // The library lists it by its database and server.
    harness.get_by_label("docs on 127.0.0.1:1");
}
