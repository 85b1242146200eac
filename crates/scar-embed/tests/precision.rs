//! The bf16, int8 and f16 CPU modes against f32, on a real model.

use std::io::Write as _;

use scar_embed::{DeviceChoice, EmbedError, EmbedOptions, Embedder, ModelFiles, Precision};

fn load(precision: Precision) -> Result<Embedder, EmbedError> {
    let dir = crate::common::models_dir().join("all-MiniLM-L6-v2");
    let files =
        ModelFiles::from_dir("all-MiniLM-L6-v2", dir).expect("run scripts/fetch-test-models");
    Embedder::load(&files, &EmbedOptions::new(DeviceChoice::Cpu, precision))
}

/// The vectors of `precision` (where this CPU runs it) against f32's: close, but not f32's.
fn agrees_with_f32(precision: Precision, missing: &str) {
    let ours = match load(precision) {
        Ok(model) => model,
        Err(EmbedError::PrecisionUnavailable { .. }) => {
            // Straight to stderr: the test harness hides what a passing test prints with
            // eprintln! unless run with --nocapture, and a skip should be seen.
            let _ = writeln!(
                std::io::stderr(),
                "precision::{precision}_vectors_agree_with_f32 skipped: this CPU has no {missing}"
            );
            return;
        }
        Err(other) => panic!("{other}"),
    };
    let f32 = load(Precision::F32).unwrap();
    assert_eq!(ours.precision(), precision);
    assert_eq!(f32.precision(), Precision::F32);
    assert!(
        ours.compute().starts_with(&format!("{precision} on ")),
        "{}",
        ours.compute()
    );
    let long = "The receiver acknowledges every segment it accepts. ".repeat(30);
    let texts = [
        "tcp",
        "What does the controller owe the data subject?",
        long.as_str(),
    ];
    let vectors = ours.embed_passages(&texts, &mut |_| {}).unwrap();
    let exact = f32.embed_passages(&texts, &mut |_| {}).unwrap();
    for i in 0..texts.len() {
        let cosine: f32 = vectors
            .row(i)
            .iter()
            .zip(exact.row(i))
            .map(|(a, b)| a * b)
            .sum();
        assert!(cosine >= 0.999, "{precision}, text {i}: cosine {cosine}");
        assert!(
            vectors.row(i) != exact.row(i),
            "text {i}: {precision} gave f32's vector exactly"
        );
    }
}

#[test]
fn bf16_vectors_agree_with_f32() {
    agrees_with_f32(Precision::Bf16, "AVX-512 BF16");
}

#[test]
fn int8_vectors_agree_with_f32() {
    agrees_with_f32(Precision::Int8, "AVX-512 VNNI or AVX-VNNI");
}

#[test]
fn f16_vectors_agree_with_f32() {
    agrees_with_f32(Precision::F16, "AVX2, FMA and F16C");
}
