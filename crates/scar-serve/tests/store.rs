//! A PostgreSQL store served beside an index folder: searched as it is at each request, so a
//! store empty when the server started serves what is published later.

use std::sync::atomic::AtomicBool;

use scar_index::{HnswSetting, Index};
use scar_retrieve::FirstStage;
use scar_serve::{Library, SearchRequest, Source};
use scar_test_support::{example_index, postgres_database};

use crate::common::library_options;

#[test]
fn a_store_is_served_as_it_is_at_each_request() {
    let Some(url) = postgres_database("serve") else {
        return;
    };
    // A store with no chunks yet: what an empty folder index would be.
    let example = Index::open(example_index()).unwrap();
    let publish = |index: &Index| {
        scar_postgres::publish(
            index,
            &url,
            &[],
            HnswSetting::Keep,
            &mut |_, _| {},
            &AtomicBool::new(false),
        )
        .unwrap()
    };
    publish(&example);
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // Emptied behind the writers' backs, with the count of chunks holding each word.
    client
        .batch_execute("DELETE FROM scar_chunks; DELETE FROM scar_terms")
        .unwrap();
    let library = Library::open(
        &[
            Source::Postgres(url.clone()),
            Source::Folder(example_index().to_path_buf()),
        ],
        library_options(),
    )
    .unwrap();
    let database = url.rsplit('/').next().unwrap();
    assert_eq!(library.names(), [database, "example"]);
    let summaries = library.summaries().unwrap();
    assert_eq!(
        (summaries[0].documents, summaries[0].chunks),
        (example.documents().len(), 0)
    );

    let request = |index: &str| SearchRequest {
        question: "What does it cost to take my kayak on the ferry?".into(),
        index: Some(index.to_owned()),
        k: Some(3),
        first_stage: Some(FirstStage::Dense),
        ..SearchRequest::default()
    };
    let error = library
        .search(&request(database).checked().unwrap())
        .unwrap_err();
    assert!(error.to_string().contains("empty"), "{error}");

    // Published again while served: the requests see it once the store's count of chunks has
    // lived its time (a second, or a hundred times what counting took: longer on a busy
    // machine), so they are asked again until then.
    client.batch_execute("DELETE FROM scar_files").unwrap();
    publish(&example);
    let published = std::time::Instant::now();
    let stored = loop {
        match library.search(&request(database).checked().unwrap()) {
            Ok(report) => break report,
            Err(error) if published.elapsed().as_secs() < 10 => {
                assert!(error.to_string().contains("empty"), "{error}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(error) => panic!("not seen 10 s after it was published: {error}"),
        }
    };
    let folder = library
        .search(&request("example").checked().unwrap())
        .unwrap();
    let places = |report: &scar_retrieve::SearchReport| -> Vec<(String, u32)> {
        report
            .ledger
            .context
            .iter()
            .map(|&id| {
                let place = report.place(id).unwrap();
                (place.document.clone(), place.ordinal)
            })
            .collect()
    };
    assert_eq!(places(&stored), places(&folder));
    assert!(!places(&stored).is_empty());
    let summaries = library.summaries().unwrap();
    assert_eq!(summaries[0].chunks, example.len());
    assert!(
        summaries[0].dir.starts_with("postgres://"),
        "{:?}",
        summaries[0]
    );
}
