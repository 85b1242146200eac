//! Publishing throughput with one writer and with several at once: each folder index alone
//! into an empty store, then all of them at once into another, each writer on its own thread
//! and connection, as separate `scar index` processes would be.
//!
//! `publish_throughput SERVER_URL RUNS INDEX...`: `SERVER_URL` names a database on a server where
//! the user may create databases (`scar_throughput_*` are made and dropped there). Prints
//! chunks per second, the median of RUNS.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use scar_index::{HnswSetting, Index};
use scar_postgres::publish;

/// A fresh, empty database `name` on the server of `url`, as a URL.
fn fresh(url: &str, name: &str) -> Result<String, Box<dyn std::error::Error>> {
    let mut client = postgres::Client::connect(url, postgres::NoTls)?;
    client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
    client.batch_execute(&format!("CREATE DATABASE {name}"))?;
    let (server, _) = url.rsplit_once('/').ok_or("a URL names its database")?;
    Ok(format!("{server}/{name}"))
}

/// Publishes every index in `indexes` into the store at `url` at once; chunks written per
/// second of the whole.
fn publish_all(url: &str, indexes: &[Index]) -> Result<f64, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let chunks = std::thread::scope(|scope| {
        let writers: Vec<_> = indexes
            .iter()
            .map(|index| {
                scope.spawn(move || {
                    publish(
                        index,
                        url,
                        &[],
                        HnswSetting::Keep,
                        &mut |_, _| {},
                        &AtomicBool::new(false),
                    )
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|writer| writer.join().expect("a writer panicked").map(|r| r.chunks))
            .sum::<Result<usize, _>>()
    })?;
    Ok(chunks as f64 / started.elapsed().as_secs_f64())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, runs, dirs @ ..] = args.as_slice() else {
        return Err("usage: publish_throughput SERVER_URL RUNS INDEX...".into());
    };
    let runs: usize = runs.parse()?;
    let indexes: Vec<Index> = dirs.iter().map(Index::open).collect::<Result<_, _>>()?;
    println!("| writers | documents | chunks | chunks/s (median of {runs}) |");
    println!("| --- | ---: | ---: | ---: |");
    let mut groups: Vec<(String, Vec<&Index>)> = dirs
        .iter()
        .zip(&indexes)
        .map(|(dir, index)| (format!("one: {dir}"), vec![index]))
        .collect();
    groups.push((
        format!("{} at once", indexes.len()),
        indexes.iter().collect(),
    ));
    for (label, group) in groups {
        let mut rates = Vec::with_capacity(runs);
        for run in 0..runs {
            let url = fresh(url, &format!("scar_throughput_{run}"))?;
            let owned: Vec<Index> = group
                .iter()
                .map(|index| Index::open(index.dir()))
                .collect::<Result<_, _>>()?;
            rates.push(publish_all(&url, &owned)?);
        }
        let documents: usize = group.iter().map(|index| index.documents().len()).sum();
        let chunks: usize = group.iter().map(|index| index.len()).sum();
        println!(
            "| {label} | {documents} | {chunks} | {:.0} |",
            median(rates)
        );
    }
    for run in 0..runs {
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        client.batch_execute(&format!(
            "DROP DATABASE IF EXISTS scar_throughput_{run} WITH (FORCE)"
        ))?;
    }
    Ok(())
}
